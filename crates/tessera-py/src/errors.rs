//! Rust errors as Python exceptions. The exception classes live in `tessera._errors`
//! (so that they can inherit from both `TesseraError` and `ValueError`); this module looks
//! them up and fills in their attributes (file and line of a parse error).

use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyType;
use tessera_fem::error::FemError;
use tessera_fem::static_solve::StaticError;
use tessera_mesh::MeshError;
use tessera_query::QueryError;

/// An instance of `tessera._errors.<class>` with message `msg`.
pub fn raise(class: &str, msg: impl Into<String>) -> PyErr {
    let msg = msg.into();
    Python::with_gil(|py| match class_of(py, class) {
        Ok(cls) => PyErr::from_type(cls, (msg,)),
        Err(e) => e,
    })
}

fn class_of<'py>(py: Python<'py>, class: &str) -> PyResult<Bound<'py, PyType>> {
    let m = py.import("tessera._errors")?;
    Ok(m.getattr(class)?.downcast_into::<PyType>()?)
}

/// `ValueError(msg)`: bad arguments (dtype, shape, ranges).
pub fn value_error(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

/// Mesh errors: parse errors become `ParseError` with `path`, `location` and `line` (None
/// for binary files, which give a byte offset in `location`), IO errors `OSError` /
/// `FileNotFoundError`, GPU errors `DeviceError`, all else `MeshError`.
pub fn mesh_err(e: MeshError) -> PyErr {
    match e {
        MeshError::Parse {
            ref path,
            ref location,
            ..
        } => Python::with_gil(|py| {
            let msg = e.to_string();
            let build = || -> PyResult<PyErr> {
                let cls = class_of(py, "ParseError")?;
                let inst = cls.call1((msg.clone(),))?;
                inst.setattr("path", path.display().to_string())?;
                inst.setattr("location", location.clone())?;
                let line: Option<usize> = location
                    .strip_prefix("line ")
                    .and_then(|l| l.trim().parse().ok());
                inst.setattr("line", line)?;
                Ok(PyErr::from_value(inst))
            };
            build().unwrap_or_else(|err| err)
        }),
        MeshError::Io { path, source } => {
            let msg = format!("{}: {source}", path.display());
            if source.kind() == std::io::ErrorKind::NotFound {
                PyFileNotFoundError::new_err(msg)
            } else {
                PyOSError::new_err(msg)
            }
        }
        MeshError::Gpu(g) => raise("DeviceError", g.to_string()),
        other => raise("MeshError", other.to_string()),
    }
}

pub fn fem_err(e: FemError) -> PyErr {
    match e {
        FemError::Mesh(m) => mesh_err(m),
        FemError::Device { .. } => raise("DeviceError", e.to_string()),
        FemError::Solve(s) => raise("SolveError", s.to_string()),
        other => raise("FemError", other.to_string()),
    }
}

pub fn static_err(e: StaticError) -> PyErr {
    match e {
        StaticError::Mesh(m) => mesh_err(m),
        StaticError::Fem(f) => fem_err(f),
        StaticError::Solve(s) => raise("SolveError", s.to_string()),
        StaticError::Problem(p) => raise("ProblemError", p.to_string()),
        StaticError::Selection { .. } => raise("ProblemError", e.to_string()),
        other => raise("FemError", other.to_string()),
    }
}

/// Query errors keep the byte span of the expression they refer to in the message.
pub fn query_err(e: QueryError) -> PyErr {
    match e {
        QueryError::Gpu(_) => raise("DeviceError", e.to_string()),
        other => raise("QueryError", other.to_string()),
    }
}
