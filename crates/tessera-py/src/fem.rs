//! `tessera.fem`: assembly of the stiffness and consistent mass matrices of linear
//! elasticity for higher-order tetrahedra (dissertation Chapter 4, Eq. 4.1, 4.7), static
//! solves from a problem file (dissertation §4.1) and the rigid-body modes.
//!
//! Matrices come back as BSR arrays (`indptr`, `indices`, `data (nb, 3, 3)`): the block
//! rows of Bin-BCSR* with the diagonal block in place and columns sorted, DOFs node-major
//! (`3 i + k`). The arrays are vectors handed to NumPy without a copy; the Python wrapper
//! makes them a `scipy.sparse.bsr_matrix`.

use crate::device;
use crate::errors::{fem_err, raise, static_err, value_error};
use crate::mesh::Mesh;
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::Path;
use tessera_core::{DeviceChoice, Par};
use tessera_fem::assemble::{assemble_mass, assemble_stiffness, AssembleOptions, Summation};
use tessera_fem::material::Material;
use tessera_fem::nodes::HoMesh;
use tessera_fem::problem::Problem;
use tessera_fem::results::{compute_results, summary_json};
use tessera_fem::static_solve::{solve_problem, StaticOptions};
use tessera_mesh::simplex::SimplexMesh;
use tessera_sparse::binbcsr::{BinBcsr, Scalar};

/// The tetrahedral mesh of `m` in the simplex form FEM needs (dissertation §3.4.4).
fn simplex_of(m: &Mesh) -> PyResult<SimplexMesh> {
    SimplexMesh::from_poly(&m.mesh).map_err(|e| {
        raise(
            "FemError",
            format!("FEM assembly needs a tetrahedral mesh: {e}"),
        )
    })
}

type Bsr<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    usize,
    String,
);

fn bsr_arrays<'py, T: Scalar + numpy::Element>(
    py: Python<'py>,
    k: BinBcsr<T>,
    stats: serde_json::Value,
) -> PyResult<Bsr<'py>> {
    let b = k.to_bsr();
    drop(k);
    let n = b.nb_rows * b.block_dim;
    let e = b.block_dim;
    let nb = b.col_idx.len();
    // same-size element maps reuse the allocation (no copy)
    let indptr: Vec<i64> = b.row_ptr.into_iter().map(|x| x as i64).collect();
    let indices: Vec<i32> = b.col_idx.into_iter().map(|x| x as i32).collect();
    let data = PyArray1::from_vec(py, b.values).reshape([nb, e, e])?;
    Ok((
        PyArray1::from_vec(py, indptr),
        PyArray1::from_vec(py, indices).into_any(),
        data.into_any(),
        n,
        stats.to_string(),
    ))
}

/// Native `assemble`: BSR arrays, the matrix size and the statistics (JSON).
#[pyfunction]
#[pyo3(signature = (mesh, order = 1, youngs = 1.0, poisson = 0.3, density = 1.0, matrix = "stiffness", precision = "f64", device = "auto", summation = "auto"))]
#[allow(clippy::too_many_arguments)]
pub fn assemble<'py>(
    py: Python<'py>,
    mesh: &Bound<'py, Mesh>,
    order: usize,
    youngs: f64,
    poisson: f64,
    density: f64,
    matrix: &str,
    precision: &str,
    device: &str,
    summation: &str,
) -> PyResult<Bsr<'py>> {
    let stiffness = match matrix {
        "stiffness" => true,
        "mass" => false,
        _ => {
            return Err(value_error(format!(
                "matrix {matrix:?}: expected \"stiffness\" or \"mass\""
            )))
        }
    };
    let f32 = match precision {
        "f64" | "float64" => false,
        "f32" | "float32" => true,
        _ => {
            return Err(value_error(format!(
                "precision {precision:?}: expected \"f64\" or \"f32\""
            )))
        }
    };
    let summation: Summation = summation.parse().map_err(value_error)?;
    if !(1..=12).contains(&order) {
        return Err(value_error(format!("order = {order}: need 1 <= p <= 12")));
    }
    let material = Material::new(youngs, poisson, density);
    material.validate().map_err(fem_err)?;
    let gpu = device::open(py, device)?;
    let sm = simplex_of(mesh.get())?;
    let ho = py
        .allow_threads(|| HoMesh::new(sm, order))
        .map_err(fem_err)?;
    let opts = AssembleOptions {
        summation,
        par: Par::auto(),
        device: match &gpu {
            Some(g) => DeviceChoice::Cuda(g.ordinal()),
            None => DeviceChoice::Cpu,
        },
    };
    let dev = device::name_of(&gpu);
    macro_rules! run {
        ($t:ty) => {{
            let r: Result<(BinBcsr<$t>, tessera_fem::assemble::AssemblyStats), PyErr> =
                py.allow_threads(|| match gpu.as_deref() {
                    None => {
                        let a = if stiffness {
                            assemble_stiffness::<$t>(&ho, &material, &opts)
                        } else {
                            assemble_mass::<$t>(&ho, &material, &opts)
                        }
                        .map_err(fem_err)?;
                        Ok((a.matrix, a.stats))
                    }
                    Some(g) => {
                        let (dm, stats) = if stiffness {
                            tessera_fem::cuda::assemble_stiffness_gpu::<$t>(g, &ho, &material, &opts)
                        } else {
                            tessera_fem::cuda::assemble_mass_gpu::<$t>(g, &ho, &material, &opts)
                        }
                        .map_err(fem_err)?;
                        let host = dm
                            .download(g)
                            .map_err(|e| raise("DeviceError", e.to_string()))?;
                        Ok((host, stats))
                    }
                });
            let (k, stats) = r?;
            let j = serde_json::json!({
                "device": dev,
                "order": order,
                "nodes": ho.num_nodes(),
                "precision": if f32 { "f32" } else { "f64" },
                "summation": summation.resolve(gpu.is_none(), order).name(),
                "dofs": stats.dofs,
                "block_nonzeros": stats.block_nonzeros,
                "zayer_bound": stats.zayer_bound,
                "bytes_allocated": stats.bytes_allocated,
                "padding_blocks": stats.padding_blocks,
                "aux_bytes": stats.aux_bytes,
                "stages_ms": stats.stages_ms,
            });
            bsr_arrays(py, k, j)
        }};
    }
    if f32 {
        run!(f32)
    } else {
        run!(f64)
    }
}

/// The six rigid-body modes at the nodes of order `order` (translations x, y, z, rotations
/// about x, y, z through the centroid, lengths scaled to O(1)): `(3 n, 6)` float64, rows
/// node-major like the matrices.
#[pyfunction]
#[pyo3(signature = (mesh, order = 1))]
pub fn rigid_body_modes<'py>(
    py: Python<'py>,
    mesh: &Bound<'py, Mesh>,
    order: usize,
) -> PyResult<Bound<'py, PyAny>> {
    if !(1..=12).contains(&order) {
        return Err(value_error(format!("order = {order}: need 1 <= p <= 12")));
    }
    let sm = simplex_of(mesh.get())?;
    let b = py
        .allow_threads(|| -> Result<Vec<f64>, tessera_fem::error::FemError> {
            let ho = HoMesh::new(sm, order)?;
            Ok(tessera_solve::nullspace::rigid_body_modes(
                &ho.node_positions(),
                &[],
                tessera_solve::NearNullSpace::RigidBody,
            ))
        })
        .map_err(fem_err)?;
    let rows = b.len() / 6;
    Ok(PyArray1::from_vec(py, b).reshape([rows, 6])?.into_any())
}

/// Native `solve`: a problem as TOML text (or JSON text mirroring the TOML keys, from a
/// dict), solved as `tessera fem solve` does; returns a dict of NumPy arrays and the
/// summary (JSON text).
#[pyfunction]
#[pyo3(signature = (text, name, base, is_json = false, device = "auto", allow_inverted = false))]
pub fn solve<'py>(
    py: Python<'py>,
    text: &str,
    name: &str,
    base: &str,
    is_json: bool,
    device: &str,
    allow_inverted: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let toml_text = if is_json {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| value_error(e.to_string()))?;
        let t = toml::Value::try_from(v).map_err(|e| {
            raise(
                "ProblemError",
                format!("the problem dict cannot be written as TOML: {e}"),
            )
        })?;
        toml::to_string(&t).map_err(|e| {
            raise(
                "ProblemError",
                format!("the problem dict cannot be written as TOML: {e}"),
            )
        })?
    } else {
        text.to_string()
    };
    let problem = Problem::parse(&toml_text, name, Path::new(base))
        .map_err(|e| raise("ProblemError", e.to_string()))?;
    let gpu = device::open(py, device)?;
    let opts = StaticOptions {
        par: Par::auto(),
        device: match &gpu {
            Some(g) => DeviceChoice::Cuda(g.ordinal()),
            None => DeviceChoice::Cpu,
        },
        gpu: gpu.clone(),
        allow_inverted,
        ..Default::default()
    };
    let t0 = std::time::Instant::now();
    let (sol, results) = py.allow_threads(|| -> PyResult<_> {
        let sol = solve_problem(&problem, &opts, &mut |_| {}).map_err(static_err)?;
        let lame = problem.material.lame().map_err(fem_err)?;
        let results = compute_results(&sol.ho, &sol.u, lame).map_err(fem_err)?;
        Ok((sol, results))
    })?;
    let extra = serde_json::json!({
        "device": sol.device,
        "preconditioner": sol.solver.preconditioner,
        "fixed_dofs": sol.constraints.num_fixed(),
        "block_nonzeros": sol.assembly.block_nonzeros,
        "youngs": problem.material.youngs,
        "poisson": problem.material.poisson,
        "total_ms": t0.elapsed().as_secs_f64() * 1e3,
    });
    let summary = summary_json(
        &problem.title,
        &sol.ho,
        sol.u.len(),
        sol.nonzeros,
        &sol.stages_ms,
        &sol.report,
        &results,
        extra,
    );
    let d = PyDict::new(py);
    let nn = results.displacement.len();
    let nc = results.cell_von_mises.len();
    let v3 =
        |v: Vec<[f64; 3]>, n: usize| PyArray1::from_vec(py, v.into_flattened()).reshape([n, 3]);
    let v6 =
        |v: Vec<[f64; 6]>, n: usize| PyArray1::from_vec(py, v.into_flattened()).reshape([n, 6]);
    d.set_item("displacement", v3(results.displacement, nn)?)?;
    d.set_item("strain", v6(results.strain, nn)?)?;
    d.set_item("stress", v6(results.stress, nn)?)?;
    d.set_item("von_mises", PyArray1::from_vec(py, results.von_mises))?;
    d.set_item("cell_strain", v6(results.cell_strain, nc)?)?;
    d.set_item("cell_stress", v6(results.cell_stress, nc)?)?;
    d.set_item(
        "cell_von_mises",
        PyArray1::from_vec(py, results.cell_von_mises),
    )?;
    let pos = sol.ho.node_positions();
    let np = pos.len();
    d.set_item("nodes", v3(pos, np)?)?;
    let m = sol.ho.mesh();
    d.set_item(
        "cells",
        PyArray1::from_slice(py, m.cell_vertices())
            .reshape([m.num_cells(), m.vertices_per_cell()])?,
    )?;
    d.set_item("coefficients", PyArray1::from_vec(py, sol.u))?;
    d.set_item("load", PyArray1::from_vec(py, sol.f))?;
    d.set_item("summary", summary.to_string())?;
    Ok(d)
}
