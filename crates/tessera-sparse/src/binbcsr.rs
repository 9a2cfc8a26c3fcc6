//! Bin-BCSR*: the GPU-optimized block sparse format used for FEM assembly (dissertation
//! §4.4.2, Fig. 4.6; an improved version of Weber et al.'s Bin-BCSR).
//!
//! The matrix `K ∈ R^{ne × ne}` is viewed as a sparse fourth-order tensor `K_ijkl` with dense
//! `e × e` blocks (dissertation §4.3, Eq. 4.1). Bin-BCSR* stores it as follows:
//!
//! - **Bins of 32 block rows** ([`BIN_SIZE`], one warp; Listing 4.1 schedules one warp per bin).
//! - **Column indices per node** (`j`-indices of `K_ijkl`, not scalar columns), one per block,
//!   sorted ascending within a row, stored **padded column-major per bin**: bin `b` owns the slots
//!   `bin_offsets[b] .. bin_offsets[b + 1]`, which is `32 * width_b` slots, where `width_b` is the
//!   maximum off-diagonal row length in the bin; the `k`-th column of lane (row) `r` of the bin is
//!   slot `bin_offsets[b] + 32 k + r`. Unused slots hold [`PAD`].
//! - **Per-row lengths** (`row_lengths[i]`: off-diagonal blocks of block row `i`).
//! - **Values block-component-major**: within bin `b`, all `K_ij00` entries of the bin's slots
//!   (padded column-major as above), then all `K_ij01` entries, and so on. The value of
//!   component `c = k e + l` for slot `s` of bin `b` is at
//!   `values[e² bin_offsets[b] + c · 32 width_b + (s - bin_offsets[b])]`.
//! - **A separate dense block diagonal**: `diag[e² i + k e + l] = K_iikl`; the diagonal blocks are
//!   never stored among the off-diagonal slots.
//!
//! The last bin is padded to 32 lanes like all others (rows past `n` have length 0), so the GPU
//! index arithmetic has no special case; this padding is included in [`BinBcsrPattern::padding_blocks`].
//!
//! The pattern ([`BinBcsrPattern`]) and the values ([`BinBcsr`]) are separate types: a pattern is
//! computed once and values are refilled many times (DESIGN.md, principle 2).

use rayon::prelude::*;
use std::fmt::Debug;
use std::ops::{Add, AddAssign, Mul, Sub};
use std::sync::Arc;
use tessera_core::Par;

/// Rows per bin: the warp size (dissertation §4.4.2, modification 3).
pub const BIN_SIZE: usize = 32;

/// Column index stored in padding slots.
pub const PAD: u32 = u32::MAX;

/// Floating-point scalar of a sparse matrix: `f32` or `f64`.
pub trait Scalar:
    Copy
    + Send
    + Sync
    + Default
    + PartialEq
    + PartialOrd
    + Debug
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + AddAssign
    + 'static
{
    /// Additive identity.
    const ZERO: Self;
    /// Name as on the command line (`f32`, `f64`).
    const NAME: &'static str;
    /// Conversion from `f64` (rounding to nearest for `f32`).
    fn from_f64(v: f64) -> Self;
    /// Conversion to `f64` (exact).
    fn to_f64(self) -> f64;
}

impl Scalar for f32 {
    const ZERO: Self = 0.0;
    const NAME: &'static str = "f32";
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Scalar for f64 {
    const ZERO: Self = 0.0;
    const NAME: &'static str = "f64";
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
}

/// Errors of Bin-BCSR* construction and use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BinBcsrError {
    #[error("block dimension e = {0} is not in 1..=3")]
    BlockDim(usize),
    #[error("more than 2^32 - 1 slots")]
    TooManySlots,
    #[error("row {row}: column {col} out of range (there are {n} block columns)")]
    ColumnOutOfRange { row: usize, col: u32, n: usize },
    #[error("row {row}: columns are not strictly ascending or contain the diagonal")]
    RowNotSorted { row: usize },
    #[error("row {row}: {found} columns, but the row length is {expected}")]
    RowLength {
        row: usize,
        expected: u32,
        found: u32,
    },
    #[error("vector length {found}, expected {expected}")]
    VectorLength { expected: usize, found: usize },
    #[error("value array length {found}, expected {expected}")]
    ValueLength { expected: usize, found: usize },
}

/// Number of bins for `n` rows.
#[inline]
pub fn num_bins(n: usize) -> usize {
    n.div_ceil(BIN_SIZE)
}

/// The structure of a Bin-BCSR* matrix (dissertation §4.4.2, §4.4.3): bin offsets, per-row
/// lengths and padded column-major node column indices. The diagonal blocks are implicit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinBcsrPattern {
    n: usize,
    e: usize,
    bin_offsets: Vec<u32>,
    row_lengths: Vec<u32>,
    col_indices: Vec<u32>,
}

impl BinBcsrPattern {
    /// Allocate a pattern for `row_lengths.len()` block rows with the given off-diagonal row
    /// lengths: per-bin maxima, scan into bin offsets, exact allocation of the column array
    /// (dissertation §4.4.3). All column slots start as [`PAD`]; fill them with
    /// [`Self::bins_mut`] or [`Self::row_cols_mut`].
    pub fn with_row_lengths(
        e: usize,
        row_lengths: Vec<u32>,
        par: Par,
    ) -> Result<Self, BinBcsrError> {
        if !(1..=3).contains(&e) {
            return Err(BinBcsrError::BlockDim(e));
        }
        let bin_offsets = bin_offsets_from_lengths(&row_lengths, par)?;
        let total = *bin_offsets.last().unwrap_or(&0) as usize;
        let col_indices = vec![PAD; total];
        Ok(Self {
            n: row_lengths.len(),
            e,
            bin_offsets,
            row_lengths,
            col_indices,
        })
    }

    /// Allocate with precomputed bin offsets (from [`bin_offsets_from_lengths`]); checks
    /// that every bin is wide enough for its rows.
    pub fn with_bin_offsets(
        e: usize,
        row_lengths: Vec<u32>,
        bin_offsets: Vec<u32>,
    ) -> Result<Self, BinBcsrError> {
        Self::with_bin_offsets_par(e, row_lengths, bin_offsets, Par::Seq)
    }

    /// [`Self::with_bin_offsets`], the column array filled with [`PAD`] by `par`
    /// ([`tessera_core::bulk::filled`]: huge pages, first touch spread over the pool).
    pub fn with_bin_offsets_par(
        e: usize,
        row_lengths: Vec<u32>,
        bin_offsets: Vec<u32>,
        par: Par,
    ) -> Result<Self, BinBcsrError> {
        if !(1..=3).contains(&e) {
            return Err(BinBcsrError::BlockDim(e));
        }
        if bin_offsets.len() != num_bins(row_lengths.len()) + 1 || bin_offsets.first() != Some(&0) {
            return Err(BinBcsrError::ValueLength {
                expected: num_bins(row_lengths.len()) + 1,
                found: bin_offsets.len(),
            });
        }
        for (b, w) in bin_offsets.windows(2).enumerate() {
            let width = w[1].checked_sub(w[0]).ok_or(BinBcsrError::TooManySlots)? as usize;
            let rows = &row_lengths[b * BIN_SIZE..((b + 1) * BIN_SIZE).min(row_lengths.len())];
            if let Some((r, &len)) = rows
                .iter()
                .enumerate()
                .find(|(_, &l)| l as usize * BIN_SIZE > width)
            {
                return Err(BinBcsrError::RowLength {
                    row: b * BIN_SIZE + r,
                    expected: (width / BIN_SIZE) as u32,
                    found: len,
                });
            }
        }
        let total = *bin_offsets.last().unwrap() as usize;
        Ok(Self {
            n: row_lengths.len(),
            e,
            bin_offsets,
            row_lengths,
            col_indices: tessera_core::bulk::filled(total, PAD, par),
        })
    }

    /// Build from explicit sorted off-diagonal columns per row (a convenience for tests and
    /// conversions; FEM assembly uses [`Self::with_row_lengths`] and fills in place).
    pub fn from_rows(e: usize, rows: &[Vec<u32>]) -> Result<Self, BinBcsrError> {
        let lens = rows.iter().map(|r| r.len() as u32).collect();
        let mut p = Self::with_row_lengths(e, lens, Par::Seq)?;
        for (i, r) in rows.iter().enumerate() {
            for (k, &c) in r.iter().enumerate() {
                let s = p.slot(i, k);
                p.col_indices[s] = c;
            }
        }
        p.validate()?;
        Ok(p)
    }

    /// Check that every row's columns are in range, strictly ascending, exclude the diagonal,
    /// and that padding slots hold [`PAD`].
    pub fn validate(&self) -> Result<(), BinBcsrError> {
        for i in 0..self.n {
            let len = self.row_lengths[i] as usize;
            let mut prev: Option<u32> = None;
            for k in 0..self.bin_width(i / BIN_SIZE) {
                let c = self.col_indices[self.slot(i, k)];
                if k >= len {
                    if c != PAD {
                        return Err(BinBcsrError::RowLength {
                            row: i,
                            expected: len as u32,
                            found: k as u32 + 1,
                        });
                    }
                    continue;
                }
                if c == PAD {
                    return Err(BinBcsrError::RowLength {
                        row: i,
                        expected: len as u32,
                        found: k as u32,
                    });
                }
                if c as usize >= self.n {
                    return Err(BinBcsrError::ColumnOutOfRange {
                        row: i,
                        col: c,
                        n: self.n,
                    });
                }
                if c as usize == i || prev.is_some_and(|p| p >= c) {
                    return Err(BinBcsrError::RowNotSorted { row: i });
                }
                prev = Some(c);
            }
        }
        Ok(())
    }

    /// Number of block rows (= block columns = nodes).
    pub fn num_block_rows(&self) -> usize {
        self.n
    }
    /// Block dimension `e` (the DOF dimension).
    pub fn block_dim(&self) -> usize {
        self.e
    }
    /// Number of scalar rows `n e`.
    pub fn num_rows(&self) -> usize {
        self.n * self.e
    }
    /// Number of bins.
    pub fn num_bins(&self) -> usize {
        self.bin_offsets.len() - 1
    }
    /// Bin offsets in slots (length `num_bins + 1`).
    pub fn bin_offsets(&self) -> &[u32] {
        &self.bin_offsets
    }
    /// Off-diagonal blocks per block row.
    pub fn row_lengths(&self) -> &[u32] {
        &self.row_lengths
    }
    /// The padded column-major column array.
    pub fn col_indices(&self) -> &[u32] {
        &self.col_indices
    }
    /// Width (maximum off-diagonal row length) of bin `b`.
    #[inline]
    pub fn bin_width(&self, b: usize) -> usize {
        (self.bin_offsets[b + 1] - self.bin_offsets[b]) as usize / BIN_SIZE
    }
    /// Slot of the `k`-th off-diagonal block of block row `i` (no range check on `k`).
    #[inline(always)]
    pub fn slot(&self, i: usize, k: usize) -> usize {
        self.bin_offsets[i / BIN_SIZE] as usize + k * BIN_SIZE + (i % BIN_SIZE)
    }
    /// Total number of off-diagonal slots (stored blocks including padding).
    pub fn num_slots(&self) -> usize {
        self.col_indices.len()
    }
    /// Exact number of stored non-zero blocks: off-diagonal blocks plus the `n` diagonal blocks.
    pub fn block_nonzeros(&self) -> u64 {
        self.row_lengths.iter().map(|&l| l as u64).sum::<u64>() + self.n as u64
    }
    /// Off-diagonal slots that hold no block (bin padding, including the lanes past `n` of
    /// the last bin).
    pub fn padding_blocks(&self) -> u64 {
        self.num_slots() as u64 - self.row_lengths.iter().map(|&l| l as u64).sum::<u64>()
    }
    /// Bytes of the pattern arrays (column indices, bin offsets, row lengths).
    pub fn bytes_allocated(&self) -> usize {
        4 * (self.col_indices.len() + self.bin_offsets.len() + self.row_lengths.len())
    }
    /// The sorted off-diagonal columns of block row `i` (strided, collected).
    pub fn row_cols(&self, i: usize) -> impl Iterator<Item = u32> + '_ {
        (0..self.row_lengths[i] as usize).map(move |k| self.col_indices[self.slot(i, k)])
    }
    /// Slot of block `(i, j)`, `j != i`, by binary search over the row's sorted columns.
    #[inline]
    pub fn find(&self, i: usize, j: u32) -> Option<usize> {
        let base = self.bin_offsets[i / BIN_SIZE] as usize + (i % BIN_SIZE);
        let (mut lo, mut hi) = (0usize, self.row_lengths[i] as usize);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let c = self.col_indices[base + mid * BIN_SIZE];
            if c < j {
                lo = mid + 1;
            } else if c > j {
                hi = mid;
            } else {
                return Some(base + mid * BIN_SIZE);
            }
        }
        None
    }
    /// Mutable column slots per bin: `(bin index, the bin's slots)`, for filling bins in
    /// parallel (each bin is written by one task).
    pub fn bins_mut(&mut self) -> Vec<(usize, &mut [u32])> {
        split_by_offsets(&mut self.col_indices, &self.bin_offsets, 1)
            .into_iter()
            .enumerate()
            .collect()
    }
    /// Set the `k`-th off-diagonal column of row `i` (sequential filling).
    pub fn set_col(&mut self, i: usize, k: usize, col: u32) {
        let s = self.slot(i, k);
        self.col_indices[s] = col;
    }
}

/// Per-bin maxima of `row_lengths`, times [`BIN_SIZE`], scanned into bin offsets
/// (dissertation §4.4.3).
pub fn bin_offsets_from_lengths(row_lengths: &[u32], par: Par) -> Result<Vec<u32>, BinBcsrError> {
    let maxima: Vec<u32> = if par.is_parallel() {
        row_lengths
            .par_chunks(BIN_SIZE)
            .map(|c| c.iter().copied().max().unwrap_or(0))
            .collect()
    } else {
        row_lengths
            .chunks(BIN_SIZE)
            .map(|c| c.iter().copied().max().unwrap_or(0))
            .collect()
    };
    let mut offsets = Vec::with_capacity(maxima.len() + 1);
    let mut acc = 0u64;
    offsets.push(0);
    for m in maxima {
        acc += m as u64 * BIN_SIZE as u64;
        if acc > u32::MAX as u64 {
            return Err(BinBcsrError::TooManySlots);
        }
        offsets.push(acc as u32);
    }
    Ok(offsets)
}

/// Split `data` into consecutive pieces `scale * (offsets[b] .. offsets[b + 1])`.
fn split_by_offsets<'a, T>(
    mut data: &'a mut [T],
    offsets: &[u32],
    scale: usize,
) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(offsets.len().saturating_sub(1));
    for w in offsets.windows(2) {
        let len = (w[1] - w[0]) as usize * scale;
        let (a, b) = std::mem::take(&mut data).split_at_mut(len);
        out.push(a);
        data = b;
    }
    out
}

/// A Bin-BCSR* matrix: a shared pattern, block-component-major padded values and a dense
/// block diagonal (dissertation §4.4.2).
#[derive(Clone, Debug)]
pub struct BinBcsr<T: Scalar> {
    pattern: Arc<BinBcsrPattern>,
    values: Vec<T>,
    diag: Vec<T>,
}

impl<T: Scalar> BinBcsr<T> {
    /// Zero values on `pattern` (exact allocation: `e²` scalars per slot and per diagonal block).
    pub fn zeros(pattern: Arc<BinBcsrPattern>) -> Self {
        let e2 = pattern.e * pattern.e;
        // zeroed pages are mapped lazily: the advice lets the first writes (the summation's,
        // spread over its threads) fault in huge pages instead of 4 KiB ones
        let mut values = vec![T::ZERO; pattern.num_slots() * e2];
        tessera_core::bulk::advise_huge_pages(&mut values);
        let mut diag = vec![T::ZERO; pattern.n * e2];
        tessera_core::bulk::advise_huge_pages(&mut diag);
        Self {
            pattern,
            values,
            diag,
        }
    }

    /// From raw arrays (lengths checked).
    pub fn from_parts(
        pattern: Arc<BinBcsrPattern>,
        values: Vec<T>,
        diag: Vec<T>,
    ) -> Result<Self, BinBcsrError> {
        let e2 = pattern.e * pattern.e;
        if values.len() != pattern.num_slots() * e2 {
            return Err(BinBcsrError::ValueLength {
                expected: pattern.num_slots() * e2,
                found: values.len(),
            });
        }
        if diag.len() != pattern.n * e2 {
            return Err(BinBcsrError::ValueLength {
                expected: pattern.n * e2,
                found: diag.len(),
            });
        }
        Ok(Self {
            pattern,
            values,
            diag,
        })
    }

    /// The pattern.
    pub fn pattern(&self) -> &BinBcsrPattern {
        &self.pattern
    }
    /// The shared pattern handle.
    pub fn pattern_arc(&self) -> &Arc<BinBcsrPattern> {
        &self.pattern
    }
    /// Off-diagonal values (block-component-major, padded column-major per bin).
    pub fn values(&self) -> &[T] {
        &self.values
    }
    /// The dense block diagonal, `e²` per block row, row-major blocks.
    pub fn diag(&self) -> &[T] {
        &self.diag
    }
    /// Mutable values and diagonal.
    pub fn values_diag_mut(&mut self) -> (&mut [T], &mut [T]) {
        (&mut self.values, &mut self.diag)
    }
    /// Mutable per-bin value pieces together with the block rows' diagonal blocks of that
    /// bin: `(bin, values of the bin, diagonal of the bin's rows)`. Lets each bin be summed by
    /// one task (dissertation §4.4.4).
    pub fn bins_mut(&mut self) -> Vec<(usize, &mut [T], &mut [T])> {
        let e2 = self.pattern.e * self.pattern.e;
        let vals = split_by_offsets(&mut self.values, &self.pattern.bin_offsets, e2);
        let diags: Vec<&mut [T]> = self.diag.chunks_mut(BIN_SIZE * e2).collect();
        vals.into_iter()
            .zip(diags)
            .enumerate()
            .map(|(b, (v, d))| (b, v, d))
            .collect()
    }

    /// Index into [`Self::values`] of component `(k, l)` of slot `s`.
    #[inline(always)]
    pub fn value_index(&self, s: usize, k: usize, l: usize) -> usize {
        value_index(&self.pattern, s, k, l)
    }

    /// Block `(i, j)` as a row-major `e × e` array (zeros if not stored).
    pub fn block(&self, i: usize, j: usize) -> [[f64; 3]; 3] {
        let e = self.pattern.e;
        let mut out = [[0.0; 3]; 3];
        if i == j {
            for k in 0..e {
                for l in 0..e {
                    out[k][l] = self.diag[i * e * e + k * e + l].to_f64();
                }
            }
        } else if let Some(s) = self.pattern.find(i, j as u32) {
            for (k, row) in out.iter_mut().enumerate().take(e) {
                for (l, v) in row.iter_mut().enumerate().take(e) {
                    *v = self.values[self.value_index(s, k, l)].to_f64();
                }
            }
        }
        out
    }

    /// Scalar entry `K[r][c]` (0 if not stored).
    pub fn get(&self, r: usize, c: usize) -> f64 {
        let e = self.pattern.e;
        self.block(r / e, c / e)[r % e][c % e]
    }

    /// Frobenius norm `‖K‖_F` (accumulated in `f64`).
    pub fn frobenius_norm(&self) -> f64 {
        let s: f64 = self
            .values
            .iter()
            .chain(self.diag.iter())
            .map(|v| v.to_f64() * v.to_f64())
            .sum();
        s.sqrt()
    }

    /// Bytes allocated: pattern plus values plus diagonal.
    pub fn bytes_allocated(&self) -> usize {
        self.pattern.bytes_allocated()
            + (self.values.len() + self.diag.len()) * std::mem::size_of::<T>()
    }

    /// Padding blocks (see [`BinBcsrPattern::padding_blocks`]).
    pub fn padding_blocks(&self) -> u64 {
        self.pattern.padding_blocks()
    }

    /// `y = K x` on the CPU, one bin per task, rows in lane order (dissertation §4.4.2;
    /// the CPU counterpart of the warp-per-bin schedule of Listing 4.1). `Par::Seq` and
    /// `Par::Rayon` give bit-identical results: each row is summed in the same order.
    pub fn spmv(&self, par: Par, x: &[T], y: &mut [T]) -> Result<(), BinBcsrError> {
        let p = &*self.pattern;
        let ne = p.n * p.e;
        if x.len() != ne {
            return Err(BinBcsrError::VectorLength {
                expected: ne,
                found: x.len(),
            });
        }
        if y.len() != ne {
            return Err(BinBcsrError::VectorLength {
                expected: ne,
                found: y.len(),
            });
        }
        let chunk = BIN_SIZE * p.e;
        let run = |(b, yb): (usize, &mut [T])| self.spmv_bin(b, x, yb);
        if par.is_parallel() {
            y.par_chunks_mut(chunk).enumerate().for_each(run);
        } else {
            y.chunks_mut(chunk).enumerate().for_each(run);
        }
        Ok(())
    }

    fn spmv_bin(&self, b: usize, x: &[T], yb: &mut [T]) {
        let p = &*self.pattern;
        let e = p.e;
        let e2 = e * e;
        let base = p.bin_offsets[b] as usize;
        let w32 = p.bin_offsets[b + 1] as usize - base;
        let vbase = base * e2;
        let rows = yb.len() / e;
        for lane in 0..rows {
            let i = b * BIN_SIZE + lane;
            let mut acc = [T::ZERO; 3];
            let d = &self.diag[i * e2..(i + 1) * e2];
            for k in 0..e {
                for l in 0..e {
                    acc[k] += d[k * e + l] * x[i * e + l];
                }
            }
            for kk in 0..p.row_lengths[i] as usize {
                let s = kk * BIN_SIZE + lane;
                let j = p.col_indices[base + s] as usize;
                for k in 0..e {
                    for l in 0..e {
                        acc[k] += self.values[vbase + (k * e + l) * w32 + s] * x[j * e + l];
                    }
                }
            }
            yb[lane * e..(lane + 1) * e].copy_from_slice(&acc[..e]);
        }
    }

    /// Conversion to scalar CSR: explicit diagonal blocks, all `e × e` entries of every stored
    /// block (structural zeros kept), columns sorted.
    pub fn to_csr(&self) -> Csr<T> {
        let p = &*self.pattern;
        let e = p.e;
        let mut row_ptr = Vec::with_capacity(p.n * e + 1);
        let nnz = p.block_nonzeros() as usize * e * e;
        let mut col_idx = Vec::with_capacity(nnz);
        let mut values = Vec::with_capacity(nnz);
        row_ptr.push(0u64);
        let mut cols: Vec<u32> = Vec::new();
        for i in 0..p.n {
            cols.clear();
            cols.extend(p.row_cols(i));
            let pos = cols.partition_point(|&c| (c as usize) < i);
            cols.insert(pos, i as u32);
            for k in 0..e {
                for &j in &cols {
                    let j = j as usize;
                    for l in 0..e {
                        col_idx.push((j * e + l) as u32);
                        values.push(self.block_entry(i, j, k, l));
                    }
                }
                row_ptr.push(col_idx.len() as u64);
            }
        }
        Csr {
            nrows: p.n * e,
            ncols: p.n * e,
            row_ptr,
            col_idx,
            values,
        }
    }

    /// Conversion to BSR with `e × e` row-major blocks, diagonal block included, columns sorted.
    pub fn to_bsr(&self) -> Bsr<T> {
        let p = &*self.pattern;
        let e = p.e;
        let mut row_ptr = Vec::with_capacity(p.n + 1);
        let mut col_idx = Vec::with_capacity(p.block_nonzeros() as usize);
        let mut values = Vec::with_capacity(p.block_nonzeros() as usize * e * e);
        row_ptr.push(0u64);
        let mut cols: Vec<u32> = Vec::new();
        for i in 0..p.n {
            cols.clear();
            cols.extend(p.row_cols(i));
            let pos = cols.partition_point(|&c| (c as usize) < i);
            cols.insert(pos, i as u32);
            for &j in &cols {
                col_idx.push(j);
                for k in 0..e {
                    for l in 0..e {
                        values.push(self.block_entry(i, j as usize, k, l));
                    }
                }
            }
            row_ptr.push(col_idx.len() as u64);
        }
        Bsr {
            nb_rows: p.n,
            nb_cols: p.n,
            block_dim: e,
            row_ptr,
            col_idx,
            values,
        }
    }

    #[inline]
    fn block_entry(&self, i: usize, j: usize, k: usize, l: usize) -> T {
        let e = self.pattern.e;
        if i == j {
            self.diag[i * e * e + k * e + l]
        } else {
            let s = self
                .pattern
                .find(i, j as u32)
                .expect("column from the pattern");
            self.values[self.value_index(s, k, l)]
        }
    }

    /// Convert the scalar type (for example `f64` -> `f32`), sharing the pattern.
    pub fn cast<U: Scalar>(&self) -> BinBcsr<U> {
        BinBcsr {
            pattern: self.pattern.clone(),
            values: self
                .values
                .iter()
                .map(|v| U::from_f64(v.to_f64()))
                .collect(),
            diag: self.diag.iter().map(|v| U::from_f64(v.to_f64())).collect(),
        }
    }
}

/// Index into a Bin-BCSR* value array of component `(k, l)` of slot `s` (see the module docs).
#[inline(always)]
pub fn value_index(p: &BinBcsrPattern, s: usize, k: usize, l: usize) -> usize {
    let b = bin_of_slot(p, s);
    let base = p.bin_offsets[b] as usize;
    let w32 = p.bin_offsets[b + 1] as usize - base;
    base * p.e * p.e + (k * p.e + l) * w32 + (s - base)
}

/// Bin containing slot `s` (binary search over bin offsets).
#[inline]
pub fn bin_of_slot(p: &BinBcsrPattern, s: usize) -> usize {
    // the last b with bin_offsets[b] <= s among non-empty bins
    p.bin_offsets.partition_point(|&o| o as usize <= s) - 1
}

/// Compressed sparse row matrix with 64-bit row pointers.
#[derive(Clone, Debug, PartialEq)]
pub struct Csr<T> {
    pub nrows: usize,
    pub ncols: usize,
    pub row_ptr: Vec<u64>,
    pub col_idx: Vec<u32>,
    pub values: Vec<T>,
}

impl<T: Scalar> Csr<T> {
    /// `y = A x`, rows summed in column order (`Par::Seq` == `Par::Rayon`).
    pub fn spmv(&self, par: Par, x: &[T], y: &mut [T]) -> Result<(), BinBcsrError> {
        if x.len() != self.ncols {
            return Err(BinBcsrError::VectorLength {
                expected: self.ncols,
                found: x.len(),
            });
        }
        if y.len() != self.nrows {
            return Err(BinBcsrError::VectorLength {
                expected: self.nrows,
                found: y.len(),
            });
        }
        let row = |(r, yr): (usize, &mut T)| {
            let mut acc = T::ZERO;
            for k in self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize {
                acc += self.values[k] * x[self.col_idx[k] as usize];
            }
            *yr = acc;
        };
        if par.is_parallel() {
            y.par_iter_mut().enumerate().for_each(row);
        } else {
            y.iter_mut().enumerate().for_each(row);
        }
        Ok(())
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.col_idx.len()
    }
}

/// Block sparse row matrix with square `block_dim × block_dim` row-major blocks.
#[derive(Clone, Debug, PartialEq)]
pub struct Bsr<T> {
    pub nb_rows: usize,
    pub nb_cols: usize,
    pub block_dim: usize,
    pub row_ptr: Vec<u64>,
    pub col_idx: Vec<u32>,
    pub values: Vec<T>,
}

impl<T: Scalar> Bsr<T> {
    /// `y = A x` (`Par::Seq` == `Par::Rayon`).
    pub fn spmv(&self, par: Par, x: &[T], y: &mut [T]) -> Result<(), BinBcsrError> {
        let e = self.block_dim;
        if x.len() != self.nb_cols * e {
            return Err(BinBcsrError::VectorLength {
                expected: self.nb_cols * e,
                found: x.len(),
            });
        }
        if y.len() != self.nb_rows * e {
            return Err(BinBcsrError::VectorLength {
                expected: self.nb_rows * e,
                found: y.len(),
            });
        }
        let row = |(i, yi): (usize, &mut [T])| {
            let mut acc = [T::ZERO; 8];
            for b in self.row_ptr[i] as usize..self.row_ptr[i + 1] as usize {
                let j = self.col_idx[b] as usize;
                for k in 0..e {
                    for l in 0..e {
                        acc[k] += self.values[b * e * e + k * e + l] * x[j * e + l];
                    }
                }
            }
            yi.copy_from_slice(&acc[..e]);
        };
        if par.is_parallel() {
            y.par_chunks_mut(e).enumerate().for_each(row);
        } else {
            y.chunks_mut(e).enumerate().for_each(row);
        }
        Ok(())
    }
    /// Number of stored blocks.
    pub fn num_blocks(&self) -> usize {
        self.col_idx.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random generator (LCG) for tests.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
        fn f(&mut self) -> f64 {
            (self.next() % 2001) as f64 / 1000.0 - 1.0
        }
    }

    /// Random rows with uneven lengths for `n` nodes.
    fn random_rows(n: usize, seed: u64) -> Vec<Vec<u32>> {
        let mut g = Lcg(seed);
        (0..n)
            .map(|i| {
                let len = (g.next() % 12) as usize + if i % 37 == 0 { 40 } else { 0 };
                let mut r: Vec<u32> = (0..len)
                    .map(|_| (g.next() % n as u64) as u32)
                    .filter(|&c| c as usize != i)
                    .collect();
                r.sort_unstable();
                r.dedup();
                r
            })
            .collect()
    }

    fn random_matrix(
        n: usize,
        e: usize,
        seed: u64,
    ) -> (Vec<Vec<u32>>, BinBcsr<f64>, Vec<Vec<f64>>) {
        let rows = random_rows(n, seed);
        let p = Arc::new(BinBcsrPattern::from_rows(e, &rows).unwrap());
        let mut m = BinBcsr::<f64>::zeros(p.clone());
        let mut dense = vec![vec![0.0; n * e]; n * e];
        let mut g = Lcg(seed ^ 0xabc);
        for i in 0..n {
            for k in 0..e {
                for l in 0..e {
                    let v = g.f();
                    m.diag[i * e * e + k * e + l] = v;
                    dense[i * e + k][i * e + l] = v;
                }
            }
            for &j in &rows[i] {
                let s = p.find(i, j).unwrap();
                for k in 0..e {
                    for l in 0..e {
                        let v = g.f();
                        let idx = m.value_index(s, k, l);
                        m.values[idx] = v;
                        dense[i * e + k][j as usize * e + l] = v;
                    }
                }
            }
        }
        (rows, m, dense)
    }

    #[test]
    fn layout_of_a_hand_checked_pattern() {
        // 3 rows, e = 2: row 0 -> {2}, row 1 -> {0, 2}, row 2 -> {}
        let p = BinBcsrPattern::from_rows(2, &[vec![2], vec![0, 2], vec![]]).unwrap();
        assert_eq!(p.bin_offsets(), &[0, 64]);
        assert_eq!(p.col_indices()[0], 2); // row 0, k = 0
        assert_eq!(p.col_indices()[1], 0); // row 1, k = 0
        assert_eq!(p.col_indices()[2], PAD); // row 2 empty
        assert_eq!(p.col_indices()[32], PAD); // row 0, k = 1
        assert_eq!(p.col_indices()[33], 2); // row 1, k = 1
        assert_eq!(p.block_nonzeros(), 3 + 3);
        assert_eq!(p.padding_blocks(), 64 - 3);
        assert_eq!(p.find(1, 2), Some(33));
        assert_eq!(p.find(1, 1), None);
        // value of component (k, l) = (1, 0) of slot 33 in a one-bin matrix of width 2:
        // e² * 0 + (1 * 2 + 0) * 64 + 33
        assert_eq!(value_index(&p, 33, 1, 0), 2 * 64 + 33);
    }

    #[test]
    fn invalid_patterns_are_rejected() {
        assert_eq!(
            BinBcsrPattern::from_rows(2, &[vec![0]]).unwrap_err(),
            BinBcsrError::RowNotSorted { row: 0 }
        );
        assert_eq!(
            BinBcsrPattern::from_rows(2, &[vec![3]]).unwrap_err(),
            BinBcsrError::ColumnOutOfRange {
                row: 0,
                col: 3,
                n: 1
            }
        );
        assert_eq!(
            BinBcsrPattern::from_rows(4, &[vec![]]).unwrap_err(),
            BinBcsrError::BlockDim(4)
        );
        assert!(BinBcsrPattern::from_rows(1, &[vec![1, 1], vec![]]).is_err());
    }

    #[test]
    fn spmv_matches_dense_and_conversions() {
        for e in 1..=3 {
            let n = 200; // several bins, uneven rows, a partial last bin
            let (_rows, m, dense) = random_matrix(n, e, 7 + e as u64);
            let mut g = Lcg(99);
            let x: Vec<f64> = (0..n * e).map(|_| g.f()).collect();
            let yref: Vec<f64> = dense
                .iter()
                .map(|r| r.iter().zip(&x).map(|(a, b)| a * b).sum())
                .collect();
            let mut ys = vec![0.0; n * e];
            let mut yr = vec![0.0; n * e];
            m.spmv(Par::Seq, &x, &mut ys).unwrap();
            m.spmv(Par::Rayon, &x, &mut yr).unwrap();
            assert_eq!(ys, yr, "Seq and Rayon must be identical");
            for (a, b) in ys.iter().zip(&yref) {
                assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{a} vs {b}");
            }
            let csr = m.to_csr();
            assert_eq!(
                csr.nnz() as u64,
                m.pattern().block_nonzeros() * (e * e) as u64
            );
            let bsr = m.to_bsr();
            assert_eq!(bsr.num_blocks() as u64, m.pattern().block_nonzeros());
            let mut yc = vec![0.0; n * e];
            let mut yb = vec![0.0; n * e];
            csr.spmv(Par::Rayon, &x, &mut yc).unwrap();
            bsr.spmv(Par::Seq, &x, &mut yb).unwrap();
            for i in 0..n * e {
                assert!((yc[i] - yref[i]).abs() <= 1e-12 * (1.0 + yref[i].abs()));
                assert!((yb[i] - yref[i]).abs() <= 1e-12 * (1.0 + yref[i].abs()));
            }
            // dense entries through CSR
            for r in 0..n * e {
                for k in csr.row_ptr[r] as usize..csr.row_ptr[r + 1] as usize {
                    assert_eq!(csr.values[k], dense[r][csr.col_idx[k] as usize]);
                }
                for (c, v) in dense[r].iter().enumerate() {
                    assert_eq!(m.get(r, c), *v);
                }
            }
            // f32 conversion
            let m32 = m.cast::<f32>();
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let mut y32 = vec![0f32; n * e];
            m32.spmv(Par::Rayon, &x32, &mut y32).unwrap();
            for i in 0..n * e {
                assert!((y32[i] as f64 - yref[i]).abs() <= 1e-4 * (1.0 + yref[i].abs()));
            }
            assert!(m32.bytes_allocated() < m.bytes_allocated());
        }
    }

    #[test]
    fn exact_allocation_plus_padding() {
        let (rows, m, _) = random_matrix(100, 3, 3);
        let p = m.pattern();
        let off: u64 = rows.iter().map(|r| r.len() as u64).sum();
        assert_eq!(p.block_nonzeros(), off + 100);
        let widths: u64 = rows
            .chunks(32)
            .map(|c| c.iter().map(|r| r.len()).max().unwrap() as u64 * 32)
            .sum();
        assert_eq!(p.num_slots() as u64, widths);
        assert_eq!(
            p.num_slots() as u64 + 100,
            p.block_nonzeros() + p.padding_blocks()
        );
        assert_eq!(m.values().len(), p.num_slots() * 9);
        assert_eq!(m.diag().len(), 100 * 9);
        assert_eq!(
            m.bytes_allocated(),
            p.bytes_allocated() + (p.num_slots() + 100) * 9 * 8
        );
    }

    #[test]
    fn bad_vector_lengths_are_errors() {
        let (_, m, _) = random_matrix(10, 2, 1);
        let mut y = vec![0.0; 20];
        assert!(m.spmv(Par::Seq, &[0.0; 3], &mut y).is_err());
    }
}
