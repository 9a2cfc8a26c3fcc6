//! Exact non-zeros per row from coboundary counts (dissertation §4.3, Eq. 4.6; §4.4.1).
//!
//! The number of nodes that share a cell with a k-simplex node `i` (the number of `e x e`
//! blocks in its row of the system matrix, **diagonal included**) is
//!
//! ```text
//! n_{k,i} = Σ_{l=k}^{d} C(p + k, l) · |S_i^{kl}|                                   (Eq. 4.6)
//! ```
//!
//! where `S_i^{kl}` is the set of l-simplices that are or contain the k-simplex of node `i`
//! (so `|S_i^{kk}| = 1`) and `C(n, k) = 0` for `k > n` (Eq. 4.3). `C(p + k, l)` is the
//! number of nodes an l-simplex adds once the `l - k` "layers" of nodes already counted on
//! its lower-dimensional simplices through the k-simplex are removed (Eq. 4.5). The count
//! is the same for all nodes on one k-simplex, and only the **sizes** of the coboundary
//! rows are needed, never their contents.
//!
//! As in §4.4.1 the sizes are never materialized as sparse matrices: starting from
//! `C(p + k, k)`, every l-simplex adds `C(p + k, l)` to each of its k-simplices with an
//! atomic add (`AtomicU32::fetch_add` on the rayon path, plain adds on the sequential
//! path; integer sums, so both give identical results). The regular arrays used are
//! `edgeVertices` (edges), `faceVertices`/`faceEdges` (faces, d = 3), and
//! `cellVertices`/`cellEdges`/`cellFaces`. A pass is skipped when its coefficient is zero
//! or when its k-simplices carry no nodes (`k > p - 1`): p = 1 needs only the edges,
//! p = 2 adds faces per vertex and faces and cells per edge, and so on.
//!
//! # Zayer et al.'s bound (Table 4.1, "Bound" and "Ratio")
//!
//! The text gives the bound as the size of the temporary matrix of Zayer et al.'s
//! SpGEMM-based assembly [ZSS17a; ZSS17b] without a formula. Their product of the
//! cell-node incidence with its transpose estimates each row by the sum of the nodes of
//! its cells, so the temporary matrix holds
//!
//! ```text
//! Bound = Σ_i Σ_{T ∋ i} C(p+d, d) = |T| · C(p+d, d)²
//! ```
//!
//! blocks, and `Ratio = Bound / Exact`. This reproduces the table: for the first mesh
//! (|T| = 7.7 k) `7.7 k · 16 = 123 k ≈ 124.0 k` (p = 1), `· 100 = 770 k ≈ 774.9 k` (p = 2),
//! `· 400 = 3.1 M` (p = 3); for the last (1.7 M tets) `· 400 = 680 M ≈ 681.1 M`. (That
//! row's p = 3 "Exact" of 329.3 M does not match its ratio of 1.8 or Eq. 4.6 with the
//! row's counts, which give about 378 M; see [`block_nonzeros_from_totals`].)

use crate::multi_index::binomial;
use crate::nodes::HoMesh;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};
use tessera_core::Par;

/// Eq. 4.6 counts per simplex: `per_dim[k][i] = n_{k,i}` for every k-simplex `i` that
/// carries nodes (`k <= min(p - 1, d)`; empty vectors otherwise). For d = 2 the
/// 2-simplices are the cells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimplexCounts {
    pub per_dim: [Vec<u32>; 4],
}

/// Accumulator for the count passes: atomics (rayon) or plain integers (sequential).
enum Acc {
    Seq(Vec<u32>),
    Atomic(Vec<AtomicU32>),
}

impl Acc {
    fn new(par: Par, n: usize, init: u32) -> Acc {
        match par {
            Par::Seq => Acc::Seq(vec![init; n]),
            Par::Rayon => Acc::Atomic(
                (0..n)
                    .into_par_iter()
                    .map(|_| AtomicU32::new(init))
                    .collect(),
            ),
        }
    }
    /// For every row `r` of a regular `rows x stride` array `targets`, add `coef` to each
    /// listed target.
    fn add_rows(&mut self, targets: &[u32], coef: u32) {
        if coef == 0 {
            return;
        }
        match self {
            Acc::Seq(v) => {
                for &t in targets {
                    v[t as usize] += coef;
                }
            }
            Acc::Atomic(v) => {
                let v = &*v;
                targets.par_chunks(4096).for_each(|chunk| {
                    for &t in chunk {
                        v[t as usize].fetch_add(coef, Ordering::Relaxed);
                    }
                });
            }
        }
    }
    /// Like [`Acc::add_rows`] for TCSR-encoded targets (signs ignored).
    fn add_encoded(&mut self, targets: &[i32], coef: u32) {
        if coef == 0 {
            return;
        }
        let c = |v: i32| tessera_sparse::tcsr::col(v) as usize;
        match self {
            Acc::Seq(v) => {
                for &t in targets {
                    v[c(t)] += coef;
                }
            }
            Acc::Atomic(v) => {
                let v = &*v;
                targets.par_chunks(4096).for_each(|chunk| {
                    for &t in chunk {
                        v[c(t)].fetch_add(coef, Ordering::Relaxed);
                    }
                });
            }
        }
    }
    fn into_vec(self) -> Vec<u32> {
        match self {
            Acc::Seq(v) => v,
            Acc::Atomic(v) => v.into_iter().map(AtomicU32::into_inner).collect(),
        }
    }
}

/// Eq. 4.6 per simplex by atomic adds of binomial coefficients (dissertation §4.4.1).
pub fn simplex_counts(ho: &HoMesh, par: Par) -> SimplexCounts {
    let m = ho.mesh();
    let d = m.dim();
    let p = ho.order();
    let kmax = (p - 1).min(d);
    let coef = |k: usize, l: usize| binomial(p + k, l) as u32;
    let mut per_dim: [Vec<u32>; 4] = Default::default();

    // k = 0: vertex nodes
    {
        let mut acc = Acc::new(par, m.num_vertices(), coef(0, 0));
        // edges (l = 1): edgeVertices
        let ev = m.edges();
        acc.add_rows(ev.as_flattened(), coef(0, 1));
        if coef(0, 2) > 0 {
            if d == 3 {
                acc.add_rows(m.faces().as_flattened(), coef(0, 2));
            } else {
                acc.add_rows(m.cell_vertices(), coef(0, 2));
            }
        }
        if d == 3 && coef(0, 3) > 0 {
            acc.add_rows(m.cell_vertices(), coef(0, 3));
        }
        per_dim[0] = acc.into_vec();
    }
    // k = 1: edge nodes
    if kmax >= 1 {
        let mut acc = Acc::new(par, m.num_edges(), coef(1, 1));
        if d == 3 {
            acc.add_encoded(m.face_edges(), coef(1, 2));
            acc.add_rows(m.cell_edges_array(), coef(1, 3));
        } else {
            acc.add_rows(m.cell_edges_array(), coef(1, 2));
        }
        per_dim[1] = acc.into_vec();
    }
    // k = 2: face nodes (d = 3) or cell nodes (d = 2)
    if kmax >= 2 {
        if d == 3 {
            let mut acc = Acc::new(par, m.num_faces(), coef(2, 2));
            acc.add_rows(m.cell_faces_array(), coef(2, 3));
            per_dim[2] = acc.into_vec();
        } else {
            per_dim[2] = vec![coef(2, 2); m.num_cells()];
        }
    }
    // k = 3: cell nodes (d = 3)
    if kmax >= 3 {
        per_dim[3] = vec![coef(3, 3); m.num_cells()];
    }
    SimplexCounts { per_dim }
}

/// Exact block non-zeros of every row (node), diagonal included: `n_{k,i}` of Eq. 4.6
/// repeated for the `C(p-1, k)` nodes of each k-simplex, in global node order. These are
/// the `columnCounts` of dissertation §4.4.1/§4.4.3.
pub fn row_counts(ho: &HoMesh, par: Par) -> Vec<u32> {
    let sc = simplex_counts(ho, par);
    let n = ho.num_nodes();
    let mut out = vec![0u32; n];
    for k in 0..=ho.dim() {
        let per = ho.nodes_per_simplex(k);
        let counts = &sc.per_dim[k];
        if per == 0 || counts.is_empty() {
            continue;
        }
        let dst = &mut out[ho.node_base(k)..ho.node_base(k + 1)];
        match par {
            Par::Seq => dst
                .chunks_mut(per)
                .zip(counts)
                .for_each(|(c, &v)| c.fill(v)),
            Par::Rayon => dst
                .par_chunks_mut(per)
                .zip(counts.par_iter())
                .with_min_len(1024)
                .for_each(|(c, &v)| c.fill(v)),
        }
    }
    out
}

/// Total exact block non-zeros (`e x e` blocks, diagonal included):
/// `Σ_k C(p-1, k) Σ_i n_{k,i}`.
pub fn block_nonzeros(ho: &HoMesh, par: Par) -> u64 {
    let sc = simplex_counts(ho, par);
    (0..=ho.dim())
        .map(|k| {
            ho.nodes_per_simplex(k) as u64 * sc.per_dim[k].iter().map(|&v| v as u64).sum::<u64>()
        })
        .sum()
}

/// Total exact block non-zeros from the simplex totals alone, `n = [V, E, F, C]` (for
/// d = 2, `n[2]` = triangles and `n[3]` unused): summing Eq. 4.6 over all k-simplices,
/// `Σ_i |S_i^{kl}| = C(l+1, k+1) · N_l` (each l-simplex has `C(l+1, k+1)` k-simplices,
/// Eq. 3.11), so
///
/// ```text
/// nnz = Σ_{k=0}^{d} C(p-1, k) Σ_{l=k}^{d} C(p+k, l) · C(l+1, k+1) · N_l.
/// ```
///
/// For example p = 1, d = 3: `V + 2E`; p = 2, d = 3: `V + 7E + 12F + 6C`. Used to check
/// Table 4.1.
pub fn block_nonzeros_from_totals(d: usize, p: usize, n: [u64; 4]) -> u64 {
    let mut total = 0u64;
    for k in 0..=d {
        let mut s = 0u64;
        for l in k..=d {
            s += (binomial(p + k, l) * binomial(l + 1, k + 1)) as u64 * n[l];
        }
        total += binomial(p - 1, k) as u64 * s;
    }
    total
}

/// Zayer et al.'s upper bound on the block non-zeros, `|T| · C(p+d, d)²` (Table 4.1
/// "Bound"; see the [module docs](self) for its derivation).
pub fn zayer_bound(ho: &HoMesh) -> u64 {
    let m = ho.nodes_per_cell() as u64;
    ho.num_cells() as u64 * m * m
}

/// Exact count, Zayer et al.'s bound and their ratio (Table 4.1 "Exact", "Bound", "Ratio").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NonzeroSummary {
    pub exact: u64,
    pub bound: u64,
    /// `bound / exact` (0 for an empty mesh).
    pub ratio: f64,
}

/// [`block_nonzeros`], [`zayer_bound`] and their ratio.
pub fn nonzero_summary(ho: &HoMesh, par: Par) -> NonzeroSummary {
    let exact = block_nonzeros(ho, par);
    let bound = zayer_bound(ho);
    NonzeroSummary {
        exact,
        bound,
        ratio: if exact == 0 {
            0.0
        } else {
            bound as f64 / exact as f64
        },
    }
}
