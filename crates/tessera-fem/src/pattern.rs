//! The exact Bin-BCSR* sparsity pattern of an order-`p` simplex mesh (dissertation §4.4.3).
//!
//! 1. **Column counts** per node from coboundary counts alone (Eq. 4.6, [`crate::count`]);
//!    the count includes the node itself, whose block lives in the separate diagonal.
//! 2. **Bin sizes**: the maximum off-diagonal count per bin of 32 rows (on the GPU a warp
//!    shuffle reduction), **scanned into bin offsets**.
//! 3. **Exact allocation** of the column array: the only entries beyond the exact count are
//!    bin padding ([`BinBcsrPattern::padding_blocks`]).
//! 4. **Column indices by sorted insertion**: for each node, every node of every incident cell
//!    (node -> cells maps, [`HoMesh::node_cells`]) is inserted into a sorted list by binary search
//!    and shifting, skipping the diagonal. As on the GPU, the first [`LOCAL_SLOTS`] = 63 columns
//!    live in a small local buffer (shared memory there); when a 64th column arrives the list is
//!    moved into the matrix and further insertions happen in place (global memory there).
//!
//! Each bin is filled by one task, rows in lane order, so `Par::Seq` and `Par::Rayon` give
//! identical patterns. A row whose insertions do not end at the Eq. 4.6 count is reported as
//! [`FemError::PatternMismatch`] (a corrupt or non-conforming mesh), never written out of bounds.

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
    let counts = time(stages, "count_contributions", || {
        crate::count::row_counts(ho, par)
    });
    let n = counts.len();
    let lengths: Vec<u32> = counts.iter().map(|&c| c.saturating_sub(1)).collect();
    let offsets = time(stages, "bin_offsets", || {
        bin_offsets_from_lengths(&lengths, par)
    })?;
    let mut pat = time(stages, "alloc_final", || {
        BinBcsrPattern::with_bin_offsets(e, lengths, offsets)
    })?;
    time(stages, "column_indices", || fill_columns(ho, &mut pat, par))?;
    debug_assert_eq!(pat.num_block_rows(), n);
    Ok(pat)
}

/// Fill the column indices of an allocated pattern by sorted insertion (step 4 above).
pub fn fill_columns(ho: &HoMesh, pat: &mut BinBcsrPattern, par: Par) -> Result<(), FemError> {
    let n = pat.num_block_rows();
    let lengths = pat.row_lengths().to_vec();
    let nc = ho.node_cells();
    let m = ho.nodes_per_cell();
    let fill_bin = |(b, cols): (usize, &mut [u32])| -> Result<(), FemError> {
        let mut cell_nodes = vec![0u32; m];
        let mut local = [0u32; LOCAL_SLOTS];
        let rows = BIN_SIZE.min(n - b * BIN_SIZE);
        for lane in 0..rows {
            let i = b * BIN_SIZE + lane;
            let expected = lengths[i];
            let mut len = 0usize;
            let mut in_global = false;
            for &c in nc.row(i as u32) {
                ho.cell_nodes(c as usize, &mut cell_nodes);
                for &j in &cell_nodes {
                    if j as usize == i {
                        continue;
                    }
                    if !in_global {
                        let pos = match local[..len].binary_search(&j) {
                            Ok(_) => continue,
                            Err(p) => p,
                        };
                        if len < LOCAL_SLOTS {
                            local.copy_within(pos..len, pos + 1);
                            local[pos] = j;
                            len += 1;
                            continue;
                        }
                        // 64th column: move the list into the matrix, continue in place
                        if len >= expected as usize {
                            return Err(FemError::PatternMismatch {
                                row: i,
                                expected: expected + 1,
                                found: len as u32 + 2,
                            });
                        }
                        for (k, &v) in local[..len].iter().enumerate() {
                            cols[k * BIN_SIZE + lane] = v;
                        }
                        in_global = true;
                    }
                    // sorted insertion in place (strided by the bin size)
                    let (mut lo, mut hi) = (0usize, len);
                    let mut found = false;
                    while lo < hi {
                        let mid = (lo + hi) / 2;
                        let v = cols[mid * BIN_SIZE + lane];
                        if v < j {
                            lo = mid + 1;
                        } else if v > j {
                            hi = mid;
                        } else {
                            found = true;
                            break;
                        }
                    }
                    if found {
                        continue;
                    }
                    if len >= expected as usize {
                        return Err(FemError::PatternMismatch {
                            row: i,
                            expected: expected + 1,
                            found: len as u32 + 2,
                        });
                    }
                    let mut k = len;
                    while k > lo {
                        cols[k * BIN_SIZE + lane] = cols[(k - 1) * BIN_SIZE + lane];
                        k -= 1;
                    }
                    cols[lo * BIN_SIZE + lane] = j;
                    len += 1;
                }
            }
            if len != expected as usize {
                return Err(FemError::PatternMismatch {
                    row: i,
                    expected: expected + 1,
                    found: len as u32 + 1,
                });
            }
            if !in_global {
                if len > expected as usize {
                    return Err(FemError::PatternMismatch {
                        row: i,
                        expected: expected + 1,
                        found: len as u32 + 1,
                    });
                }
                for (k, &v) in local[..len].iter().enumerate() {
                    cols[k * BIN_SIZE + lane] = v;
                }
            }
        }
        Ok(())
    };
    let bins = pat.bins_mut();
    let results: Vec<Result<(), FemError>> = if par.is_parallel() {
        bins.into_par_iter().map(fill_bin).collect()
    } else {
        bins.into_iter().map(fill_bin).collect()
    };
    results.into_iter().collect()
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
