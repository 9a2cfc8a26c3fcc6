//! Laplacian smoothing of inner vertices (dissertation §3.4.2).
//!
//! "Laplacian smoothing of inner vertices also requires the set of boundary vertices, as
//! these should remain unaffected. This mask is computed once, then smoothing is performed
//! iteratively. Each smoothing iteration sets a vertex's position to the average of the
//! positions of its neighbors. [...] separate input and output arrays of positions are used
//! that are swapped between iterations. The set of neighbors is determined by iterating
//! over the corresponding entries in δ1 and ∂1 [...]. Which entry of ∂1 has to be read is
//! determined by the sign of the entry in δ1."
//!
//! One iteration (Jacobi): for every inner vertex `v` with neighbours `N(v)` over edges,
//! `p'(v) = (1/|N(v)|) Σ_{u ∈ N(v)} p(u)`, summed in δ1 row order (edges ascending), so the
//! sequential and the rayon path give bit-identical positions. Boundary vertices (from
//! [`crate::boundary::extract_boundary`]) and vertices without edges keep their position.
//!
//! **Plain and safe smoothing.** The dissertation's iteration ([`SmoothMethod::Plain`])
//! looks only at vertices, so it can fold cells over: on the shared bunny mesh one
//! iteration inverts about 150 tetrahedra. The default, [`SmoothMethod::Safe`], is a
//! "smart" Laplacian: every iteration computes the same Laplacian candidates, then rejects
//! the moves that would invert a cell or push its shape measure below
//! `min(its measure before, the threshold)` ([`crate::quality`]: mean ratio `η`, compared
//! as `q = η^{3/2}`). Moves are checked together: in synchronous rounds, every cell is
//! evaluated with the candidates of its not-yet-rejected vertices, and a cell that fails
//! rejects the moves of all its moving vertices; rounds repeat until no cell fails. Only
//! rejections are added, so this ends, at worst with every move rejected (the positions of
//! the iteration before, whose cells all pass). The result does not depend on the order
//! cells are visited in, and the GPU (`cuda::smooth`) performs the same operations in the
//! same order, so both give identical positions.

use crate::boundary::extract_boundary;
use crate::quality::{self, QualityStencil};
use crate::{Point, PolyMesh};
use rayon::prelude::*;
use serde::Serialize;
use tessera_core::Par;
use tessera_sparse::tcsr::decode;
use tessera_sparse::Tcsr;

/// Which smoothing rule runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SmoothMethod {
    /// The dissertation's Laplacian smoothing of inner vertices (§3.4.2): every move is taken.
    Plain,
    /// Laplacian smoothing that rejects moves inverting or degrading a cell (see the module docs).
    Safe,
}

/// Parameters of [`smooth`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmoothParams {
    pub iterations: usize,
    pub method: SmoothMethod,
    /// Safe smoothing: the mean ratio `η` (0..1, 1 = regular tetrahedron) below which a move
    /// may not push a cell (cells already below it may not get worse).
    pub min_quality: f64,
}

impl Default for SmoothParams {
    fn default() -> Self {
        SmoothParams {
            iterations: 10,
            method: SmoothMethod::Safe,
            min_quality: DEFAULT_MIN_QUALITY,
        }
    }
}

/// Default threshold of safe smoothing (mean ratio).
pub const DEFAULT_MIN_QUALITY: f64 = 0.1;

/// Counts of safe smoothing (identical on the CPU and the GPU).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SafeStats {
    /// Vertex moves rejected, summed over the iterations.
    pub rejected_moves: u64,
    /// Vertices allowed to move (inner vertices with edges).
    pub movable_vertices: u64,
    /// Checking rounds, summed over the iterations.
    pub rounds: u64,
}

/// What [`smooth`] reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SmoothReport {
    pub method: SmoothMethod,
    pub iterations: usize,
    pub min_quality: Option<f64>,
    pub rejected_moves: u64,
    pub movable_vertices: u64,
    pub inverted_before: usize,
    pub inverted_after: usize,
    /// The first inverted cells after smoothing.
    pub inverted_cells: Vec<u32>,
    pub degenerate_after: usize,
    /// Lowest mean ratio before and after.
    pub min_quality_before: f64,
    pub min_quality_after: f64,
    pub max_displacement: f64,
}

/// What safe smoothing needs besides the positions: the shape stencil of every cell,
/// which vertices move, and the threshold in `q` units.
#[derive(Clone, Debug)]
pub struct SafeSetup {
    pub stencil: QualityStencil,
    /// Inner vertices with at least one edge.
    pub moving: Vec<bool>,
    /// `q` of the mean-ratio threshold.
    pub tau_q: f64,
}

impl SafeSetup {
    /// The setup for `mesh` with mean-ratio threshold `min_quality`; cells are oriented
    /// consistently with their neighbours ([`quality::cell_orientation`]).
    pub fn new(mesh: &PolyMesh, min_quality: f64) -> Self {
        let w = quality::cell_orientation(mesh);
        SafeSetup {
            stencil: QualityStencil::new(mesh, &w),
            moving: movable_vertices(mesh),
            tau_q: quality::q_of_mean_ratio(min_quality),
        }
    }
}

/// Inner vertices with at least one edge (the vertices smoothing moves).
pub fn movable_vertices(mesh: &PolyMesh) -> Vec<bool> {
    let fixed = extract_boundary(mesh).vertex_mask(mesh.num_vertices());
    let ve = mesh.vertex_edges();
    (0..mesh.num_vertices())
        .map(|v| !fixed[v] && ve.row_len(v) > 0)
        .collect()
}

/// Smooth `mesh` in place with `params` on the CPU and report what happened (validity
/// before and after, rejected moves, the largest displacement).
pub fn smooth(mesh: &mut PolyMesh, params: &SmoothParams) -> SmoothReport {
    let r: Result<SmoothReport, std::convert::Infallible> = smooth_by(mesh, params, |m, setup| {
        Ok(match setup {
            None => (
                smoothed_positions(m, params.iterations),
                SafeStats::default(),
            ),
            Some(setup) => safe_smoothed_positions(m, setup, params.iterations),
        })
    });
    match r {
        Ok(r) => r,
        Err(e) => match e {},
    }
}

/// Smooth `mesh` in place with `params`, the smoothing itself done by `run` (the CPU or a
/// device): `run` gets the mesh and, for safe smoothing, its [`SafeSetup`], and returns the
/// new positions and the counts. Validity before and after is checked here, with the
/// orientation the cells had before (smoothing keeps the topology).
pub fn smooth_by<E>(
    mesh: &mut PolyMesh,
    params: &SmoothParams,
    run: impl FnOnce(&PolyMesh, Option<&SafeSetup>) -> Result<(Vec<Point>, SafeStats), E>,
) -> Result<SmoothReport, E> {
    let before = mesh.positions().to_vec();
    let w = quality::cell_orientation(mesh);
    let stencil = QualityStencil::new(mesh, &w);
    let (v0, q0) = validity_and_min(mesh, &w, &stencil);
    let setup = (params.method == SmoothMethod::Safe).then(|| SafeSetup {
        stencil: stencil.clone(),
        moving: movable_vertices(mesh),
        tau_q: quality::q_of_mean_ratio(params.min_quality),
    });
    let (positions, stats) = if params.iterations == 0 {
        (before.clone(), SafeStats::default())
    } else {
        run(mesh, setup.as_ref())?
    };
    *mesh.positions_mut() = positions;
    Ok(report(mesh, params, &before, &w, &stencil, v0, q0, stats))
}

/// The report of a smoothing run from the positions before and the smoothed mesh (used by
/// the GPU path too).
#[allow(clippy::too_many_arguments)]
pub fn report(
    mesh: &PolyMesh,
    params: &SmoothParams,
    before: &[Point],
    w: &[i8],
    stencil: &QualityStencil,
    v0: quality::Validity,
    q0: f64,
    stats: SafeStats,
) -> SmoothReport {
    let (v1, q1) = validity_and_min(mesh, w, stencil);
    let max_displacement = before
        .iter()
        .zip(mesh.positions())
        .map(|(p, q)| {
            ((q[0] - p[0]).powi(2) + (q[1] - p[1]).powi(2) + (q[2] - p[2]).powi(2)).sqrt()
        })
        .fold(0.0, f64::max);
    SmoothReport {
        method: params.method,
        iterations: params.iterations,
        min_quality: (params.method == SmoothMethod::Safe).then_some(params.min_quality),
        rejected_moves: stats.rejected_moves,
        movable_vertices: if stats.movable_vertices > 0 {
            stats.movable_vertices
        } else {
            movable_vertices(mesh).iter().filter(|&&m| m).count() as u64
        },
        inverted_before: v0.inverted,
        inverted_after: v1.inverted,
        inverted_cells: v1.inverted_cells,
        degenerate_after: v1.degenerate,
        min_quality_before: q0,
        min_quality_after: q1,
        max_displacement,
    }
}

/// Validity with the orientation fixed before smoothing (smoothing keeps the topology, so
/// the orientation that was consistent before is the reference after), and the lowest
/// mean ratio.
pub fn validity_and_min(
    mesh: &PolyMesh,
    w: &[i8],
    stencil: &QualityStencil,
) -> (quality::Validity, f64) {
    let v = quality::validity_with(mesh, w);
    let pos = mesh.positions();
    let qmin = (0..stencil.num_cells())
        .into_par_iter()
        .with_min_len(4096)
        .map(|c| stencil.q(c, pos))
        .reduce(|| f64::INFINITY, f64::min);
    let qmin = if qmin.is_finite() { qmin } else { 0.0 };
    (v, quality::mean_ratio_of_q(qmin))
}

/// Smooth the inner vertices of `mesh` with `iterations` Laplacian (Jacobi) steps, using
/// double-buffered positions and `mesh.par()` (dissertation §3.4.2). Topology and its
/// caches are unchanged. This is [`SmoothMethod::Plain`].
pub fn laplacian_smooth(mesh: &mut PolyMesh, iterations: usize) {
    if iterations == 0 {
        return;
    }
    let out = smoothed_positions(mesh, iterations);
    *mesh.positions_mut() = out;
}

/// The positions after `iterations` plain smoothing steps, leaving `mesh` unchanged (see
/// [`laplacian_smooth`]).
pub fn smoothed_positions(mesh: &PolyMesh, iterations: usize) -> Vec<Point> {
    let par = mesh.par();
    let fixed = extract_boundary(mesh).vertex_mask(mesh.num_vertices());
    let ve = mesh.vertex_edges();
    let ev = mesh.edge_vertices();
    let mut cur = mesh.positions().to_vec();
    if iterations == 0 {
        return cur;
    }
    let mut next = cur.clone();
    for _ in 0..iterations {
        laplace_step(par, ve, ev, &fixed, &cur, &mut next);
        std::mem::swap(&mut cur, &mut next);
    }
    cur
}

/// One Jacobi step: `dst[v]` is the mean of the neighbours of `v` in `src` (δ1 row order),
/// or `src[v]` for fixed vertices and vertices without edges.
fn laplace_step(
    par: Par,
    ve: &Tcsr,
    ev: &[[u32; 2]],
    fixed: &[bool],
    src: &[Point],
    dst: &mut [Point],
) {
    let step = |(v, out): (usize, &mut Point)| {
        let row = ve.row(v);
        if fixed[v] || row.is_empty() {
            *out = src[v];
            return;
        }
        let mut s = [0.0f64; 3];
        for &e in row {
            let (e, sign) = decode(e);
            // +1: the edge ends at v, so the neighbour is its start (and vice versa)
            let u = ev[e as usize][(sign < 0) as usize];
            let p = src[u as usize];
            s[0] += p[0];
            s[1] += p[1];
            s[2] += p[2];
        }
        let n = row.len() as f64;
        *out = [s[0] / n, s[1] / n, s[2] / n];
    };
    match par {
        Par::Seq => dst.iter_mut().enumerate().for_each(step),
        Par::Rayon => dst
            .par_iter_mut()
            .with_min_len(4096)
            .enumerate()
            .for_each(step),
    }
}

/// The positions after `iterations` safe smoothing steps (see the module docs), leaving
/// `mesh` unchanged, and the counts of rejected moves and checking rounds.
pub fn safe_smoothed_positions(
    mesh: &PolyMesh,
    setup: &SafeSetup,
    iterations: usize,
) -> (Vec<Point>, SafeStats) {
    let par = mesh.par();
    let ve = mesh.vertex_edges();
    let ev = mesh.edge_vertices();
    let fixed: Vec<bool> = setup.moving.iter().map(|&m| !m).collect();
    let mut stats = SafeStats {
        movable_vertices: setup.moving.iter().filter(|&&m| m).count() as u64,
        ..Default::default()
    };
    let mut cur = mesh.positions().to_vec();
    let mut cand = cur.clone();
    for _ in 0..iterations {
        laplace_step(par, ve, ev, &fixed, &cur, &mut cand);
        let (rejected, rounds) = safe_rejections(par, setup, &cur, &cand);
        stats.rounds += rounds;
        stats.rejected_moves += rejected.iter().filter(|&&r| r).count() as u64;
        let apply = |(v, p): (usize, &mut Point)| {
            if setup.moving[v] && !rejected[v] {
                *p = cand[v];
            }
        };
        match par {
            Par::Seq => cur.iter_mut().enumerate().for_each(apply),
            Par::Rayon => cur
                .par_iter_mut()
                .with_min_len(4096)
                .enumerate()
                .for_each(apply),
        }
    }
    (cur, stats)
}

/// The rejected moves of one safe step from positions `old` to candidates `cand`, and the
/// number of checking rounds (see the module docs; mirrored by `safe_check` in `smooth.cu`).
pub fn safe_rejections(
    par: Par,
    setup: &SafeSetup,
    old: &[Point],
    cand: &[Point],
) -> (Vec<bool>, u64) {
    let st = &setup.stencil;
    let nc = st.num_cells();
    let q_old: Vec<f64> = match par {
        Par::Seq => (0..nc).map(|c| st.q(c, old)).collect(),
        Par::Rayon => (0..nc)
            .into_par_iter()
            .with_min_len(4096)
            .map(|c| st.q(c, old))
            .collect(),
    };
    let mut rejected = vec![false; old.len()];
    let mut rounds = 0u64;
    if nc == 0 {
        return (rejected, rounds);
    }
    loop {
        rounds += 1;
        let rej = &rejected;
        let at = |v: u32| {
            let v = v as usize;
            if setup.moving[v] && !rej[v] {
                cand[v]
            } else {
                old[v]
            }
        };
        let fails = |c: &usize| {
            let c = *c;
            let q = st.q_with(c, at);
            let lim = if q_old[c] < setup.tau_q {
                q_old[c]
            } else {
                setup.tau_q
            };
            q < lim
        };
        let bad: Vec<usize> = match par {
            Par::Seq => (0..nc).filter(fails).collect(),
            Par::Rayon => (0..nc)
                .into_par_iter()
                .with_min_len(4096)
                .filter(fails)
                .collect(),
        };
        let mut next = rejected.clone();
        let mut changed = false;
        for c in bad {
            for &v in st.cell_verts(c) {
                let v = v as usize;
                if setup.moving[v] && !rejected[v] && !next[v] {
                    next[v] = true;
                    changed = true;
                }
            }
        }
        rejected = next;
        if !changed {
            break;
        }
    }
    (rejected, rounds)
}
