//! GPU columns of `tessera bench mesh --device cuda` (dissertation Tables 3.2-3.4).
//!
//! Each operation runs from scratch on an uploaded mesh (no result cached between runs; the
//! smoothing row times the iterations on the cached stencil, as the CPU column times the
//! iterations only, and the stencil has its own row; the outputs' allocations come from the
//! `Gpu`'s cache of freed buffers, as in any repeated use, and their frees go back to it), is
//! timed with CUDA events as the median of `runs` (at least 20) runs after 3 warm-up runs,
//! and is reported with the bytes it must move at least (each input array read once, each
//! output array written once), so `bytes / time` can be set against the measured copy
//! bandwidth (about 3.0 TB/s on the H100).

use super::{DeviceMesh, DeviceTcsr};
use crate::{MeshError, PolyMesh};
use tessera_gpu::Gpu;

/// One GPU benchmark row.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuBenchRow {
    /// Operation name (as in the CPU columns: `coboundary d3`, `cell_vertices`, ...).
    pub op: &'static str,
    /// Median time in milliseconds.
    pub median_ms: f64,
    /// Bytes the operation must move at least.
    pub bytes_moved: u64,
}

fn tcsr_bytes(nrows: usize, nnz: usize) -> u64 {
    4 * (nrows as u64 + 1) + 4 * nnz as u64
}

/// Median of `runs` CUDA-event timings of `f` after `warm` warm-up runs, in milliseconds;
/// a non-GPU error inside `f` is returned as is (the benchmarks of the mesh module share it).
pub(crate) fn median_ms_of(
    gpu: &Gpu,
    runs: usize,
    warm: usize,
    mut f: impl FnMut() -> Result<(), MeshError>,
) -> Result<f64, MeshError> {
    let mut err = None;
    let ms = gpu.median_ms(runs, warm, || match f() {
        Ok(()) => Ok(()),
        Err(MeshError::Gpu(e)) => Err(e),
        Err(e) => {
            err = Some(e);
            Ok(())
        }
    })?;
    match err {
        Some(e) => Err(e),
        None => Ok(ms),
    }
}

/// Time every GPU mesh operation on `mesh` (see the module docs). Returns
/// `(op, median_ms, bytes_moved)` rows in a fixed order.
pub fn run_gpu_mesh_bench(
    gpu: &Gpu,
    mesh: &PolyMesh,
    runs: usize,
) -> Result<Vec<(&'static str, f64, u64)>, MeshError> {
    let runs = runs.max(20);
    let warm = 3;
    let mut dm = DeviceMesh::upload(gpu, mesh)?;
    let (nv, ne, nf, nc) = (
        mesh.num_vertices(),
        mesh.num_edges(),
        mesh.num_faces(),
        mesh.num_cells(),
    );
    let (fe_nnz, cf_nnz) = (mesh.face_edges().nnz(), mesh.cell_faces().nnz());
    // relations once, for sizes of outputs and inputs of later ops
    dm.require_vertex_edges()?;
    dm.require_face_cells()?;
    let mut rows: Vec<(&'static str, f64, u64)> = Vec::new();
    let k = dm.kernels();
    let mut time = |name: &'static str,
                    bytes: u64,
                    f: &mut dyn FnMut() -> Result<(), MeshError>|
     -> Result<(), MeshError> {
        rows.push((name, median_ms_of(gpu, runs, warm, f)?, bytes));
        Ok(())
    };
    // δ3 = ∂3ᵀ: read ∂3, write δ3 (same nnz)
    time(
        "coboundary d3 (face_cells)",
        tcsr_bytes(nc, cf_nnz) + tcsr_bytes(nf, cf_nnz),
        &mut || k.transpose_short_rows(dm.cell_faces()).map(drop),
    )?;
    // δ2 as the mesh computes it with δ1 cached (above): for faces found canonical at upload,
    // read off δ1 (`DeviceMesh::edge_faces` caches δ1 first); then with δ1 computed in the call,
    // what `edge_faces` costs from the stored operators alone; then the general transpose
    time(
        "coboundary d2 (edge_faces)",
        tcsr_bytes(nf, fe_nnz) + tcsr_bytes(ne, fe_nnz),
        &mut || dm.compute_edge_faces().map(drop),
    )?;
    time(
        "coboundary d2 with its d1 (nothing cached)",
        tcsr_bytes(nf, fe_nnz) + tcsr_bytes(ne, fe_nnz),
        &mut || dm.edge_faces_off(&dm.compute_vertex_edges()?).map(drop),
    )?;
    time(
        "coboundary d2 (general transpose)",
        tcsr_bytes(nf, fe_nnz) + tcsr_bytes(ne, fe_nnz),
        &mut || k.transpose(dm.face_edges()).map(drop),
    )?;
    time(
        "coboundary d1 (vertex_edges)",
        8 * ne as u64 + tcsr_bytes(nv, 2 * ne),
        &mut || dm.compute_vertex_edges().map(drop),
    )?;
    let fv_nnz = mesh.face_vertices().nnz();
    time(
        "face_vertices",
        tcsr_bytes(nf, fe_nnz) + 8 * ne as u64 + tcsr_bytes(nf, fv_nnz),
        &mut || {
            k.face_vertices(dm.face_edges(), dm.edge_vertices(), nv)
                .map(drop)
        },
    )?;
    let ce_nnz = mesh.cell_edges().nnz();
    time(
        "cell_edges",
        tcsr_bytes(nc, cf_nnz) + tcsr_bytes(nf, fe_nnz) + tcsr_bytes(nc, ce_nnz),
        &mut || k.cell_edges(dm.cell_faces(), dm.face_edges()).map(drop),
    )?;
    let cv_nnz = mesh.cell_vertices().nnz();
    let cv_bytes =
        tcsr_bytes(nc, cf_nnz) + tcsr_bytes(nf, fe_nnz) + 8 * ne as u64 + tcsr_bytes(nc, cv_nnz);
    // the path the mesh takes: tetrahedra known closed (built from typed tetrahedra, or
    // validated) read two faces and three edges a cell
    time("cell_vertices", cv_bytes, &mut || {
        dm.compute_cell_vertices().map(drop)
    })?;
    // the kernels of meshes not known closed, which check every cell
    time("cell_vertices (cells checked)", cv_bytes, &mut || {
        k.cell_vertices(dm.cell_faces(), dm.face_edges(), dm.edge_vertices(), nv)
            .map(drop)
    })?;
    let fc: &DeviceTcsr = dm.cache.face_cells.as_ref().expect("required above");
    let b = crate::boundary::extract_boundary(mesh);
    let bbytes = tcsr_bytes(nf, cf_nnz)
        + tcsr_bytes(nf, fe_nnz)
        + 8 * ne as u64
        + 4 * (b.faces.len() + b.edges.len() + b.vertices.len()) as u64;
    time("boundary", bbytes, &mut || dm.boundary_from(fc).map(drop))?;
    // the same with the lists' lengths left on the device (no host synchronisation)
    time("boundary (lengths on the device)", bbytes, &mut || {
        dm.boundary_enqueue_from(fc).map(drop)
    })?;
    // smoothing: 10 iterations, each reads δ1, ∂1 (per neighbour) and positions, writes positions
    let iters = 10usize;
    let sbytes = iters as u64
        * (tcsr_bytes(nv, 2 * ne) + 8 * ne as u64 + 4 * nv as u64 + 2 * 24 * nv as u64);
    let mut dm2 = DeviceMesh::upload(gpu, mesh)?;
    dm2.require_vertex_edges()?;
    dm2.require_face_cells()?;
    // the stencil the steps read (boundary vertex marks, neighbour of every δ1 entry):
    // reads δ3, ∂2, ∂1 and δ1, writes one word per vertex and one per δ1 entry
    let stencil_bytes = tcsr_bytes(nf, cf_nnz)
        + tcsr_bytes(nf, fe_nnz)
        + 2 * 8 * ne as u64
        + tcsr_bytes(nv, 2 * ne)
        + 4 * nv as u64
        + 4 * 2 * ne as u64;
    rows.push((
        "smoothing stencil (boundary marks, neighbours)",
        median_ms_of(gpu, runs, warm, || {
            dm2.forget_smoothing_stencil();
            dm2.require_smoothing_stencil()
        })?,
        stencil_bytes,
    ));
    rows.push((
        "laplacian smoothing x10",
        median_ms_of(gpu, runs, warm, || dm2.laplacian_smooth(iters))?,
        sbytes,
    ));
    // simplex derivation (tetrahedral meshes only): sort + unique edges and faces, cell
    // operators, Eq. 3.14 orientation; reads cellVertices, writes the derived arrays
    if let Ok(sm) = crate::simplex::SimplexMesh::from_poly(mesh) {
        if sm.dim() == 3 && sm.num_vertices() <= 1 << super::simplex::FACE_BITS {
            let cv = gpu.upload(sm.cell_vertices())?;
            let (ne, nf) = (sm.num_edges() as u64, sm.num_faces() as u64);
            let c = sm.num_cells() as u64;
            let bytes = 16 * c + 8 * ne + 8 * nf + (24 + 16 + 16) * c + 12 * nf;
            let ms = median_ms_of(gpu, runs, warm, || {
                super::simplex::derive_device(gpu, &cv, 3, sm.num_vertices()).map(drop)
            })?;
            rows.push(("simplex derivation (edges, faces, Eq. 3.14)", ms, bytes));
        }
    }
    Ok(rows)
}
