//! Volumetric Catmull-Clark subdivision (dissertation §3.4.3, Eqs. 3.1-3.10, Figs. 3.3,
//! 3.7-3.9), after Joy and MacCracken with the boundary rules of Burkhart et al.
//!
//! One level maps a polyhedral mesh `(V, E, F, C)` to a mesh whose
//!
//! - **vertices** (Eq. 3.1, `|V| + |E| + |F| + |C|`) are numbered
//!   `[original vertices | edge points | face points | cell points]`: vertex `v` stays `v`,
//!   edge `e` gives `|V| + e`, face `f` gives `|V| + |E| + f`, cell `c` gives
//!   `|V| + |E| + |F| + c`;
//! - **edges** (Eq. 3.2, `nnz(∂1) + nnz(∂2) + nnz(∂3)`) are
//!   `[edge-edges | face-edges | cell-edges]`: edge `e = (v1, v2)` splits into `2e = (v1, ep)`
//!   and `2e + 1 = (ep, v2)` (Eq. 3.9, keeping the original orientation); the face-edge of
//!   ∂2 entry `k` (face `f`, edge `e`) is `2|E| + k = (ep(e), fp(f))` (Eq. 3.10) and the
//!   cell-edge of ∂3 entry `k` (cell `c`, face `f`) is `2|E| + nnz(∂2) + k = (fp(f), cp(c))`:
//!   both point toward the point of the higher-dimensional entity (Fig. 3.8);
//! - **faces** (Eq. 3.3, `nnz(∂̂2¹) + nnz(∂̂3¹)`) are `[face-faces | cell-faces]`, all
//!   quadrilaterals: the face-face of corner `i` of face `f` (∂2 entry `k = off(f) + i`) is
//!   face `k`, the loop `v_i -> ep(e_i) -> fp(f) -> ep(e_{i-1})` with the orientation of `f`
//!   (Fig. 3.9); the cell-face of ∂̂3¹ entry `k` (cell `c`, edge `e`) is face
//!   `nnz(∂2) + k`, the loop `ep(e) -> fp(f_b) -> cp(c) -> fp(f_a)` where `f_a` (`f_b`) is the
//!   face of `c` that runs along `e` (against `e`) when oriented outward from `c`; its normal
//!   points along the global orientation of `e` (Fig. 3.9), derived from topology only;
//! - **cells** (Eq. 3.4, `nnz(∂̂3²)`): the cell-cell of ∂̂3² entry `k` (cell `c`, vertex `v`)
//!   is cell `k`, bounded by the face-faces of `v` in the faces of `c` (with the sign of the
//!   face in `c`) and the cell-faces of the edges of `c` at `v` (+1 where the edge starts
//!   at `v`, -1 where it ends there), in the order of the face corners (faces of `c` in ∂3
//!   row order, corners in loop order), each cell-face after the corner whose outgoing edge
//!   runs along `c`'s outward orientation. A pyramid thus gives four
//!   hexahedra and one cell with ten vertices and eight faces (Fig. 3.3).
//!
//! Rows of the new ∂2 are in loop order and the new ∂3 is consistently oriented, so
//! `validate()` holds for the output whenever it held for the input.
//!
//! **Positions** (dissertation §3.4.3, rules 1-5 and the boundary rules; Eqs. 3.5-3.8).
//! With the cell centroids `p_C` (Eq. 3.5, average over ∂̂3²), face centroids `p̂_F`
//! (Eq. 3.6, average over ∂̂2¹) and edge midpoints `p̂_E` (Eq. 3.7):
//!
//! - cell point: `p_C`;
//! - face point (Eq. 3.8): `p̂_F` on the boundary, else `(p̂_F + avg of the two p_C) / 2`;
//! - interior edge point: `(avg p_C + 2 avg p̂_F + (n - 3) p̂_E) / n` over the `n` faces and
//!   the cells around the edge;
//! - boundary edge point: `(avg of the two boundary p̂_F + p̂_E) / 2`;
//! - interior vertex: `(avg p_C + 3 avg p̂_F + 3 avg p̂_E + p_V) / 8` over the incident cells,
//!   faces and edges;
//! - boundary vertex: `(avg p̂_F + 2 avg p̂_E + (n - 3) p_V) / n` over the `n` incident
//!   boundary faces and the incident boundary edges.
//!
//! The averages in the edge and vertex rules are taken over the *centroids* of the incident
//! faces and edges ("the center points of all connected higher-level facets", §3.4.3), as in
//! Catmull and Clark's surface vertex rule (which averages edge midpoints). With this reading
//! the rules reproduce uniform tricubic B-spline refinement on regular hexahedral grids
//! (and bicubic refinement on regular boundary quads); `tests/subdivide.rs` checks that.
//! A face is on the boundary when one cell uses it, an edge when one of its faces is, a
//! vertex when one of its edges is. Every rule is an affine combination of input
//! positions, so subdivision commutes with affine maps.
//!
//! **Non-manifold input is rejected** with [`MeshError::Unsupported`] naming the first
//! offending element (in index order, for `Par::Seq` and `Par::Rayon` alike): a face used by
//! no cell or by more than two, a face whose two cells use it with the same orientation,
//! a face with fewer than three edges or whose edges do not chain into one closed loop, a
//! cell that is not closed (an edge of it not used exactly once in each direction by its
//! faces), an edge in no face, and a boundary edge with other than two boundary faces.
//! Invalid topology that `validate()` also rejects (an edge from a vertex to itself, a face
//! loop passing a vertex twice) gives [`MeshError::InvalidTopology`].
//! Vertices whose boundary is pinched (cells meeting only at a vertex) are subdivided with
//! the boundary vertex rule over all their boundary faces. Isolated vertices (in no edge)
//! keep their positions. Meshes whose ∂2 rows are not in loop order are accepted: the
//! rows are reordered first.
//!
//! The algorithm counts every output array exactly (Eqs. 3.1-3.4), allocates each once and
//! fills it by count-scan-fill in parallel over the input elements; no vector grows in the
//! hot path. `Par::Seq` and `Par::Rayon` (`mesh.par()`) give identical results.

use crate::relations::Relations;
use crate::{MeshError, Point, PolyMesh};
use rayon::prelude::*;
use serde::Serialize;
use std::time::Instant;
use tessera_core::Par;
use tessera_sparse::tcsr::{decode, encode};
use tessera_sparse::Tcsr;

/// Entity counts of a mesh; [`subdivision_counts`] gives those of the subdivided mesh.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SubdivisionCounts {
    pub vertices: usize,
    pub edges: usize,
    pub faces: usize,
    pub cells: usize,
}

impl SubdivisionCounts {
    /// The counts of `mesh` itself.
    pub fn of(mesh: &PolyMesh) -> Self {
        SubdivisionCounts {
            vertices: mesh.num_vertices(),
            edges: mesh.num_edges(),
            faces: mesh.num_faces(),
            cells: mesh.num_cells(),
        }
    }
}

/// Entity counts after one level of Catmull-Clark subdivision, from the operators alone
/// (dissertation Eqs. 3.1-3.4):
/// `|V_CC| = |V| + |E| + |F| + |C|`, `|E_CC| = nnz(∂1) + nnz(∂2) + nnz(∂3)`,
/// `|F_CC| = nnz(∂̂2¹) + nnz(∂̂3¹)`, `|C_CC| = nnz(∂̂3²)`.
/// Computes (and caches) the indirect relations ∂̂2¹, ∂̂3¹ and ∂̂3² if needed.
pub fn subdivision_counts(mesh: &PolyMesh) -> SubdivisionCounts {
    let (v, e, f, c) = (
        mesh.num_vertices(),
        mesh.num_edges(),
        mesh.num_faces(),
        mesh.num_cells(),
    );
    SubdivisionCounts {
        vertices: v + e + f + c,
        edges: 2 * e + mesh.face_edges().nnz() + mesh.cell_faces().nnz(),
        faces: mesh.face_vertices().nnz() + mesh.cell_edges().nnz(),
        cells: mesh.cell_vertices().nnz(),
    }
}

/// Counts `(V, E, F, C)` after each of `levels` levels: level 1 by Eqs. 3.1-3.4 on `mesh`,
/// later levels on the all-hexahedral mesh level 1 makes (every face a quadrilateral, every
/// cell 6 faces, 12 edges, 8 vertices): `V' = V + E + F + C`, `E' = 2E + 4F + 6C`,
/// `F' = 4F + 12C`, `C' = 8C` (saturating, so any level count is safe to ask for).
pub fn level_counts(mesh: &PolyMesh, levels: usize) -> Vec<[u64; 4]> {
    let mut out = Vec::with_capacity(levels);
    if levels == 0 {
        return out;
    }
    let c = subdivision_counts(mesh);
    let mut cur = [
        c.vertices as u64,
        c.edges as u64,
        c.faces as u64,
        c.cells as u64,
    ];
    out.push(cur);
    for _ in 1..levels {
        let [v, e, f, c] = cur;
        cur = [
            v.saturating_add(e).saturating_add(f).saturating_add(c),
            e.saturating_mul(2)
                .saturating_add(f.saturating_mul(4))
                .saturating_add(c.saturating_mul(6)),
            f.saturating_mul(4).saturating_add(c.saturating_mul(12)),
            c.saturating_mul(8),
        ];
        out.push(cur);
    }
    out
}

/// Bytes of subdividing into a mesh of counts `(V, E, F, C)`: the new mesh (positions, ∂1,
/// ∂2, ∂3) and, at the peak, the relations derived for the next level (measured on
/// hexahedral boxes: ~450 bytes per cell, rounded up).
pub fn level_bytes(c: [u64; 4]) -> u64 {
    let [v, e, f, cells] = c;
    (24u64.saturating_mul(v))
        .saturating_add(8u64.saturating_mul(e))
        .saturating_add(20u64.saturating_mul(f))
        .saturating_add(450u64.saturating_mul(cells))
}

/// Refuse `levels` levels of subdivision of `mesh` when the last level would not fit in the
/// memory budget ([`tessera_core::memory`]); the error names the level's cell count.
pub fn check_levels(mesh: &PolyMesh, levels: usize) -> Result<(), MeshError> {
    if let Some(&last) = level_counts(mesh, levels).last() {
        // the previous level is alive while the last one is built
        let prev = if levels > 1 {
            level_counts(mesh, levels - 1)
                .last()
                .copied()
                .unwrap_or([0; 4])
        } else {
            [0; 4]
        };
        tessera_core::memory::check(
            format!(
                "{levels} level(s) of subdivision ({} cells at the last level)",
                if last[3] == u64::MAX {
                    "more than 1.8e19".to_string()
                } else {
                    last[3].to_string()
                }
            ),
            level_bytes(last).saturating_add(level_bytes(prev)),
        )?;
    }
    Ok(())
}

/// Compute every derived relation [`catmull_clark`] needs, so that benchmarks can time the
/// pre-computation separately (dissertation Table 3.4, "Pre."): the top-down relations
/// ∂̂2¹, ∂̂3¹, ∂̂3² (topology) and the bottom-up relations δ1, δ2, δ3, edge -> cells and
/// vertex -> cells (positions). Independent relations are computed concurrently with
/// `Par::Rayon`.
pub fn precompute(mesh: &PolyMesh) {
    let a = || {
        mesh.face_vertices();
        mesh.face_cells();
        mesh.edge_faces();
        mesh.vertex_edges();
    };
    let b = || {
        mesh.edge_cells();
    };
    let c = || {
        mesh.vertex_cells();
    };
    match mesh.par() {
        Par::Seq => {
            a();
            b();
            c();
        }
        Par::Rayon => {
            rayon::join(a, || rayon::join(b, c));
        }
    }
}

/// One level of volumetric Catmull-Clark subdivision (dissertation §3.4.3); see the module
/// documentation for numbering, orientation, position rules and rejected input. Runs with
/// `mesh.par()`; the result carries the same `Par`.
pub fn catmull_clark(mesh: &PolyMesh) -> Result<PolyMesh, MeshError> {
    let par = mesh.par();
    if let Some(f) = find_first(par, mesh.num_faces(), |f| !row_in_loop_order(mesh, f)) {
        let ordered = with_loop_ordered_faces(mesh, f)?;
        return catmull_clark(&ordered);
    }
    precompute(mesh);
    check_manifold(mesh)?;
    let topo = Topology::new(mesh)?;
    let positions = new_positions(mesh, &topo)?;
    let edge_vertices = new_edges(mesh, &topo)?;
    let (face_edges, cell_faces) = new_faces_and_cells(mesh, &topo)?;
    Ok(PolyMesh {
        nvertices: positions.len(),
        positions,
        edge_vertices,
        face_edges,
        cell_faces,
        par,
        cache: Relations::default(),
        cells_closed: Default::default(),
    })
}

/// `levels` levels of [`catmull_clark`] in sequence (`levels = 0` returns a copy).
pub fn catmull_clark_levels(mesh: &PolyMesh, levels: usize) -> Result<PolyMesh, MeshError> {
    if levels == 0 {
        return Ok(mesh.clone());
    }
    let mut cur = catmull_clark(mesh)?;
    for _ in 1..levels {
        cur = catmull_clark(&cur)?;
    }
    Ok(cur)
}

/// One level in a [`SubdivisionSummary`]: counts of the mesh after the level and the time
/// of its two phases (dissertation Table 3.4: "Pre." and "Total" = pre + subdivision).
#[derive(Clone, Debug, Serialize)]
pub struct LevelSummary {
    pub level: usize,
    pub counts: SubdivisionCounts,
    pub precompute_seconds: f64,
    pub subdivide_seconds: f64,
}

/// What [`subdivide_summary`] reports: the input counts and one entry per level.
#[derive(Clone, Debug, Serialize)]
pub struct SubdivisionSummary {
    pub input: SubdivisionCounts,
    pub levels: Vec<LevelSummary>,
}

/// Subdivide `levels` times like [`catmull_clark_levels`] and report per level the counts
/// and the time of [`precompute`] and of [`catmull_clark`] (for `tessera mesh subdivide`
/// and the Table 3.4 benchmark).
pub fn subdivide_summary(
    mesh: &PolyMesh,
    levels: usize,
) -> Result<(PolyMesh, SubdivisionSummary), MeshError> {
    let mut summary = SubdivisionSummary {
        input: SubdivisionCounts::of(mesh),
        levels: Vec::with_capacity(levels),
    };
    let mut cur = mesh.clone();
    for level in 1..=levels {
        let t0 = Instant::now();
        precompute(&cur);
        let t1 = Instant::now();
        let next = catmull_clark(&cur)?;
        let t2 = Instant::now();
        summary.levels.push(LevelSummary {
            level,
            counts: SubdivisionCounts::of(&next),
            precompute_seconds: (t1 - t0).as_secs_f64(),
            subdivide_seconds: (t2 - t1).as_secs_f64(),
        });
        cur = next;
    }
    Ok((cur, summary))
}

// ---------------------------------------------------------------------------------------
// parallel helpers

const GRAIN: usize = 1024;
/// Marks an unwritten slot of a cell-face row while it is filled.
const UNSET: i32 = i32::MIN;

/// Index of the first `i < n` with `bad(i)` (deterministic for both `Par` variants).
fn find_first<F: Fn(usize) -> bool + Sync>(par: Par, n: usize, bad: F) -> Option<usize> {
    match par {
        Par::Seq => (0..n).find(|&i| bad(i)),
        Par::Rayon => (0..n)
            .into_par_iter()
            .with_min_len(GRAIN)
            .find_first(|&i| bad(i)),
    }
}

/// `out[i] = f(i)` for every `i`.
fn fill_map<T: Send, F: Fn(usize) -> T + Sync>(par: Par, out: &mut [T], f: F) {
    match par {
        Par::Seq => out.iter_mut().enumerate().for_each(|(i, o)| *o = f(i)),
        Par::Rayon => out
            .par_iter_mut()
            .enumerate()
            .with_min_len(4 * GRAIN)
            .for_each(|(i, o)| *o = f(i)),
    }
}

/// Calls `f(i, a_i, b_i, c_i)` for every item `i` in `lo..hi`, where `a_i = a[sa(i)..sa(i+1)]`
/// and likewise for `b` and `c` (offsets relative to the values at `lo`): the fill step of
/// count-scan-fill, splitting the output arrays recursively without allocating. The
/// returned error is the one of the smallest failing item for both `Par` variants.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn for_segments3<A, B, C, SA, SB, SC, F>(
    par: Par,
    lo: usize,
    hi: usize,
    (a, sa): (&mut [A], &SA),
    (b, sb): (&mut [B], &SB),
    (c, sc): (&mut [C], &SC),
    f: &F,
) -> Result<(), MeshError>
where
    A: Send,
    B: Send,
    C: Send,
    SA: Fn(usize) -> usize + Sync,
    SB: Fn(usize) -> usize + Sync,
    SC: Fn(usize) -> usize + Sync,
    F: Fn(usize, &mut [A], &mut [B], &mut [C]) -> Result<(), MeshError> + Sync,
{
    if par == Par::Seq || hi - lo <= GRAIN {
        let (a0, b0, c0) = (sa(lo), sb(lo), sc(lo));
        for i in lo..hi {
            let ra = sa(i) - a0..sa(i + 1) - a0;
            let rb = sb(i) - b0..sb(i + 1) - b0;
            let rc = sc(i) - c0..sc(i + 1) - c0;
            f(i, &mut a[ra], &mut b[rb], &mut c[rc])?;
        }
        return Ok(());
    }
    let mid = lo + (hi - lo) / 2;
    let (al, ar) = a.split_at_mut(sa(mid) - sa(lo));
    let (bl, br) = b.split_at_mut(sb(mid) - sb(lo));
    let (cl, cr) = c.split_at_mut(sc(mid) - sc(lo));
    let (l, r) = rayon::join(
        || for_segments3(par, lo, mid, (al, sa), (bl, sb), (cl, sc), f),
        || for_segments3(par, mid, hi, (ar, sa), (br, sb), (cr, sc), f),
    );
    l.and(r)
}

/// [`for_segments3`] over one array.
fn for_segments1<A, SA, F>(par: Par, n: usize, a: &mut [A], sa: &SA, f: &F) -> Result<(), MeshError>
where
    A: Send,
    SA: Fn(usize) -> usize + Sync,
    F: Fn(usize, &mut [A]) -> Result<(), MeshError> + Sync,
{
    let (mut b, mut c): ([u8; 0], [u8; 0]) = ([], []);
    for_segments3(
        par,
        0,
        n,
        (a, sa),
        (&mut b, &|_| 0),
        (&mut c, &|_| 0),
        &|i, s, _, _| f(i, s),
    )
}

// ---------------------------------------------------------------------------------------
// checks

/// (start, end) of a signed edge entry as traversed.
#[inline]
fn ends(ev: &[[u32; 2]], v: i32) -> (u32, u32) {
    let (e, s) = decode(v);
    let [a, b] = ev[e as usize];
    if s > 0 {
        (a, b)
    } else {
        (b, a)
    }
}

fn row_in_loop_order(mesh: &PolyMesh, f: usize) -> bool {
    let row = mesh.face_edges.row(f);
    let n = row.len();
    (0..n).all(|i| {
        ends(&mesh.edge_vertices, row[i]).1 == ends(&mesh.edge_vertices, row[(i + 1) % n]).0
    })
}

/// A copy of `mesh` whose ∂2 rows are reordered into loop order (rows already in order are
/// kept). `first` is the first face not in loop order.
fn with_loop_ordered_faces(mesh: &PolyMesh, first: usize) -> Result<PolyMesh, MeshError> {
    let par = mesh.par();
    let fe = &mesh.face_edges;
    let ev = &mesh.edge_vertices;
    let mut cols = fe.columns().to_vec();
    let offs = fe.offsets();
    for_segments1(
        par,
        fe.nrows(),
        &mut cols,
        &|f| offs[f] as usize,
        &|f, row: &mut [i32]| {
            if f < first {
                return Ok(());
            }
            let n = row.len();
            for k in 1..n {
                let cur = ends(ev, row[k - 1]).1;
                let Some(j) = (k..n).find(|&j| ends(ev, row[j]).0 == cur) else {
                    return Err(MeshError::Unsupported(format!(
                    "face {f}: its edges do not chain into one closed loop (no edge leaves vertex {cur})"
                )));
                };
                row.swap(k, j);
            }
            if n > 0 && ends(ev, row[n - 1]).1 != ends(ev, row[0]).0 {
                return Err(MeshError::Unsupported(format!(
                    "face {f}: its edges do not form a closed loop"
                )));
            }
            Ok(())
        },
    )?;
    let face_edges = Tcsr::from_raw_unchecked(fe.ncols(), offs.to_vec(), cols);
    let mut m = PolyMesh::from_operators(
        mesh.positions.clone(),
        mesh.edge_vertices.clone(),
        face_edges,
        mesh.cell_faces.clone(),
    )?;
    m.set_par(par);
    Ok(m)
}

/// Rejects non-manifold input (module docs list the cases); relations must be computed.
fn check_manifold(mesh: &PolyMesh) -> Result<(), MeshError> {
    let par = mesh.par();
    let fc = mesh.face_cells();
    let fe = &mesh.face_edges;
    let face_problem = |f: usize| -> Option<String> {
        let n = fe.row_len(f);
        if n < 3 {
            return Some(format!(
                "face {f} has {n} edges; subdivision needs at least 3"
            ));
        }
        let row = fc.row(f);
        match row.len() {
            1 => None,
            2 => {
                let ((c0, s0), (c1, s1)) = (decode(row[0]), decode(row[1]));
                if c0 == c1 {
                    Some(format!("face {f} is used twice by cell {c0}"))
                } else if s0 == s1 {
                    Some(format!(
                        "face {f} is used with the same orientation by cells {c0} and {c1}"
                    ))
                } else {
                    None
                }
            }
            0 => Some(format!("face {f} belongs to no cell (non-manifold input)")),
            k => Some(format!(
                "face {f} belongs to {k} cells (non-manifold input)"
            )),
        }
    };
    if let Some(f) = find_first(par, mesh.num_faces(), |f| face_problem(f).is_some()) {
        return Err(MeshError::Unsupported(face_problem(f).unwrap_or_default()));
    }
    let ef = mesh.edge_faces();
    let edge_problem = |e: usize| -> Option<String> {
        let row = ef.row(e);
        if row.is_empty() {
            return Some(format!("edge {e} belongs to no face (non-manifold input)"));
        }
        let nb = row
            .iter()
            .filter(|&&v| fc.row_len(decode(v).0 as usize) == 1)
            .count();
        if nb != 0 && nb != 2 {
            return Some(format!(
                "boundary edge {e} has {nb} boundary faces; a manifold boundary has 2"
            ));
        }
        None
    };
    if let Some(e) = find_first(par, mesh.num_edges(), |e| edge_problem(e).is_some()) {
        return Err(MeshError::Unsupported(edge_problem(e).unwrap_or_default()));
    }
    if let Some(c) = find_first(par, mesh.num_cells(), |c| mesh.cell_faces.row_len(c) == 0) {
        return Err(MeshError::Unsupported(format!("cell {c} has no faces")));
    }
    // invalid topology the cell-cell construction relies on not being present
    let ev = &mesh.edge_vertices;
    if let Some(e) = find_first(par, mesh.num_edges(), |e| ev[e][0] == ev[e][1]) {
        return Err(MeshError::InvalidTopology(format!(
            "edge {e} connects vertex {} to itself",
            ev[e][0]
        )));
    }
    let fv = mesh.face_vertices();
    let pinched = |f: usize| {
        let l = fv.row(f);
        (1..l.len()).find(|&i| l[..i].contains(&l[i])).map(|i| l[i])
    };
    if let Some(f) = find_first(par, mesh.num_faces(), |f| pinched(f).is_some()) {
        return Err(MeshError::InvalidTopology(format!(
            "face {f} passes vertex {} twice",
            pinched(f).unwrap_or_default()
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// counts

/// Offsets and sizes shared by the fill steps.
struct Topology<'a> {
    nv: usize,
    ne: usize,
    nf: usize,
    /// nnz(∂2) = number of face-edges = number of face-faces
    nnz2: usize,
    /// nnz(∂̂3²) = number of cell-cells
    nnz32: usize,
    off2: &'a [u32],
    off3: &'a [u32],
    off31: &'a [u32],
    off32: &'a [u32],
    counts: SubdivisionCounts,
}

impl<'a> Topology<'a> {
    fn new(mesh: &'a PolyMesh) -> Result<Self, MeshError> {
        let (nv, ne, nf, nc) = (
            mesh.num_vertices(),
            mesh.num_edges(),
            mesh.num_faces(),
            mesh.num_cells(),
        );
        let counts = subdivision_counts(mesh);
        let limit = u32::MAX as usize;
        // the new ∂2 holds 4 entries per face, the new ∂3 4 nnz(∂̂3¹) <= 4 |F_CC| entries
        if counts.vertices > limit
            || counts.edges > limit
            || 4 * counts.faces > limit
            || counts.cells > limit
        {
            return Err(MeshError::Unsupported(format!(
                "subdividing a mesh of {nv} vertices, {ne} edges, {nf} faces and {nc} cells exceeds 32-bit indices"
            )));
        }
        Ok(Topology {
            nv,
            ne,
            nf,
            nnz2: mesh.face_edges.nnz(),
            nnz32: mesh.cell_vertices().nnz(),
            off2: mesh.face_edges.offsets(),
            off3: mesh.cell_faces.offsets(),
            off31: mesh.cell_edges().offsets(),
            off32: mesh.cell_vertices().offsets(),
            counts,
        })
    }
}

// ---------------------------------------------------------------------------------------
// positions

#[inline]
fn add(a: &mut Point, b: &Point) {
    a[0] += b[0];
    a[1] += b[1];
    a[2] += b[2];
}
#[inline]
fn scale(a: Point, s: f64) -> Point {
    [a[0] * s, a[1] * s, a[2] * s]
}
#[inline]
fn average<I: Iterator<Item = u32>>(pos: &[Point], idx: I) -> Point {
    let mut s = [0.0; 3];
    let mut n = 0usize;
    for i in idx {
        add(&mut s, &pos[i as usize]);
        n += 1;
    }
    scale(s, 1.0 / n as f64)
}
#[inline]
fn midpoint(pos: &[Point], [a, b]: [u32; 2]) -> Point {
    let (p, q) = (pos[a as usize], pos[b as usize]);
    [
        0.5 * (p[0] + q[0]),
        0.5 * (p[1] + q[1]),
        0.5 * (p[2] + q[2]),
    ]
}

/// Per-edge data shared by the edge and vertex rules.
#[derive(Clone, Copy, Default)]
struct EdgeAcc {
    face_sum: Point,
    nfaces: u32,
    boundary: bool,
}

/// Positions of all new vertices (dissertation §3.4.3 rules, Eqs. 3.5-3.8).
fn new_positions(mesh: &PolyMesh, t: &Topology) -> Result<Vec<Point>, MeshError> {
    let par = mesh.par();
    let pos = &mesh.positions;
    let ev = &mesh.edge_vertices;
    let (fv, cv, fc, ef, ec, ve, vc) = (
        mesh.face_vertices(),
        mesh.cell_vertices(),
        mesh.face_cells(),
        mesh.edge_faces(),
        mesh.edge_cells(),
        mesh.vertex_edges(),
        mesh.vertex_cells(),
    );
    let mut out = vec![[0.0; 3]; t.counts.vertices];
    let (vblock, rest) = out.split_at_mut(t.nv);
    let (eblock, rest) = rest.split_at_mut(t.ne);
    let (fblock, cblock) = rest.split_at_mut(t.nf);

    // Eq. 3.5: cell points are the cell centroids
    fill_map(par, cblock, |c| {
        average(pos, cv.row(c).iter().map(|&v| v as u32))
    });
    let cc: &[Point] = cblock;
    // Eq. 3.6: face centroids
    let mut fcen = vec![[0.0; 3]; t.nf];
    fill_map(par, &mut fcen, |f| {
        average(pos, fv.row(f).iter().map(|&v| v as u32))
    });
    let fcen = &fcen;
    let face_boundary = |f: u32| fc.row_len(f as usize) == 1;
    // Eq. 3.8: face points
    fill_map(par, fblock, |f| {
        let row = fc.row(f);
        if row.len() == 1 {
            fcen[f]
        } else {
            let c = average(cc, row.iter().map(|&v| decode(v).0));
            let p = fcen[f];
            [
                0.5 * (p[0] + c[0]),
                0.5 * (p[1] + c[1]),
                0.5 * (p[2] + c[2]),
            ]
        }
    });
    // per edge: whether it is on the boundary (an incident face is) and the sum of the
    // centroids of the faces its rule averages (the boundary faces of a boundary edge, all
    // faces of an interior edge); the vertex rule reuses these sums, so each vertex reads
    // its edges once instead of every face around every edge
    let mut eacc = vec![EdgeAcc::default(); t.ne];
    fill_map(par, &mut eacc, |e| {
        let faces = ef.row(e);
        let boundary = faces.iter().any(|&v| face_boundary(decode(v).0));
        let mut sum = [0.0; 3];
        let mut n = 0u32;
        for &x in faces {
            let f = decode(x).0;
            if !boundary || face_boundary(f) {
                add(&mut sum, &fcen[f as usize]);
                n += 1;
            }
        }
        EdgeAcc {
            face_sum: sum,
            nfaces: n,
            boundary,
        }
    });
    let eacc = &eacc;
    // edge points
    fill_map(par, eblock, |e| {
        let m = midpoint(pos, ev[e]);
        let EdgeAcc {
            face_sum,
            nfaces,
            boundary,
        } = eacc[e];
        let fa = scale(face_sum, 1.0 / nfaces as f64);
        if boundary {
            [
                0.5 * (fa[0] + m[0]),
                0.5 * (fa[1] + m[1]),
                0.5 * (fa[2] + m[2]),
            ]
        } else {
            let n = nfaces as f64;
            let ca = average(cc, ec.row(e).iter().map(|&v| v as u32));
            let mut p = scale(ca, 1.0 / n);
            add(&mut p, &scale(fa, 2.0 / n));
            add(&mut p, &scale(m, (n - 3.0) / n));
            p
        }
    });
    // vertex points; the faces at v are reached through v's edges, each face twice
    fill_map(par, vblock, |v| {
        let p = pos[v];
        let edges = ve.row(v);
        if edges.is_empty() {
            return p;
        }
        let boundary = edges.iter().any(|&x| eacc[decode(x).0 as usize].boundary);
        let mut fs = [0.0; 3];
        let mut nf = 0u32;
        let mut es = [0.0; 3];
        let mut ne = 0u32;
        for &x in edges {
            let e = decode(x).0 as usize;
            let acc = &eacc[e];
            if boundary && !acc.boundary {
                continue;
            }
            add(&mut es, &midpoint(pos, ev[e]));
            ne += 1;
            add(&mut fs, &acc.face_sum);
            nf += acc.nfaces;
        }
        let fa = scale(fs, 1.0 / nf as f64);
        let ea = scale(es, 1.0 / ne as f64);
        if boundary {
            // n boundary faces at v, each reached through its two boundary edges at v
            let n = nf as f64 / 2.0;
            let mut q = scale(fa, 1.0 / n);
            add(&mut q, &scale(ea, 2.0 / n));
            add(&mut q, &scale(p, (n - 3.0) / n));
            q
        } else {
            let ca = average(cc, vc.row(v).iter().map(|&c| c as u32));
            let mut q = scale(ca, 0.125);
            add(&mut q, &scale(fa, 0.375));
            add(&mut q, &scale(ea, 0.375));
            add(&mut q, &scale(p, 0.125));
            q
        }
    });
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// topology

/// New ∂1: edge-edges (Eq. 3.9), face-edges (Eq. 3.10), cell-edges (Fig. 3.8).
fn new_edges(mesh: &PolyMesh, t: &Topology) -> Result<Vec<[u32; 2]>, MeshError> {
    let par = mesh.par();
    let ev = &mesh.edge_vertices;
    let mut out = vec![[0u32; 2]; t.counts.edges];
    let (ee, rest) = out.split_at_mut(2 * t.ne);
    let (fe, ce) = rest.split_at_mut(t.nnz2);
    let (nv, ne, nf) = (t.nv as u32, t.ne as u32, t.nf as u32);
    fill_map(par, ee, |i| {
        let e = (i / 2) as u32;
        let [a, b] = ev[e as usize];
        if i % 2 == 0 {
            [a, nv + e]
        } else {
            [nv + e, b]
        }
    });
    let (off2, off3) = (t.off2, t.off3);
    let fer = &mesh.face_edges;
    for_segments1(
        par,
        t.nf,
        fe,
        &|f| off2[f] as usize,
        &|f, seg: &mut [[u32; 2]]| {
            let fp = nv + ne + f as u32;
            for (o, &x) in seg.iter_mut().zip(fer.row(f)) {
                *o = [nv + decode(x).0, fp];
            }
            Ok(())
        },
    )?;
    let cfr = &mesh.cell_faces;
    for_segments1(
        par,
        mesh.num_cells(),
        ce,
        &|c| off3[c] as usize,
        &|c, seg: &mut [[u32; 2]]| {
            let cp = nv + ne + nf + c as u32;
            for (o, &x) in seg.iter_mut().zip(cfr.row(c)) {
                *o = [nv + ne + decode(x).0, cp];
            }
            Ok(())
        },
    )?;
    Ok(out)
}

/// New ∂2 (all quadrilaterals, rows in loop order: face-faces then cell-faces, Fig. 3.9) and
/// new ∂3 (cell-cells).
///
/// The face-faces are filled per face. Everything else is filled per cell in one visit, so
/// that the rows of the cell's faces are read from memory once:
/// 1. the cell-faces of c's edges: the face `f_b` of c that runs against `e` (outward from
///    c) gives `ep(e) -> fp(f_b) -> cp(c)`, the face `f_a` that runs along `e` gives
///    `cp(c) -> fp(f_a) -> ep(e)`; a slot written twice or left empty means c is not closed;
/// 2. count: in a closed cell every edge is used by two face corners at each of its ends
///    and every corner at v uses two edges at v, so the cell-cell of v has
///    `2 x (corners at v)` faces and all cell-cells of c together `4 |edges of c|`: the rows
///    of cell c start at `4 off(∂̂3¹)[c]` without a global scan;
/// 3. scan the cell's counts in its slice of the new ∂3 offsets and fill, using that slice
///    as cursors: the face-face of each corner (sign of the face in c), then for the use of
///    each edge along the outward orientation its cell-face at the edge's start (+1) and end
///    (-1) vertex, taken from the face loop.
fn new_faces_and_cells(mesh: &PolyMesh, t: &Topology) -> Result<(Tcsr, Tcsr), MeshError> {
    let par = mesh.par();
    let nc = mesh.num_cells();
    let nfaces = t.counts.faces;
    let (cfr, fer, fvr, cer, cvr) = (
        &mesh.cell_faces,
        &mesh.face_edges,
        mesh.face_vertices(),
        mesh.cell_edges(),
        mesh.cell_vertices(),
    );
    let (off2, off3, off31, off32) = (t.off2, t.off3, t.off31, t.off32);
    let e2 = 2 * t.ne as u32;
    let e3 = e2 + t.nnz2 as u32;
    let cf_base = t.nnz2 as u32;

    let mut offsets2 = vec![0u32; nfaces + 1];
    fill_map(par, &mut offsets2, |i| 4 * i as u32);
    let mut cols2 = vec![0i32; 4 * nfaces];
    let (ff, cf) = cols2.split_at_mut(4 * t.nnz2);
    // face-faces: corner i of f is v_i -> ep(e_i) -> fp(f) -> ep(e_{i-1})
    for_segments1(
        par,
        t.nf,
        ff,
        &|f| 4 * off2[f] as usize,
        &|f, seg: &mut [i32]| {
            let row = fer.row(f);
            let n = row.len();
            let base = e2 + off2[f];
            for i in 0..n {
                let ip = (i + n - 1) % n;
                let (en, sn) = decode(row[i]);
                let (epv, sp) = decode(row[ip]);
                let q = &mut seg[4 * i..4 * i + 4];
                // half of e_i at v_i, traversed away from v_i
                q[0] = if sn > 0 {
                    encode(2 * en, false)
                } else {
                    encode(2 * en + 1, true)
                };
                q[1] = encode(base + i as u32, false);
                q[2] = encode(base + ip as u32, true);
                // half of e_{i-1} at v_i, traversed toward v_i
                q[3] = if sp > 0 {
                    encode(2 * epv + 1, false)
                } else {
                    encode(2 * epv, true)
                };
            }
            Ok(())
        },
    )?;

    let nnz3 = 4 * off31[nc] as usize;
    let mut offsets3 = vec![0u32; t.nnz32 + 1];
    offsets3[t.nnz32] = nnz3 as u32;
    let mut cols3 = vec![0i32; nnz3];
    let local = |verts: &[i32], v: i32, c: usize| -> Result<usize, MeshError> {
        verts.binary_search(&v).map_err(|_| {
            MeshError::InvalidTopology(format!(
                "vertex {v} of cell {c} is missing from its vertex list"
            ))
        })
    };
    for_segments3(
        par,
        0,
        nc,
        (cf, &|c| 4 * off31[c] as usize),
        (&mut offsets3[..t.nnz32], &|c| off32[c] as usize),
        (&mut cols3, &|c| 4 * off31[c] as usize),
        &|c, cfseg: &mut [i32], cursor: &mut [u32], seg: &mut [i32]| {
            let edges = cer.row(c);
            let verts = cvr.row(c);
            // 1. cell-faces: ep(e) -> fp(f_b) -> cp(c) -> fp(f_a), normal along e
            cfseg.fill(UNSET);
            let not_closed = |e: u32| {
                MeshError::Unsupported(format!(
                    "cell {c} is not closed: its faces do not use edge {e} exactly once in each direction"
                ))
            };
            for (k, &x) in cfr.row(c).iter().enumerate() {
                let (f, sf) = decode(x);
                let cell_edge = e3 + off3[c] + k as u32;
                let o2 = off2[f as usize];
                for (i, &y) in fer.row(f as usize).iter().enumerate() {
                    let (e, se) = decode(y);
                    let face_edge = e2 + o2 + i as u32;
                    let j = edges
                        .binary_search(&(e as i32))
                        .map_err(|_| not_closed(e))?;
                    let q = &mut cfseg[4 * j..4 * j + 4];
                    if sf * se < 0 {
                        if q[0] != UNSET {
                            return Err(not_closed(e));
                        }
                        q[0] = encode(face_edge, false);
                        q[1] = encode(cell_edge, false);
                    } else {
                        if q[2] != UNSET {
                            return Err(not_closed(e));
                        }
                        q[2] = encode(cell_edge, true);
                        q[3] = encode(face_edge, true);
                    }
                }
            }
            if let Some(j) = cfseg.iter().position(|&x| x == UNSET) {
                return Err(not_closed(edges[j / 4] as u32));
            }
            // 2. count
            let base = 4 * off31[c];
            let mismatch = || {
                MeshError::InvalidTopology(format!(
                    "cell {c}: its face corners and edges do not pair up at its vertices"
                ))
            };
            cursor.fill(0);
            for &x in cfr.row(c) {
                for &v in fvr.row(decode(x).0 as usize) {
                    cursor[local(verts, v, c)?] += 2;
                }
            }
            // 3. scan (exclusive, absolute) and fill
            let mut acc = base;
            for k in cursor.iter_mut() {
                let n = *k;
                *k = acc;
                acc += n;
            }
            if acc as usize != base as usize + seg.len() {
                return Err(mismatch());
            }
            let mut put = |l: usize, val: i32| -> Result<(), MeshError> {
                let i = (cursor[l] - base) as usize;
                if i >= seg.len() {
                    return Err(mismatch());
                }
                seg[i] = val;
                cursor[l] += 1;
                Ok(())
            };
            for &x in cfr.row(c) {
                let (f, sf) = decode(x);
                let o2 = off2[f as usize];
                let lp = fvr.row(f as usize);
                let row = fer.row(f as usize);
                let n = lp.len();
                for i in 0..n {
                    let vi = lp[i];
                    put(local(verts, vi, c)?, encode(o2 + i as u32, sf < 0))?;
                    let (e, se) = decode(row[i]);
                    if sf * se > 0 {
                        // the use of e along c's outward orientation: once per edge of c
                        let j = edges
                            .binary_search(&(e as i32))
                            .map_err(|_| not_closed(e))?;
                        let face = cf_base + off31[c] + j as u32;
                        let vn = lp[(i + 1) % n];
                        let (from, to) = if se > 0 { (vi, vn) } else { (vn, vi) };
                        put(local(verts, from, c)?, encode(face, false))?;
                        put(local(verts, to, c)?, encode(face, true))?;
                    }
                }
            }
            // every cursor now sits at the start of the next row: shift back into offsets
            for l in (1..cursor.len()).rev() {
                cursor[l] = cursor[l - 1];
            }
            if let Some(first) = cursor.first_mut() {
                *first = base;
            }
            Ok(())
        },
    )?;
    if offsets3.windows(2).any(|w| w[0] > w[1]) {
        return Err(MeshError::InvalidTopology(
            "cell-cell rows of the subdivided mesh overlap".into(),
        ));
    }
    Ok((
        Tcsr::from_raw_unchecked(t.counts.edges, offsets2, cols2),
        Tcsr::from_raw_unchecked(nfaces, offsets3, cols3),
    ))
}
