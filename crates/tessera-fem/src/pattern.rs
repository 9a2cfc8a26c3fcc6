//! The exact Bin-BCSR* sparsity pattern of an order-`p` simplex mesh (dissertation §4.4.3).
//!
//! 1. **Column counts** per node from coboundary counts alone (Eq. 4.6, [`crate::count`]);
//!    the count includes the node itself, whose block lives in the separate diagonal.
//! 2. **Bin sizes**: the maximum off-diagonal count per bin of 32 rows (on the GPU a warp
//!    shuffle reduction), **scanned into bin offsets**.
//! 3. **Exact allocation** of the column array: the only entries beyond the exact count are
//!    bin padding ([`BinBcsrPattern::padding_blocks`]).
//! 4. **Column indices**: for each node, the distinct nodes of its incident cells (node ->
//!    cells maps, [`HoMesh::node_cells`]) other than itself, sorted. The GPU inserts them into a
//!    sorted list by binary search and shifting (63 slots in shared memory, then global memory,
//!    [`LOCAL_SLOTS`]); the CPU collects them with a per-thread marker array over the nodes
//!    (one test per contribution instead of a search), sorts the short list, and in the same
//!    pass records the **position map** ([`PositionMap`]): for every contribution (row, incident
//!    cell, local node) the rank of its column in the row, so that summation never searches
//!    (dissertation §4.4.4: the per-node summation "looks up" each column; here the look-up is
//!    done once per pattern and reused for every refill of the values).
//!
//! The global nodes of every cell are tabulated once (`m` per cell) for this pass instead of
//! being recomputed for each of the cell's `m` rows.
//!
//! Each bin is filled by one task, rows in lane order, so `Par::Seq` and `Par::Rayon` give
//! identical patterns and maps. A row whose column count differs from the Eq. 4.6 count is
//! reported as [`FemError::PatternMismatch`] (a corrupt or non-conforming mesh), never written
//! out of bounds.

use crate::error::FemError;
use crate::nodes::HoMesh;
use rayon::prelude::*;
use std::time::Instant;
use tessera_core::Par;
use tessera_sparse::binbcsr::{bin_offsets_from_lengths, BinBcsrPattern, BIN_SIZE};

/// Column slots per row kept in the local buffer (dissertation §4.4.3: "we reserve 63 indices
/// per thread in shared memory").
pub const LOCAL_SLOTS: usize = 63;

/// Wall-clock stage times in milliseconds, named after the rows of dissertation Table 4.2.
pub type Stages = std::collections::BTreeMap<String, f64>;

pub(crate) fn time<R>(stages: &mut Stages, name: &str, f: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let r = f();
    *stages.entry(name.to_string()).or_insert(0.0) += t.elapsed().as_secs_f64() * 1e3;
    r
}

/// The Zayer et al. upper bound on the block non-zeros, `m² |T|` (dissertation Table 4.1,
/// "Bound"; [`crate::count::zayer_bound`]).
pub fn zayer_bound(ho: &HoMesh) -> u64 {
    crate::count::zayer_bound(ho)
}

/// Build the exact Bin-BCSR* pattern for `e` DOFs per node (dissertation §4.4.3). Stage times
/// are added to `stages` under `count_contributions`, `bin_offsets`, `alloc_final` and
/// `column_indices`.
pub fn build_pattern(
    ho: &HoMesh,
    e: usize,
    par: Par,
    stages: &mut Stages,
) -> Result<BinBcsrPattern, FemError> {
    let mut pat = alloc_pattern(ho, e, par, stages, None)?;
    column_pass(ho, &mut pat, par, false, None, stages)?;
    Ok(pat)
}

/// The block rows of a row-restricted assembly (dissertation §7.1.2: per-domain assembly of
/// the rows of the nodes a domain owns): block row `r` is the row of mesh node `rows[r]`, and
/// mesh node `j` is stored in column `column[j]`. `node_of_column` inverts `column` (every
/// node of the mesh has a column; the rows are a subset of the nodes, each of whose incident
/// cells must be in the mesh for the row to be complete).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowSubset {
    /// Mesh node of each block row.
    pub rows: Vec<u32>,
    /// Column of each mesh node.
    pub column: Vec<u32>,
    /// Mesh node of each column (the inverse permutation of `column`).
    pub node_of_column: Vec<u32>,
}

impl RowSubset {
    /// Checks that `column` is a permutation of the mesh's nodes with inverse
    /// `node_of_column` and that every row is a node.
    pub fn validate(&self, num_nodes: usize) -> Result<(), FemError> {
        let bad = |what: String| FemError::InvalidInput(format!("row subset: {what}"));
        if self.column.len() != num_nodes || self.node_of_column.len() != num_nodes {
            return Err(bad(format!(
                "{} columns and {} inverse entries for {num_nodes} nodes",
                self.column.len(),
                self.node_of_column.len()
            )));
        }
        for (j, &c) in self.column.iter().enumerate() {
            if c as usize >= num_nodes || self.node_of_column[c as usize] as usize != j {
                return Err(bad(format!("column {c} of node {j} is not inverted")));
            }
        }
        if let Some(&r) = self.rows.iter().find(|&&r| r as usize >= num_nodes) {
            return Err(bad(format!("row node {r} out of range")));
        }
        Ok(())
    }
    #[inline(always)]
    fn node(rs: Option<&RowSubset>, i: usize) -> usize {
        rs.map_or(i, |r| r.rows[i] as usize)
    }
}

/// [`build_pattern_with_positions`] for the rows of a [`RowSubset`] only, columns renumbered
/// by the subset: the exact counts (Eq. 4.6) of the subset's rows, bins over those rows,
/// exact allocation, then columns and positions. No row outside the subset is built.
pub fn build_pattern_rows_with_positions(
    ho: &HoMesh,
    e: usize,
    rows: &RowSubset,
    par: Par,
    stages: &mut Stages,
) -> Result<(BinBcsrPattern, PositionMap), FemError> {
    rows.validate(ho.num_nodes())?;
    let mut pat = alloc_pattern(ho, e, par, stages, Some(rows))?;
    let map = column_pass(ho, &mut pat, par, true, Some(rows), stages)?;
    Ok((pat, map.expect("requested")))
}

/// [`build_pattern`] and the [`PositionMap`] of its contributions, filled in one pass
/// (stage `column_indices`; the cell node table under `cell_nodes`).
pub fn build_pattern_with_positions(
    ho: &HoMesh,
    e: usize,
    par: Par,
    stages: &mut Stages,
) -> Result<(BinBcsrPattern, PositionMap), FemError> {
    let mut pat = alloc_pattern(ho, e, par, stages, None)?;
    let map = column_pass(ho, &mut pat, par, true, None, stages)?;
    Ok((pat, map.expect("requested")))
}

/// Steps 1-3: counts, bin offsets, exact allocation.
fn alloc_pattern(
    ho: &HoMesh,
    e: usize,
    par: Par,
    stages: &mut Stages,
    rows: Option<&RowSubset>,
) -> Result<BinBcsrPattern, FemError> {
    let counts = time(stages, "count_contributions", || {
        let all = crate::count::row_counts(ho, par);
        match rows {
            None => all,
            Some(rs) => rs.rows.iter().map(|&i| all[i as usize]).collect(),
        }
    });
    let lengths: Vec<u32> = counts.iter().map(|&c| c.saturating_sub(1)).collect();
    let offsets = time(stages, "bin_offsets", || {
        bin_offsets_from_lengths(&lengths, par)
    })?;
    let pat = time(stages, "alloc_final", || {
        BinBcsrPattern::with_bin_offsets_par(e, lengths, offsets, par)
    })?;
    debug_assert_eq!(pat.num_block_rows(), counts.len());
    Ok(pat)
}

/// Fill the column indices of an allocated pattern (step 4 above).
pub fn fill_columns(ho: &HoMesh, pat: &mut BinBcsrPattern, par: Par) -> Result<(), FemError> {
    fill_columns_and_positions(ho, pat, par, false, None, &mut Stages::new()).map(drop)
}

/// Step 4 timed as `column_indices`, with its parts under `column_indices: <part>`
/// (see [`fill_columns_and_positions`]).
fn column_pass(
    ho: &HoMesh,
    pat: &mut BinBcsrPattern,
    par: Par,
    positions: bool,
    rs: Option<&RowSubset>,
    stages: &mut Stages,
) -> Result<Option<PositionMap>, FemError> {
    let t = Instant::now();
    let mut parts = Stages::new();
    let r = fill_columns_and_positions(ho, pat, par, positions, rs, &mut parts);
    *stages.entry("column_indices".into()).or_insert(0.0) += t.elapsed().as_secs_f64() * 1e3;
    for (k, v) in parts {
        *stages.entry(format!("column_indices: {k}")).or_insert(0.0) += v;
    }
    r
}

/// Marks a contribution of a row's own node (the diagonal block) in a [`PositionMap`].
pub const DIAG: u16 = u16::MAX;

/// The column position of every per-node contribution (see the module docs): for block row
/// `i`, its `k`-th incident cell `c` (in [`HoMesh::node_cells`] order) and local node `b` of
/// `c`, the rank of `c`'s node `b` among the row's off-diagonal columns, or [`DIAG`] for the
/// row's own node. Built with the pattern; the element block `(a, b)` with `a` the row's
/// local index in `c` ([`PositionMap::local`]) is added at that position.
#[derive(Clone, Debug, Default)]
pub struct PositionMap {
    /// `m` (nodes per cell).
    pub m: usize,
    /// Contribution lists per row: row `i` owns cells `row_start[i]..row_start[i + 1]` of
    /// the flattened node -> cells rows (`n + 1` entries).
    pub row_start: Vec<u32>,
    /// Local index of the row's node in each incident cell.
    pub local: Vec<u8>,
    /// Column ranks, `m` per (row, incident cell).
    pub rank: Vec<u16>,
}

impl PositionMap {
    /// Bytes of the map's arrays.
    pub fn bytes(&self) -> u64 {
        (4 * self.row_start.len() + self.local.len() + 2 * self.rank.len()) as u64
    }
}

/// The global nodes of every cell, `m` per cell ([`HoMesh::cell_nodes`] tabulated).
pub fn cell_node_table(ho: &HoMesh, par: Par) -> Vec<u32> {
    let m = ho.nodes_per_cell();
    let mut t = vec![0u32; ho.num_cells() * m];
    tessera_core::bulk::advise_huge_pages(&mut t);
    if m == 0 {
        return t;
    }
    if par.is_parallel() {
        t.par_chunks_mut(m * 1024).enumerate().for_each(|(k, ch)| {
            for (j, row) in ch.chunks_exact_mut(m).enumerate() {
                ho.cell_nodes(k * 1024 + j, row);
            }
        });
    } else {
        for (c, row) in t.chunks_exact_mut(m).enumerate() {
            ho.cell_nodes(c, row);
        }
    }
    t
}

thread_local! {
    /// Per-thread marker array over the nodes: 0 = not in the current row, else rank + 1.
    /// All zero between rows; freed at the end of each pattern build.
    static MARKS: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Step 4 with an optional position map.
fn fill_columns_and_positions(
    ho: &HoMesh,
    pat: &mut BinBcsrPattern,
    par: Par,
    positions: bool,
    rs: Option<&RowSubset>,
    parts: &mut Stages,
) -> Result<Option<PositionMap>, FemError> {
    let n = pat.num_block_rows();
    let nn = ho.num_nodes();
    let lengths = pat.row_lengths().to_vec();
    // the node -> cells relations (cached in the mesh once derived)
    let nc = time(parts, "relations", || ho.node_cells());
    let m = ho.nodes_per_cell();
    if m > u8::MAX as usize {
        return Err(FemError::TooLarge(format!("{m} nodes per cell")));
    }
    if let Some(&mx) = lengths.iter().max() {
        if positions && mx as usize >= DIAG as usize {
            return Err(FemError::TooLarge(format!(
                "a row of {mx} blocks exceeds the 16-bit column positions"
            )));
        }
    }
    // the global nodes of every cell; at p = 1 they are the cell's vertices, in order
    let table: std::borrow::Cow<'_, [u32]> = time(parts, "cell_nodes", || {
        if ho.order() == 1 {
            std::borrow::Cow::Borrowed(ho.mesh().cell_vertices())
        } else {
            std::borrow::Cow::Owned(cell_node_table(ho, par))
        }
    });
    let t_lists = Instant::now();
    // contribution lists: the flattened node -> cells rows
    let row_len: Vec<u32> = if par.is_parallel() {
        (0..n)
            .into_par_iter()
            .with_min_len(4096)
            .map(|i| nc.row(RowSubset::node(rs, i) as u32).len() as u32)
            .collect()
    } else {
        (0..n)
            .map(|i| nc.row(RowSubset::node(rs, i) as u32).len() as u32)
            .collect()
    };
    let row_start = tessera_core::scan::offsets_from_counts(par, &row_len)
        .ok_or_else(|| FemError::TooLarge("more than 2^32 node-cell pairs".into()))?;
    let total = *row_start.last().unwrap() as usize;
    let mut local = vec![0u8; if positions { total } else { 0 }];
    let mut rank = vec![0u16; if positions { total * m } else { 0 }];
    tessera_core::bulk::advise_huge_pages(&mut rank);
    // per-bin slices of the map
    let bins = pat.bins_mut();
    let nb = bins.len();
    let mut loc_pieces: Vec<&mut [u8]> = Vec::with_capacity(nb);
    let mut rank_pieces: Vec<&mut [u16]> = Vec::with_capacity(nb);
    {
        let (mut lr, mut rr): (&mut [u8], &mut [u16]) = (&mut local, &mut rank);
        for b in 0..nb {
            let (r0, r1) = (b * BIN_SIZE, ((b + 1) * BIN_SIZE).min(n));
            let len = if positions {
                (row_start[r1] - row_start[r0]) as usize
            } else {
                0
            };
            let (h, t) = std::mem::take(&mut lr).split_at_mut(len);
            loc_pieces.push(h);
            lr = t;
            let (h, t) = std::mem::take(&mut rr).split_at_mut(len * m);
            rank_pieces.push(h);
            rr = t;
        }
    }
    *parts.entry("lists".into()).or_insert(0.0) += t_lists.elapsed().as_secs_f64() * 1e3;
    let t_fill = Instant::now();
    type BinWork<'w> = ((usize, &'w mut [u32]), (&'w mut [u8], &'w mut [u16]));
    let fill_bin = |((b, cols), (lp, rp)): BinWork<'_>| {
        MARKS.with(|marks| -> Result<(), FemError> {
            let mut marks = marks.borrow_mut();
            if marks.len() < nn {
                *marks = tessera_core::bulk::filled(nn, 0, Par::Seq);
            }
            let mut list: Vec<u32> = Vec::with_capacity(64);
            let base = row_start[b * BIN_SIZE] as usize;
            let rows = BIN_SIZE.min(n - b * BIN_SIZE);
            for lane in 0..rows {
                let i = b * BIN_SIZE + lane;
                let node = RowSubset::node(rs, i);
                let cells = nc.row(node as u32);
                list.clear();
                for &c in cells {
                    for &j in &table[c as usize * m..(c as usize + 1) * m] {
                        if j as usize != node && marks[j as usize] == 0 {
                            marks[j as usize] = 1;
                            list.push(j);
                        }
                    }
                }
                if list.len() != lengths[i] as usize {
                    for &j in &list {
                        marks[j as usize] = 0;
                    }
                    return Err(FemError::PatternMismatch {
                        row: i,
                        expected: lengths[i] + 1,
                        found: list.len() as u32 + 1,
                    });
                }
                // columns in the subset's numbering (the identity without one)
                if let Some(rs) = rs {
                    for j in list.iter_mut() {
                        *j = rs.column[*j as usize];
                    }
                }
                list.sort_unstable();
                for (k, &j) in list.iter().enumerate() {
                    cols[k * BIN_SIZE + lane] = j;
                    let jn = rs.map_or(j, |r| r.node_of_column[j as usize]);
                    marks[jn as usize] = k as u32 + 1;
                }
                if positions {
                    let r0 = row_start[i] as usize - base;
                    for (k, &c) in cells.iter().enumerate() {
                        let nodes = &table[c as usize * m..(c as usize + 1) * m];
                        let dst = &mut rp[(r0 + k) * m..(r0 + k + 1) * m];
                        let mut a = usize::MAX;
                        for (bl, &j) in nodes.iter().enumerate() {
                            if j as usize == node {
                                a = bl;
                                dst[bl] = DIAG;
                            } else {
                                dst[bl] = (marks[j as usize] - 1) as u16;
                            }
                        }
                        if a == usize::MAX {
                            for &j in &list {
                                marks[rs.map_or(j, |r| r.node_of_column[j as usize]) as usize] = 0;
                            }
                            return Err(FemError::PatternMismatch {
                                row: i,
                                expected: 0,
                                found: 0,
                            });
                        }
                        lp[r0 + k] = a as u8;
                    }
                }
                for &j in &list {
                    marks[rs.map_or(j, |r| r.node_of_column[j as usize]) as usize] = 0;
                }
            }
            Ok(())
        })
    };
    let work: Vec<_> = bins
        .into_iter()
        .zip(loc_pieces.into_iter().zip(rank_pieces))
        .collect();
    let results: Vec<Result<(), FemError>> = if par.is_parallel() {
        work.into_par_iter().map(fill_bin).collect()
    } else {
        work.into_iter().map(fill_bin).collect()
    };
    // the marker arrays are as long as the node count: free them instead of leaving one
    // with every thread of the pool once the pattern is built (without waiting for busy
    // threads; an array freed between two bins of a later build is simply allocated again)
    if par.is_parallel() {
        rayon::spawn_broadcast(|_| MARKS.with(|m| *m.borrow_mut() = Vec::new()));
    }
    MARKS.with(|m| *m.borrow_mut() = Vec::new());
    *parts.entry("fill".into()).or_insert(0.0) += t_fill.elapsed().as_secs_f64() * 1e3;
    results.into_iter().collect::<Result<(), FemError>>()?;
    Ok(positions.then_some(PositionMap {
        m,
        row_start,
        local,
        rank,
    }))
}

/// Block non-zeros per row (diagonal included) by brute force: collect, sort and deduplicate
/// the nodes of all incident cells. An independent check of Eq. 4.6 ([`crate::count`]).
pub fn brute_force_counts(ho: &HoMesh, par: Par) -> Result<Vec<u32>, FemError> {
    let nc = ho.node_cells();
    let m = ho.nodes_per_cell();
    let row = |i: usize| -> u32 {
        let mut buf = vec![0u32; m];
        let mut all = Vec::new();
        for &c in nc.row(i as u32) {
            ho.cell_nodes(c as usize, &mut buf);
            all.extend_from_slice(&buf);
        }
        all.sort_unstable();
        all.dedup();
        all.len() as u32
    };
    let n = ho.num_nodes();
    Ok(if par.is_parallel() {
        (0..n).into_par_iter().with_min_len(1024).map(row).collect()
    } else {
        (0..n).map(row).collect()
    })
}
