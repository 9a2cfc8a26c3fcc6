//! Volumetric Catmull-Clark subdivision on the GPU (dissertation §3.4.3, Eqs. 3.1-3.10;
//! GPU column of Table 3.4).
//!
//! Produces exactly the topology of the CPU reference [`crate::subdivide::catmull_clark`]
//! (same numbering of new vertices, edges, faces and cells, same row order and signs) and
//! its positions with the sums formed in the same order (kernels compiled with
//! `--fmad=false`, so the results agree to rounding of the last bits at most).
//!
//! Algorithm: every output array size is known from the input operators and the derived
//! relations (Eqs. 3.1-3.4: `|V|+|E|+|F|+|C|` vertices, `nnz(∂1)+nnz(∂2)+nnz(∂3)` edges,
//! `nnz(∂̂2¹)+nnz(∂̂3¹)` faces, `nnz(∂̂3²)` cells), and every output row starts at an offset
//! of an input relation (new ∂2 entries of face `k` at `4k`, the cell-cell rows of cell
//! `c` inside `4 off(∂̂3¹)[c]..`), so each kernel fills its slots with one thread per input
//! element after the counts and scans of the [`precompute`] step (count-scan-fill). The
//! pre-computation derives on the device ∂̂2¹, δ3, δ2, δ1 (cached on the [`DeviceMesh`] when
//! computed through it), ∂̂3¹, ∂̂3², and edge -> cells, vertex -> cells as the transposes of
//! ∂̂3¹ and ∂̂3² (Listing 3.1).
//!
//! Non-manifold or otherwise unsupported input is detected on the device (the checks of the
//! CPU reference: faces with fewer than 3 edges or not in one cell or two oppositely
//! oriented cells, pinched faces, edges in no face or with other than 0 or 2 boundary
//! faces, self-loop edges, cells without faces or not closed). When a check fires, the
//! mesh is downloaded once and the CPU reference names the first offending element, so the
//! error kind and message are exactly the CPU's ([`MeshError::Unsupported`] or
//! [`MeshError::InvalidTopology`]). ∂2 rows not in loop order are reordered on the device
//! first, as the CPU reference does.

use super::{DeviceMesh, DeviceRelations, DeviceTcsr, MeshKernels};
use crate::{MeshError, PolyMesh};
use std::ops::Deref;
use std::sync::Arc;
use tessera_gpu::{CompileOptions, Event, Gpu, Kernel, LaunchConfig, Module};

/// CUDA source of the subdivision kernels (deterministic: a constant).
pub const SOURCE: &str = include_str!("kernels/subdivide.cu");

const BLOCK: u32 = 256;

/// The kernel names launched by this module (checked against [`SOURCE`] without a GPU).
pub const KERNELS: &[&str] = &[
    "cc_loop_order_flags",
    "cc_loop_order_fix",
    "cc_check_faces",
    "cc_check_edges",
    "cc_cell_points",
    "cc_face_centroids",
    "cc_face_points",
    "cc_edge_acc",
    "cc_edge_points",
    "cc_vertex_points",
    "cc_edge_edges",
    "cc_face_edges",
    "cc_cell_edges",
    "cc_iota4",
    "cc_face_faces",
    "cc_face_faces_uniform",
    "cc_cells",
];

fn module(gpu: &Gpu) -> Result<Arc<Module>, MeshError> {
    let mut opts = CompileOptions::named("tessera_subdivide.cu");
    // same rounding as the CPU reference: no contraction of a * b + c into FMA
    opts.extra.push("--fmad=false".into());
    Ok(gpu.compile(SOURCE, &opts)?)
}

fn cfg(n: usize) -> Result<LaunchConfig, MeshError> {
    Ok(LaunchConfig::for_items(n, BLOCK)?)
}

/// A relation either borrowed from the device mesh's cache or computed for one call.
pub enum Rel<'a> {
    Cached(&'a DeviceTcsr),
    Owned(DeviceTcsr),
}

impl Deref for Rel<'_> {
    type Target = DeviceTcsr;
    fn deref(&self) -> &DeviceTcsr {
        match self {
            Rel::Cached(r) => r,
            Rel::Owned(r) => r,
        }
    }
}

/// Every derived relation one subdivision level reads (the "Pre." column of Table 3.4).
pub struct SubdivisionRelations<'a> {
    /// ∂̂2¹ face -> vertex loop.
    pub face_vertices: Rel<'a>,
    /// δ3 face -> cells.
    pub face_cells: Rel<'a>,
    /// δ2 edge -> faces.
    pub edge_faces: Rel<'a>,
    /// δ1 vertex -> edges.
    pub vertex_edges: Rel<'a>,
    /// ∂̂3¹ cell -> edges (sorted).
    pub cell_edges: Rel<'a>,
    /// ∂̂3² cell -> vertices (sorted).
    pub cell_vertices: Rel<'a>,
    /// edge -> cells, the transpose of ∂̂3¹.
    pub edge_cells: DeviceTcsr,
    /// vertex -> cells, the transpose of ∂̂3².
    pub vertex_cells: DeviceTcsr,
}

impl SubdivisionRelations<'_> {
    /// Bytes of all relations.
    pub fn bytes(&self) -> usize {
        [
            &*self.face_vertices,
            &*self.face_cells,
            &*self.edge_faces,
            &*self.vertex_edges,
            &*self.cell_edges,
            &*self.cell_vertices,
            &self.edge_cells,
            &self.vertex_cells,
        ]
        .iter()
        .map(|r| r.bytes())
        .sum()
    }
}

/// Events recorded on the stream after each stage of a level (no synchronisation), for
/// [`bench_catmull_clark_stages`]: where the time of a level goes.
struct Stages<'g> {
    gpu: &'g Gpu,
    marks: Vec<(&'static str, Event)>,
}

fn mark(st: &mut Option<Stages<'_>>, name: &'static str) -> Result<(), MeshError> {
    if let Some(s) = st {
        let e = s.gpu.new_event()?;
        e.record(s.gpu)?;
        s.marks.push((name, e));
    }
    Ok(())
}

/// Pre-computation of one level (dissertation Table 3.4, "Pre."): the relations of
/// [`SubdivisionRelations`], taken from the device cache of `dm` where present, else
/// computed on the device (and not cached: `dm` is borrowed shared).
///
/// The relations are enqueued with no host synchronisation (`precompute_relations`: rows
/// sorted without reading the longest row, register kernels for cells of one shape whose
/// closedness is checked on the device); one synchronisation at the end reads the flag of
/// those checks, and when it is set the relations are computed again by the general
/// operations (one synchronisation each).
pub fn precompute<'a>(dm: &'a DeviceMesh<'_>) -> Result<SubdivisionRelations<'a>, MeshError> {
    let flag = dm.gpu().zeros::<u32>(1)?;
    let rel = precompute_relations(dm, &mut None, Some(&flag))?;
    if dm.gpu().download_at(&flag, 0)? == 0 {
        return Ok(rel);
    }
    drop(rel);
    precompute_relations(dm, &mut None, None)
}

/// The relations of [`precompute`]. With `flag` (the fast path), with no host
/// synchronisation (for meshes whose cells are of one shape; otherwise cell edges and
/// vertices take the general path): every condition under which a relation may differ from
/// the general operation's (a row of more than 2048 entries left unsorted, a face loop that
/// does not close, a cell that is not closed) sets `flag`, and the caller must read it before
/// using the relations as indices (they stay in range either way) and discard them when it is
/// set. Without `flag` (the careful path), by the general operations, each exact.
fn precompute_relations<'a>(
    dm: &'a DeviceMesh<'_>,
    st: &mut Option<Stages<'_>>,
    flag: Option<&tessera_gpu::DeviceBuffer<u32>>,
) -> Result<SubdivisionRelations<'a>, MeshError> {
    let k = &dm.kernels;
    let c: &DeviceRelations = &dm.cache;
    let (cf, fe, ev, nv) = (
        &dm.cell_faces,
        &dm.face_edges,
        &dm.edge_vertices,
        dm.nvertices,
    );
    let get = |cached: &'a Option<DeviceTcsr>,
               f: &dyn Fn() -> Result<DeviceTcsr, MeshError>|
     -> Result<Rel<'a>, MeshError> {
        Ok(match cached {
            Some(r) => Rel::Cached(r),
            None => Rel::Owned(f()?),
        })
    };
    let transpose = |m: &DeviceTcsr| match flag {
        Some(f) => k.transpose_deferred(m, f),
        None => k.transpose(m),
    };
    let face_vertices = get(&c.face_vertices, &|| match flag {
        Some(f) => k.face_vertices_deferred(fe, ev, nv, f),
        None => k.face_vertices(fe, ev, nv),
    })?;
    mark(st, "pre: face vertices")?;
    let face_cells = get(&c.face_cells, &|| k.transpose_short_rows(cf))?;
    mark(st, "pre: δ3")?;
    // δ1 by the buckets cut at upload where there are some (exact, no synchronisation), and
    // δ2 read off it for faces found canonical at upload (issue 20)
    let vertex_edges = get(&c.vertex_edges, &|| {
        if dm.edge_buckets.is_some() {
            return dm.compute_vertex_edges();
        }
        match flag {
            Some(f) => k.transpose_edge_pairs_deferred(ev, nv, f),
            None => k.transpose_edge_pairs(ev, nv),
        }
    })?;
    mark(st, "pre: δ1")?;
    let edge_faces = get(&c.edge_faces, &|| {
        if dm.face_buckets.is_some() {
            return dm.edge_faces_off(&vertex_edges);
        }
        transpose(fe)
    })?;
    mark(st, "pre: δ2")?;
    let cell_edges = get(&c.cell_edges, &|| match flag {
        Some(f) => k.cell_edges_deferred(cf, fe, f),
        None => k.cell_edges(cf, fe),
    })?;
    mark(st, "pre: cell edges")?;
    let cell_vertices = get(&c.cell_vertices, &|| {
        // tetrahedra known closed: exact without a check, on either path
        if let Some(r) = dm.closed_cell_vertices()? {
            return Ok(r);
        }
        match flag {
            Some(f) => k.cell_vertices_deferred(cf, fe, ev, nv, f),
            None => k.cell_vertices(cf, fe, ev, nv),
        }
    })?;
    mark(st, "pre: cell vertices")?;
    let edge_cells = transpose(&cell_edges)?;
    mark(st, "pre: edge -> cells")?;
    let vertex_cells = transpose(&cell_vertices)?;
    mark(st, "pre: vertex -> cells")?;
    Ok(SubdivisionRelations {
        face_vertices,
        face_cells,
        edge_faces,
        vertex_edges,
        cell_edges,
        cell_vertices,
        edge_cells,
        vertex_cells,
    })
}

/// One level of volumetric Catmull-Clark subdivision on the device (dissertation §3.4.3):
/// [`precompute`] then [`catmull_clark_gpu_with`]. The result lives on the same device.
///
/// Two host synchronisations on a mesh that passes every check: the loop-order flag, the
/// flags of `precompute_relations` and the manifold checks are read together once, before
/// anything is written at offsets taken from the relations, and the cell checks at the end.
/// When a flag is set the level is computed again the careful way (rows reordered first,
/// the general operations, the CPU reference's error for rejected input).
pub fn catmull_clark_gpu<'g>(dm: &DeviceMesh<'g>) -> Result<DeviceMesh<'g>, MeshError> {
    let gpu = dm.gpu();
    let m = module(gpu)?;
    let flag = gpu.zeros::<u32>(1)?;
    loop_order_flag(dm, &m, &flag)?;
    let rel = precompute_relations(dm, &mut None, Some(&flag))?;
    if let Some(out) = subdivide(dm, &rel, &m, &mut None, Some(&flag))? {
        return Ok(out);
    }
    drop(rel);
    catmull_clark_careful(dm, &m)
}

/// One level with a host synchronisation after every data-dependent step (the path taken
/// when a flag of the fast path is set): the exact result or the CPU reference's error.
fn catmull_clark_careful<'g>(dm: &DeviceMesh<'g>, m: &Module) -> Result<DeviceMesh<'g>, MeshError> {
    if let Some(ordered) = loop_ordered(dm, m)? {
        return catmull_clark_gpu(&ordered);
    }
    let rel = precompute_relations(dm, &mut None, None)?;
    Ok(subdivide(dm, &rel, m, &mut None, None)?.expect("errors are returned without a flag"))
}

/// Enqueue the loop-order check of the ∂2 rows: any row out of loop order sets `flag`.
fn loop_order_flag(
    dm: &DeviceMesh<'_>,
    m: &Module,
    flag: &tessera_gpu::DeviceBuffer<u32>,
) -> Result<(), MeshError> {
    let nf = dm.num_faces();
    if nf == 0 {
        return Ok(());
    }
    let n = nf as u64;
    dm.gpu()
        .launch(&m.function("cc_loop_order_flags")?, cfg(nf)?)
        .arg(&dm.face_edges.offsets)
        .arg(&dm.face_edges.columns)
        .arg(&dm.edge_vertices)
        .arg(&n)
        .arg(flag)
        .run()?;
    Ok(())
}

/// One level from relations computed by [`precompute`] (for timing the two phases apart).
/// If some ∂2 row of `dm` is not in loop order, the rows are reordered and the relations
/// recomputed for the reordered mesh.
pub fn catmull_clark_gpu_with<'g>(
    dm: &DeviceMesh<'g>,
    rel: &SubdivisionRelations<'_>,
) -> Result<DeviceMesh<'g>, MeshError> {
    let m = module(dm.gpu())?;
    if let Some(ordered) = loop_ordered(dm, &m)? {
        return catmull_clark_gpu(&ordered);
    }
    Ok(subdivide(dm, rel, &m, &mut None, None)?.expect("errors are returned without a flag"))
}

/// `levels` levels of [`catmull_clark_gpu`] (`levels = 0` returns a copy on the device).
pub fn catmull_clark_levels_gpu<'g>(
    dm: &DeviceMesh<'g>,
    levels: usize,
) -> Result<DeviceMesh<'g>, MeshError> {
    if levels == 0 {
        let g = dm.gpu();
        return Ok(DeviceMesh {
            kernels: clone_kernels(&dm.kernels)?,
            nvertices: dm.nvertices,
            edge_vertices: g.duplicate(&dm.edge_vertices)?,
            face_edges: dup_tcsr(g, &dm.face_edges)?,
            cell_faces: dup_tcsr(g, &dm.cell_faces)?,
            positions: g.duplicate(&dm.positions)?,
            cache: DeviceRelations::default(),
            cells_closed: dm.cells_closed,
            try_canonical_edges: dm.try_canonical_edges,
            edge_buckets: dup_edge_buckets(dm)?,
            face_buckets: dm
                .face_buckets
                .as_ref()
                .map(|f| f.duplicate(g))
                .transpose()?,
            faces_canonical: dm.faces_canonical,
        });
    }
    let mut cur = catmull_clark_gpu(dm)?;
    for _ in 1..levels {
        cur = catmull_clark_gpu(&cur)?;
    }
    Ok(cur)
}

/// δ1's buckets of `dm`, for a copy with the same edges.
fn dup_edge_buckets(dm: &DeviceMesh<'_>) -> Result<Option<super::EdgeBuckets>, MeshError> {
    dm.edge_buckets
        .as_ref()
        .map(|e| e.duplicate(dm.gpu()))
        .transpose()
}

fn dup_tcsr(g: &Gpu, t: &DeviceTcsr) -> Result<DeviceTcsr, MeshError> {
    Ok(DeviceTcsr {
        offsets: g.duplicate(&t.offsets)?,
        columns: g.duplicate(&t.columns)?,
        ncols: t.ncols,
        uniform: t.uniform,
    })
}

fn clone_kernels<'g>(k: &MeshKernels<'g>) -> Result<MeshKernels<'g>, MeshError> {
    k.try_clone()
}

/// The error of the CPU reference for input a device check rejected (downloads the mesh
/// once; only on the error path).
fn explain(dm: &DeviceMesh<'_>) -> MeshError {
    match dm.download() {
        Err(e) => e,
        Ok(m) => match crate::subdivide::catmull_clark(&m) {
            Err(e) => e,
            Ok(_) => MeshError::Unsupported(
                "GPU Catmull-Clark: a device check rejected the mesh that the CPU reference accepts".into(),
            ),
        },
    }
}

/// A copy of `dm` with ∂2 rows in loop order when some row is not (`None` otherwise).
fn loop_ordered<'g>(dm: &DeviceMesh<'g>, m: &Module) -> Result<Option<DeviceMesh<'g>>, MeshError> {
    let g = dm.gpu();
    let k = |n: &str| -> Result<Kernel, MeshError> { Ok(m.function(n)?) };
    let nf = dm.num_faces();
    let n = nf as u64;
    let flag = g.zeros::<u32>(1)?;
    g.launch(&k("cc_loop_order_flags")?, cfg(nf)?)
        .arg(&dm.face_edges.offsets)
        .arg(&dm.face_edges.columns)
        .arg(&dm.edge_vertices)
        .arg(&n)
        .arg(&flag)
        .run()?;
    if g.download_at(&flag, 0)? == 0 {
        return Ok(None);
    }
    let cols = g.duplicate(&dm.face_edges.columns)?;
    let err = g.zeros::<u32>(1)?;
    g.launch(&k("cc_loop_order_fix")?, cfg(nf)?)
        .arg(&dm.face_edges.offsets)
        .arg(&cols)
        .arg(&dm.edge_vertices)
        .arg(&n)
        .arg(&err)
        .run()?;
    if g.download_at(&err, 0)? != 0 {
        return Err(explain(dm));
    }
    Ok(Some(DeviceMesh {
        kernels: clone_kernels(&dm.kernels)?,
        nvertices: dm.nvertices,
        edge_vertices: g.duplicate(&dm.edge_vertices)?,
        face_edges: DeviceTcsr {
            offsets: g.duplicate(&dm.face_edges.offsets)?,
            columns: cols,
            ncols: dm.face_edges.ncols,
            uniform: dm.face_edges.uniform,
        },
        cell_faces: dup_tcsr(g, &dm.cell_faces)?,
        positions: g.duplicate(&dm.positions)?,
        cache: DeviceRelations::default(),
        // the same edge sets in loop order: as closed as before
        cells_closed: dm.cells_closed,
        try_canonical_edges: dm.try_canonical_edges,
        edge_buckets: dup_edge_buckets(dm)?,
        // the rows are reordered: not the faces the buckets were cut for, nor canonical
        face_buckets: None,
        faces_canonical: false,
    }))
}

/// The subdivision proper (rows of ∂2 in loop order, relations precomputed). With `pre`
/// (the flag of the fast path: loop order and `precompute_relations`), the checks OR into
/// it and `Ok(None)` is returned when it is set at either synchronisation (the caller then
/// takes the careful path); without, a failed check returns the CPU reference's error.
fn subdivide<'g>(
    dm: &DeviceMesh<'g>,
    rel: &SubdivisionRelations<'_>,
    m: &Module,
    st: &mut Option<Stages<'_>>,
    pre: Option<&tessera_gpu::DeviceBuffer<u32>>,
) -> Result<Option<DeviceMesh<'g>>, MeshError> {
    let g = dm.gpu();
    let k = |n: &str| -> Result<Kernel, MeshError> { Ok(m.function(n)?) };
    let (nv, ne, nf, nc) = (
        dm.num_vertices(),
        dm.num_edges(),
        dm.num_faces(),
        dm.num_cells(),
    );
    let nnz2 = dm.face_edges.nnz();
    let nnz3 = dm.cell_faces.nnz();
    let nnz21 = rel.face_vertices.nnz();
    let nnz31 = rel.cell_edges.nnz();
    let nnz32 = rel.cell_vertices.nnz();
    // Eqs. 3.1-3.4
    let (v_cc, e_cc, f_cc, c_cc) = (
        nv + ne + nf + nc,
        2 * ne + nnz2 + nnz3,
        nnz21 + nnz31,
        nnz32,
    );
    let limit = u32::MAX as usize;
    if v_cc > limit || e_cc > limit || 4 * f_cc > limit || c_cc > limit {
        if pre.is_some() {
            // the sizes of flagged relations may differ: let the careful path decide
            return Ok(None);
        }
        return Err(MeshError::Unsupported(format!(
            "subdividing a mesh of {nv} vertices, {ne} edges, {nf} faces and {nc} cells exceeds 32-bit indices"
        )));
    }
    let (fe, cf, ev) = (&dm.face_edges, &dm.cell_faces, &dm.edge_vertices);
    let (fv, fc, ef, ve, ce, cv) = (
        &*rel.face_vertices,
        &*rel.face_cells,
        &*rel.edge_faces,
        &*rel.vertex_edges,
        &*rel.cell_edges,
        &*rel.cell_vertices,
    );
    let (ec, vc) = (&rel.edge_cells, &rel.vertex_cells);

    // manifold checks (faces, edges; cells in cc_cells)
    let err_own;
    let err = match pre {
        Some(f) => f,
        None => {
            err_own = g.zeros::<u32>(1)?;
            &err_own
        }
    };
    let failed = |dm: &DeviceMesh<'g>| -> Result<Option<DeviceMesh<'g>>, MeshError> {
        match pre {
            Some(_) => Ok(None),
            None => Err(explain(dm)),
        }
    };
    let (nf64, ne64, nc64, nv64) = (nf as u64, ne as u64, nc as u64, nv as u64);
    g.launch(&k("cc_check_faces")?, cfg(nf)?)
        .arg(&fe.offsets)
        .arg(&fc.offsets)
        .arg(&fc.columns)
        .arg(&fv.offsets)
        .arg(&fv.columns)
        .arg(&nf64)
        .arg(err)
        .run()?;
    g.launch(&k("cc_check_edges")?, cfg(ne)?)
        .arg(&ef.offsets)
        .arg(&ef.columns)
        .arg(&fc.offsets)
        .arg(ev)
        .arg(&ne64)
        .arg(err)
        .run()?;
    if g.download_at(err, 0)? != 0 {
        return failed(dm);
    }
    mark(
        st,
        "checks of faces and edges, flags of the pre-computation (1 sync)",
    )?;

    // topology: new ∂2 and ∂3 (cells also check closedness)
    let (e2, e3) = ((2 * ne) as u32, (2 * ne + nnz2) as u32);
    let nnz2_u = nnz2 as u32;
    let offsets2 = g.alloc::<u32>(f_cc + 1)?;
    let nf1 = (f_cc + 1) as u64;
    g.launch(&k("cc_iota4")?, cfg(f_cc + 1)?)
        .arg(&nf1)
        .arg(&offsets2)
        .run()?;
    let cols2 = g.alloc::<i32>(4 * f_cc)?;
    match fe.uniform {
        Some(n) if n > 0 && nnz2 == n as usize * nf => {
            let nnz2_64 = nnz2 as u64;
            g.launch(&k("cc_face_faces_uniform")?, cfg(nnz2)?)
                .arg(&fe.columns)
                .arg(&nnz2_64)
                .arg(&n)
                .arg(&e2)
                .arg(&cols2)
                .run()?;
        }
        _ => {
            g.launch(&k("cc_face_faces")?, cfg(nf)?)
                .arg(&fe.offsets)
                .arg(&fe.columns)
                .arg(&nf64)
                .arg(&e2)
                .arg(&cols2)
                .run()?;
        }
    }
    mark(st, "new ∂2 face-faces")?;
    let offsets3 = g.zeros::<u32>(c_cc + 1)?;
    let cols3 = g.alloc::<i32>(4 * nnz31)?;
    let nnz32_64 = nnz32 as u64;
    g.launch(&k("cc_cells")?, cfg(nc)?)
        .arg(&cf.offsets)
        .arg(&cf.columns)
        .arg(&fe.offsets)
        .arg(&fe.columns)
        .arg(&fv.offsets)
        .arg(&fv.columns)
        .arg(&ce.offsets)
        .arg(&ce.columns)
        .arg(&cv.offsets)
        .arg(&cv.columns)
        .arg(&nc64)
        .arg(&e2)
        .arg(&e3)
        .arg(&nnz2_u)
        .arg(&cols2)
        .arg(&offsets3)
        .arg(&nnz32_64)
        .arg(&cols3)
        .arg(err)
        .run()?;
    mark(st, "cells: cell-faces and new ∂3 (cc_cells)")?;

    // new ∂1
    let new_ev = g.alloc::<u32>(2 * e_cc)?;
    let (nv32, ne32, nf32) = (nv as u32, ne as u32, nf as u32);
    g.launch(&k("cc_edge_edges")?, cfg(2 * ne)?)
        .arg(ev)
        .arg(&ne64)
        .arg(&nv32)
        .arg(&new_ev)
        .run()?;
    g.launch(&k("cc_face_edges")?, cfg(nf)?)
        .arg(&fe.offsets)
        .arg(&fe.columns)
        .arg(&nf64)
        .arg(&nv32)
        .arg(&ne32)
        .arg(&new_ev)
        .run()?;
    let base = e3 as u64;
    g.launch(&k("cc_cell_edges")?, cfg(nc)?)
        .arg(&cf.offsets)
        .arg(&cf.columns)
        .arg(&nc64)
        .arg(&nv32)
        .arg(&ne32)
        .arg(&nf32)
        .arg(&base)
        .arg(&new_ev)
        .run()?;
    mark(st, "new ∂1")?;

    // positions (rules 1-5 and the boundary rules, Eqs. 3.5-3.8)
    let pos = &dm.positions;
    let out = g.alloc::<f64>(3 * v_cc)?;
    let (at_e, at_f, at_c) = (nv as u64, (nv + ne) as u64, (nv + ne + nf) as u64);
    g.launch(&k("cc_cell_points")?, cfg(nc)?)
        .arg(&cv.offsets)
        .arg(&cv.columns)
        .arg(pos)
        .arg(&nc64)
        .arg(&at_c)
        .arg(&out)
        .run()?;
    mark(st, "cell points")?;
    let fcen = g.alloc::<f64>(3 * nf)?;
    g.launch(&k("cc_face_centroids")?, cfg(nf)?)
        .arg(&fv.offsets)
        .arg(&fv.columns)
        .arg(pos)
        .arg(&nf64)
        .arg(&fcen)
        .run()?;
    g.launch(&k("cc_face_points")?, cfg(nf)?)
        .arg(&fc.offsets)
        .arg(&fc.columns)
        .arg(&fcen)
        .arg(&nf64)
        .arg(&at_f)
        .arg(&at_c)
        .arg(&out)
        .run()?;
    mark(st, "face centroids and face points")?;
    let esum = g.alloc::<f64>(3 * ne)?;
    let enf = g.alloc::<u32>(ne)?;
    let ebnd = g.alloc::<u32>(ne)?;
    g.launch(&k("cc_edge_acc")?, cfg(ne)?)
        .arg(&ef.offsets)
        .arg(&ef.columns)
        .arg(&fc.offsets)
        .arg(&fcen)
        .arg(&ne64)
        .arg(&esum)
        .arg(&enf)
        .arg(&ebnd)
        .run()?;
    g.launch(&k("cc_edge_points")?, cfg(ne)?)
        .arg(ev)
        .arg(pos)
        .arg(&esum)
        .arg(&enf)
        .arg(&ebnd)
        .arg(&ec.offsets)
        .arg(&ec.columns)
        .arg(&ne64)
        .arg(&at_e)
        .arg(&at_c)
        .arg(&out)
        .run()?;
    mark(st, "edge points")?;
    g.launch(&k("cc_vertex_points")?, cfg(nv)?)
        .arg(&ve.offsets)
        .arg(&ve.columns)
        .arg(ev)
        .arg(pos)
        .arg(&esum)
        .arg(&enf)
        .arg(&ebnd)
        .arg(&vc.offsets)
        .arg(&vc.columns)
        .arg(&nv64)
        .arg(&at_c)
        .arg(&out)
        .run()?;
    if g.download_at(err, 0)? != 0 {
        return failed(dm);
    }
    mark(st, "vertex points and final check (1 sync)")?;
    Ok(Some(DeviceMesh {
        kernels: clone_kernels(&dm.kernels)?,
        nvertices: v_cc,
        edge_vertices: new_ev,
        face_edges: DeviceTcsr {
            offsets: offsets2,
            columns: cols2,
            ncols: e_cc,
            uniform: Some(4),
        },
        cell_faces: DeviceTcsr::ragged(offsets3, cols3, f_cc),
        positions: out,
        cache: DeviceRelations::default(),
        cells_closed: false,
        // the subdivided edges' order is not known on the host: the kernel checks it
        try_canonical_edges: true,
        edge_buckets: None,
        face_buckets: None,
        faces_canonical: false,
    }))
}

/// Table 3.4 on the GPU: `(row, median ms, bytes)` for "precompute" (level 1) and
/// "level N total" (pre-computation + subdivision of level N from level N - 1) for
/// `1..=levels`, each the median of `runs` (at least 20) CUDA-event timings after 3
/// warm-up runs. Every timed run starts from a mesh without cached relations. Bytes: the
/// input operators and positions, the relations and the output arrays, each counted once.
pub fn bench_catmull_clark_gpu(
    gpu: &Gpu,
    mesh: &PolyMesh,
    levels: usize,
    runs: usize,
) -> Result<Vec<(String, f64, u64)>, MeshError> {
    let runs = runs.max(20);
    let warm = 3;
    let mut rows = Vec::new();
    let mut cur = DeviceMesh::upload(gpu, mesh)?;
    let m = module(gpu)?;
    if let Some(ordered) = loop_ordered(&cur, &m)? {
        cur = ordered;
    }
    let time = |f: &mut dyn FnMut() -> Result<(), MeshError>| -> Result<f64, MeshError> {
        super::bench::median_ms_of(gpu, runs, warm, f)
    };
    for level in 1..=levels {
        let input_bytes = (cur.edge_vertices.bytes()
            + cur.face_edges.bytes()
            + cur.cell_faces.bytes()
            + cur.positions.bytes()) as u64;
        let rel_bytes = precompute(&cur)?.bytes() as u64;
        let next = catmull_clark_gpu(&cur)?;
        let out_bytes = (next.edge_vertices.bytes()
            + next.face_edges.bytes()
            + next.cell_faces.bytes()
            + next.positions.bytes()) as u64;
        if level == 1 {
            let ms = time(&mut || precompute(&cur).map(drop))?;
            rows.push(("precompute".to_string(), ms, input_bytes + rel_bytes));
        }
        let ms = time(&mut || catmull_clark_gpu(&cur).map(drop))?;
        rows.push((
            format!("level {level} total"),
            ms,
            input_bytes + 2 * rel_bytes + out_bytes,
        ));
        cur = next;
    }
    Ok(rows)
}

/// Where the time of level 1 goes: `(stage, median ms)` over `runs` (at least 20) runs after
/// 3 warm-ups, each stage timed by CUDA events recorded between the stages of one level
/// (the events add no synchronisation; the stages with a host synchronisation say so).
/// The input must be a mesh whose ∂2 rows are in loop order (as the benchmark meshes are).
pub fn bench_catmull_clark_stages(
    gpu: &Gpu,
    mesh: &PolyMesh,
    runs: usize,
) -> Result<Vec<(&'static str, f64)>, MeshError> {
    let runs = runs.max(20);
    let dm = DeviceMesh::upload(gpu, mesh)?;
    let m = module(gpu)?;
    if loop_ordered(&dm, &m)?.is_some() {
        return Err(MeshError::Unsupported(
            "stage timing needs ∂2 rows in loop order".into(),
        ));
    }
    let mut per: Vec<(&'static str, Vec<f64>)> = Vec::new();
    for run in 0..runs + 3 {
        let mut st = Some(Stages {
            gpu,
            marks: Vec::new(),
        });
        mark(&mut st, "start")?;
        let flag = gpu.zeros::<u32>(1)?;
        loop_order_flag(&dm, &m, &flag)?;
        let rel = precompute_relations(&dm, &mut st, Some(&flag))?;
        let out = subdivide(&dm, &rel, &m, &mut st, Some(&flag))?;
        if out.is_none() {
            return Err(MeshError::Unsupported(
                "stage timing: a check of the fast path fired".into(),
            ));
        }
        drop(out);
        let marks = st.expect("set above").marks;
        if run < 3 {
            continue;
        }
        for (i, w) in marks.windows(2).enumerate() {
            let ms = w[0].1.elapsed_ms(&w[1].1)? as f64;
            if per.len() <= i {
                per.push((w[1].0, Vec::new()));
            }
            per[i].1.push(ms);
        }
    }
    Ok(per
        .into_iter()
        .map(|(n, mut v)| (n, tessera_gpu::median(&mut v)))
        .collect())
}

#[cfg(test)]
mod tests {
    /// Runs without a GPU: every kernel launched here is defined in the source.
    #[test]
    fn every_launched_kernel_is_defined() {
        for n in super::KERNELS {
            assert!(
                super::SOURCE.contains(&format!("extern \"C\" __global__ void {n}(")),
                "kernel {n} is not defined"
            );
        }
        let src = include_str!("subdivide.rs");
        for n in super::KERNELS {
            assert!(
                src.contains(&format!("k(\"{n}\")")),
                "kernel {n} is listed but never launched"
            );
        }
    }
}
