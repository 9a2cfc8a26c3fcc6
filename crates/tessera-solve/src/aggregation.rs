//! Strength of connection and aggregation for smoothed aggregation on node blocks.
//!
//! **Strength.** The graph nodes of a level are groups of `g` consecutive block rows: the
//! mesh nodes on the finest level (`g = 1`, 3 DOFs), the aggregates of the level above on
//! coarse levels (`g = m / 3` for an `m`-dimensional near-null space: 2 block rows for the
//! six rigid-body modes). With `‖·‖` the Frobenius norm of the `3g × 3g` block, nodes `I ≠ J`
//! are strongly connected when `‖A_IJ‖² > θ² ‖A_II‖ ‖A_JJ‖` (the symmetric measure of Vaněk,
//! Mandel and Brezina; amgcl's `eps_strong`). The norm of a pair is always taken from the
//! block row of `min(I, J)`, so the graph is symmetric even where `A` is symmetric only up to
//! rounding. Nodes without strong neighbours (for example fully constrained nodes, whose
//! filtered rows are the identity) are left out of every aggregate.
//!
//! **Aggregation** is the parallel MIS(2) aggregation of Bell, Dalton and Olson (2012):
//! a maximal distance-2 independent set is grown in synchronous rounds from the keys
//! `(state, hash(i), i)` (state: in > undecided > out), where an undecided node joins the set
//! when it holds the largest key within distance 2 and leaves when a set node is within
//! distance 2; the set nodes are the roots, numbered in node order. Every other node joins
//! the root adjacent to it with the largest key, and nodes still unassigned then join the
//! aggregate of the assigned neighbour with the largest key. Only integer keys and
//! comparisons are involved, so the CUDA implementation produces exactly the same
//! aggregates.

use std::borrow::Cow;

use rayon::prelude::*;

use crate::blockcsr::{BlockCsr, B2};

/// Not in any aggregate.
pub const NONE: u32 = u32::MAX;

/// The strength graph of a level: CSR adjacency of strongly connected graph nodes (self
/// excluded), columns ascending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrengthGraph {
    pub ptr: Vec<u32>,
    pub adj: Vec<u32>,
}

impl StrengthGraph {
    /// Number of graph nodes.
    pub fn num_nodes(&self) -> usize {
        self.ptr.len() - 1
    }
    /// Strong neighbours of node `i`.
    pub fn neighbours(&self, i: usize) -> &[u32] {
        &self.adj[self.ptr[i] as usize..self.ptr[i + 1] as usize]
    }
}

/// `‖B‖²_F` of one `3 × 3` block, summed row-major.
#[inline(always)]
pub fn block_norm2(b: &[f64]) -> f64 {
    let mut s = 0.0;
    for v in &b[..B2] {
        s += v * v;
    }
    s
}

/// The stored-block pattern of a level operator with the squared Frobenius norm of every
/// block ([`block_norm2`]): all the strength graph reads, so a device setup downloads this
/// instead of the values.
pub struct BlockNorms<'a> {
    /// Block rows.
    pub nrows: usize,
    /// `nrows + 1` offsets.
    pub row_ptr: Cow<'a, [u32]>,
    /// Block columns, ascending within a row.
    pub cols: Cow<'a, [u32]>,
    /// `‖A_k‖²` of every stored block.
    pub norm2: Vec<f64>,
}

impl<'a> BlockNorms<'a> {
    /// The norms of `a` (borrowing its pattern).
    pub fn of(a: &'a BlockCsr) -> Self {
        let norm2 = a
            .vals
            .par_chunks(B2)
            .with_min_len(4096)
            .map(block_norm2)
            .collect();
        BlockNorms {
            nrows: a.nrows,
            row_ptr: Cow::Borrowed(&a.row_ptr),
            cols: Cow::Borrowed(&a.cols),
            norm2,
        }
    }

    #[inline]
    fn row_range(&self, i: usize) -> std::ops::Range<usize> {
        self.row_ptr[i] as usize..self.row_ptr[i + 1] as usize
    }
}

/// Squared Frobenius norms of the `3g × 3g` group blocks of group row `gi`: `(J, ‖A_IJ‖²)`
/// for every group column `J` with a stored block, ascending. Sub-blocks are added in the
/// order of the group's block rows, each row's blocks in column order.
pub fn group_row_norms(a: &BlockNorms<'_>, g: usize, gi: usize, out: &mut Vec<(u32, f64)>) {
    out.clear();
    if g == 1 {
        for k in a.row_range(gi) {
            out.push((a.cols[k], a.norm2[k]));
        }
        return;
    }
    for p in 0..g {
        let r = g * gi + p;
        for k in a.row_range(r) {
            out.push((a.cols[k] / g as u32, a.norm2[k]));
        }
    }
    // stable sort keeps, within one group column, the row order and then the column order
    out.sort_by_key(|e| e.0);
    let mut w = 0;
    for r in 0..out.len() {
        if w > 0 && out[w - 1].0 == out[r].0 {
            out[w - 1].1 += out[r].1;
        } else {
            out[w] = out[r];
            w += 1;
        }
    }
    out.truncate(w);
}

/// The strength graph of `a` with group size `g` and threshold `theta` (see the module docs).
pub fn strength_graph(a: &BlockCsr, g: usize, theta: f64) -> StrengthGraph {
    strength_graph_of_norms(&BlockNorms::of(a), g, theta)
}

/// [`strength_graph`] from the block norms of the level operator.
pub fn strength_graph_of_norms(a: &BlockNorms<'_>, g: usize, theta: f64) -> StrengthGraph {
    let n = a.nrows / g;
    // per group row: all group norms (for the lookups of the mirrored pairs) and ‖A_II‖
    let norms: Vec<Vec<(u32, f64)>> = (0..n)
        .into_par_iter()
        .with_min_len(256)
        .map_init(Vec::new, |buf, i| {
            group_row_norms(a, g, i, buf);
            buf.clone()
        })
        .collect();
    let diag: Vec<f64> = norms
        .par_iter()
        .enumerate()
        .map(|(i, row)| {
            row.binary_search_by_key(&(i as u32), |e| e.0)
                .map(|k| row[k].1.sqrt())
                .unwrap_or(0.0)
        })
        .collect();
    let t2 = theta * theta;
    let rows: Vec<Vec<u32>> = (0..n)
        .into_par_iter()
        .with_min_len(256)
        .map(|i| {
            let mut out = Vec::new();
            for &(j, s2) in &norms[i] {
                let j = j as usize;
                if j == i {
                    continue;
                }
                // the pair's norm from the row of min(i, j)
                let s2 = if j < i {
                    match norms[j].binary_search_by_key(&(i as u32), |e| e.0) {
                        Ok(k) => norms[j][k].1,
                        Err(_) => s2,
                    }
                } else {
                    s2
                };
                // (diag[i] * diag[j] is exact-commutative, so both rows decide alike)
                if s2 > t2 * (diag[i] * diag[j]) && diag[i] > 0.0 && diag[j] > 0.0 {
                    out.push(j as u32);
                }
            }
            out
        })
        .collect();
    // pairs stored in only one of the two rows: keep the graph symmetric
    let mut ptr = vec![0u32; n + 1];
    let mut extra: Vec<(u32, u32)> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        for &j in r {
            if rows[j as usize].binary_search(&(i as u32)).is_err() {
                extra.push((j, i as u32));
            }
        }
    }
    extra.sort_unstable();
    let mut merged: Vec<Vec<u32>> = rows;
    for (j, i) in extra {
        let r = &mut merged[j as usize];
        let at = r.partition_point(|&c| c < i);
        r.insert(at, i);
    }
    let mut adj = Vec::new();
    for (i, r) in merged.iter().enumerate() {
        adj.extend_from_slice(r);
        ptr[i + 1] = adj.len() as u32;
    }
    StrengthGraph { ptr, adj }
}

/// A 30-bit hash of a node index (the murmur3 finalizer): the random priority of MIS(2).
#[inline(always)]
pub fn node_hash(i: u32) -> u32 {
    let mut h = i;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h >> 2
}

const IN: u64 = 2;
const UNDECIDED: u64 = 1;

/// The MIS(2) key of node `i` in state `s`: `(s, hash(i), i)` packed so that `u64` order is
/// the lexicographic order.
#[inline(always)]
pub fn mis_key(state: u64, i: u32) -> u64 {
    (state << 62) | ((node_hash(i) as u64) << 32) | i as u64
}

/// The result of aggregation: the aggregate of every graph node ([`NONE`] if it has no
/// strong neighbour) and the roots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aggregates {
    pub of_node: Vec<u32>,
    pub roots: Vec<u32>,
    /// Rounds the MIS(2) took.
    pub rounds: usize,
}

impl Aggregates {
    /// Number of aggregates.
    pub fn num_aggregates(&self) -> usize {
        self.roots.len()
    }
}

/// `out[i] = max(inp[i], max over the neighbours j of inp[j])`.
fn max_prop(g: &StrengthGraph, inp: &[u64], out: &mut [u64]) {
    out.par_iter_mut()
        .with_min_len(1024)
        .enumerate()
        .for_each(|(i, o)| {
            let mut m = inp[i];
            for &j in g.neighbours(i) {
                m = m.max(inp[j as usize]);
            }
            *o = m;
        });
}

/// Parallel MIS(2) aggregation (see the module docs).
pub fn aggregate_mis2(g: &StrengthGraph) -> Aggregates {
    let n = g.num_nodes();
    // isolated nodes start out of the set (state 0) and are never aggregated
    let mut key: Vec<u64> = (0..n)
        .map(|i| {
            let s = if g.neighbours(i).is_empty() {
                0
            } else {
                UNDECIDED
            };
            mis_key(s, i as u32)
        })
        .collect();
    let mut t1 = vec![0u64; n];
    let mut t2 = vec![0u64; n];
    let mut rounds = 0;
    loop {
        let undecided = key.par_iter().filter(|&&k| k >> 62 == UNDECIDED).count();
        if undecided == 0 {
            break;
        }
        rounds += 1;
        max_prop(g, &key, &mut t1);
        max_prop(g, &t1, &mut t2);
        key.par_iter_mut()
            .with_min_len(1024)
            .enumerate()
            .for_each(|(i, k)| {
                if *k >> 62 == UNDECIDED {
                    if t2[i] == *k {
                        *k = mis_key(IN, i as u32);
                    } else if t2[i] >> 62 == IN {
                        *k = mis_key(0, i as u32);
                    }
                }
            });
    }
    let roots: Vec<u32> = (0..n as u32)
        .filter(|&i| key[i as usize] >> 62 == IN)
        .collect();
    let mut of_node = vec![NONE; n];
    for (a, &r) in roots.iter().enumerate() {
        of_node[r as usize] = a as u32;
    }
    // phase 1: the adjacent root with the largest key
    let phase1: Vec<u32> = (0..n)
        .into_par_iter()
        .with_min_len(1024)
        .map(|i| {
            if of_node[i] != NONE {
                return of_node[i];
            }
            let mut best: Option<u32> = None;
            for &j in g.neighbours(i) {
                if key[j as usize] >> 62 == IN
                    && best.is_none_or(|b| key[j as usize] > key[b as usize])
                {
                    best = Some(j);
                }
            }
            best.map_or(NONE, |b| of_node[b as usize])
        })
        .collect();
    // phase 2: the assigned neighbour with the largest key
    let phase2: Vec<u32> = (0..n)
        .into_par_iter()
        .with_min_len(1024)
        .map(|i| {
            if phase1[i] != NONE || g.neighbours(i).is_empty() {
                return phase1[i];
            }
            let mut best: Option<u32> = None;
            for &j in g.neighbours(i) {
                let jk = mis_key(0, j);
                if phase1[j as usize] != NONE && best.is_none_or(|b| jk > mis_key(0, b)) {
                    best = Some(j);
                }
            }
            best.map_or(NONE, |b| phase1[b as usize])
        })
        .collect();
    Aggregates {
        of_node: phase2,
        roots,
        rounds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2D grid graph (5-point), every node strongly connected to its grid neighbours.
    fn grid(nx: usize, ny: usize) -> StrengthGraph {
        let mut ptr = vec![0u32];
        let mut adj = Vec::new();
        for y in 0..ny {
            for x in 0..nx {
                let mut r = Vec::new();
                if y > 0 {
                    r.push(((y - 1) * nx + x) as u32);
                }
                if x > 0 {
                    r.push((y * nx + x - 1) as u32);
                }
                if x + 1 < nx {
                    r.push((y * nx + x + 1) as u32);
                }
                if y + 1 < ny {
                    r.push(((y + 1) * nx + x) as u32);
                }
                adj.extend(r);
                ptr.push(adj.len() as u32);
            }
        }
        StrengthGraph { ptr, adj }
    }

    fn dist(g: &StrengthGraph, a: usize, b: usize) -> usize {
        let n = g.num_nodes();
        let mut d = vec![usize::MAX; n];
        let mut q = std::collections::VecDeque::new();
        d[a] = 0;
        q.push_back(a);
        while let Some(v) = q.pop_front() {
            for &w in g.neighbours(v) {
                if d[w as usize] == usize::MAX {
                    d[w as usize] = d[v] + 1;
                    q.push_back(w as usize);
                }
            }
        }
        d[b]
    }

    #[test]
    fn mis2_roots_are_independent_and_maximal() {
        let g = grid(23, 17);
        let ag = aggregate_mis2(&g);
        // roots at distance >= 3 from each other
        for (a, &r) in ag.roots.iter().enumerate() {
            for &s in &ag.roots[a + 1..] {
                assert!(dist(&g, r as usize, s as usize) >= 3);
            }
        }
        // every node aggregated, aggregates connected to their root within distance 2
        for i in 0..g.num_nodes() {
            let a = ag.of_node[i];
            assert_ne!(a, NONE, "node {i}");
            assert!(dist(&g, i, ag.roots[a as usize] as usize) <= 2);
        }
        // deterministic: the same again with one thread
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        assert_eq!(pool.install(|| aggregate_mis2(&g)), ag);
    }
}
