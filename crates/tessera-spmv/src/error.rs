//! Errors of the SpMV code generator and autotuner (one enum for the crate, DESIGN.md).

use std::path::PathBuf;

/// Everything that can go wrong in `tessera-spmv`: bad entry specifications, bad input
/// files (with file and line), inconsistent matrices, template rendering, the tuning
/// database and the GPU runtime.
#[derive(Debug, thiserror::Error)]
pub enum SpmvError {
    /// An entry specification (built-in name or TOML spec) is invalid.
    #[error("entry spec `{name}`: {msg}")]
    EntrySpec { name: String, msg: String },
    /// A TOML entry specification could not be parsed.
    #[error("{file}: TOML entry spec: {msg}")]
    EntryToml { file: String, msg: String },
    /// A text input file (Matrix Market, OBJ, ASCII PLY) is malformed.
    #[error("{file}:{line}: {msg}")]
    Parse {
        file: String,
        line: usize,
        msg: String,
    },
    /// A binary input file (binary PLY) is malformed.
    #[error("{file}: byte {offset}: {msg}")]
    ParseBinary {
        file: String,
        offset: usize,
        msg: String,
    },
    /// Reading a file failed.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A layout, schedule or option string is not understood.
    #[error("invalid {what} `{value}`: {expected}")]
    BadOption {
        what: &'static str,
        value: String,
        expected: String,
    },
    /// A matrix or vector has inconsistent sizes or indices.
    #[error("invalid matrix: {0}")]
    BadMatrix(String),
    /// The input matrix cannot represent the requested entry type.
    #[error("matrix `{matrix}` cannot be used with entry `{entry}`: {msg}")]
    EntryMismatch {
        matrix: String,
        entry: String,
        msg: String,
    },
    /// A triangle mesh is unusable (degenerate face, bad index).
    #[error("mesh: {0}")]
    BadMesh(String),
    /// The code generator's template failed to render.
    #[error("template: {0}")]
    Template(String),
    /// The tuning database could not be read or written.
    #[error("tuning database {path}: {msg}")]
    TuningDb { path: PathBuf, msg: String },
    /// A schedule is outside the device's limits.
    #[error("schedule n_b = {n_b}, n_t = {n_t}: {msg}")]
    BadSchedule { n_b: u32, n_t: u32, msg: String },
    /// The GPU runtime (tessera-gpu) reported an error.
    #[error("gpu: {0}")]
    Gpu(String),
    /// No GPU is present.
    #[error("no CUDA device available: {0}")]
    NoGpu(String),
}

impl SpmvError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SpmvError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, SpmvError>;
