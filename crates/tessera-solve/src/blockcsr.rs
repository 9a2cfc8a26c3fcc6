//! Block CSR with `3 × 3` blocks: the prolongators, restrictions and coarse-level operators
//! of the multigrid hierarchy ([`crate::amg`]), and the filtered fine operator they are
//! built from.
//!
//! Rows and columns are node blocks (3 DOFs, node-major). Columns are sorted ascending in
//! every row; square matrices store their diagonal block in its sorted place. Values are
//! `9` doubles per block, row-major. Every product below sums in a fixed order (rows of the
//! left factor in column order, then rows of the right factor in column order), so results
//! do not depend on the thread count, and the CUDA kernels reproduce them.

use rayon::prelude::*;
use tessera_sparse::binbcsr::BinBcsr;

use crate::error::SolveError;
use crate::operator::BlockOperator;

/// Values per block.
pub const B2: usize = 9;

/// A block CSR matrix of `3 × 3` blocks (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct BlockCsr {
    /// Block rows.
    pub nrows: usize,
    /// Block columns.
    pub ncols: usize,
    /// `nrows + 1` offsets into `cols`.
    pub row_ptr: Vec<u32>,
    /// Block column of every stored block, ascending within a row.
    pub cols: Vec<u32>,
    /// `9` values per stored block, row-major.
    pub vals: Vec<f64>,
}

/// `c += a · b` for row-major `3 × 3` blocks, each entry summed as `((c + a₀b₀) + a₁b₁) + a₂b₂`.
#[inline(always)]
pub fn block_mul_add(c: &mut [f64], a: &[f64], b: &[f64]) {
    for r in 0..3 {
        for q in 0..3 {
            let mut s = c[r * 3 + q];
            s += a[r * 3] * b[q];
            s += a[r * 3 + 1] * b[3 + q];
            s += a[r * 3 + 2] * b[6 + q];
            c[r * 3 + q] = s;
        }
    }
}

impl BlockCsr {
    /// An empty (all-zero) `nrows × ncols` matrix.
    pub fn zeros(nrows: usize, ncols: usize) -> Self {
        BlockCsr {
            nrows,
            ncols,
            row_ptr: vec![0; nrows + 1],
            cols: Vec::new(),
            vals: Vec::new(),
        }
    }

    /// Stored blocks.
    pub fn nnz(&self) -> usize {
        self.cols.len()
    }

    /// Block range of row `i`.
    #[inline]
    pub fn row_range(&self, i: usize) -> std::ops::Range<usize> {
        self.row_ptr[i] as usize..self.row_ptr[i + 1] as usize
    }

    /// Bytes of the arrays (row offsets, columns, values).
    pub fn bytes(&self) -> usize {
        4 * (self.row_ptr.len() + self.cols.len()) + 8 * self.vals.len()
    }

    /// Position of block `(i, j)` among the stored blocks.
    pub fn find(&self, i: usize, j: u32) -> Option<usize> {
        let r = self.row_range(i);
        self.cols[r.clone()]
            .binary_search(&j)
            .ok()
            .map(|k| r.start + k)
    }

    /// Check the structure: offsets, column range and order.
    pub fn validate(&self) -> Result<(), SolveError> {
        let bad = |m: String| SolveError::InvalidInput {
            what: "block CSR",
            message: m,
        };
        if self.row_ptr.len() != self.nrows + 1 || self.row_ptr[0] != 0 {
            return Err(bad("row offsets".into()));
        }
        if self.row_ptr[self.nrows] as usize != self.cols.len()
            || self.vals.len() != self.cols.len() * B2
        {
            return Err(bad("array lengths".into()));
        }
        for i in 0..self.nrows {
            if self.row_ptr[i] > self.row_ptr[i + 1] {
                return Err(bad(format!("row {i}: offsets decrease")));
            }
            let c = &self.cols[self.row_range(i)];
            if c.windows(2).any(|w| w[0] >= w[1]) || c.iter().any(|&j| j as usize >= self.ncols) {
                return Err(bad(format!(
                    "row {i}: columns not ascending or out of range"
                )));
            }
        }
        Ok(())
    }

    /// The filtered operator `Ā = S A S + (I − S)` of a Bin-BCSR* matrix with the constrained
    /// DOFs `fixed` (dissertation §4.4.2): constrained rows and columns of every block are
    /// zeroed and the constrained diagonal entries set to 1. This is the operator the
    /// filtered PCG iterates with; the multigrid hierarchy is built on it.
    pub fn from_binbcsr_filtered(a: &BinBcsr<f64>, fixed: &[bool]) -> Result<Self, SolveError> {
        let p = a.pattern();
        let n = p.num_block_rows();
        if p.block_dim() != 3 {
            return Err(SolveError::InvalidInput {
                what: "multigrid",
                message: format!(
                    "needs 3 × 3 node blocks (3D elasticity), not e = {}",
                    p.block_dim()
                ),
            });
        }
        if fixed.len() != 3 * n {
            return Err(SolveError::Dimension {
                expected: 3 * n,
                found: fixed.len(),
            });
        }
        let lens: Vec<u32> = (0..n).map(|i| p.row_lengths()[i] + 1).collect();
        let row_ptr = offsets(&lens)?;
        let nnz = row_ptr[n] as usize;
        let mut cols = vec![0u32; nnz];
        let mut vals = vec![0.0f64; nnz * B2];
        let vref = a.values();
        let diag = a.diag();
        // split the outputs by rows, one task per bin of 32 rows
        let mut pieces: Vec<(usize, &mut [u32], &mut [f64])> = Vec::new();
        {
            let (mut c_rest, mut v_rest) = (&mut cols[..], &mut vals[..]);
            let mut at = 0usize;
            for b in 0..n.div_ceil(32) {
                let end = row_ptr[((b + 1) * 32).min(n)] as usize;
                let (c, cr) = std::mem::take(&mut c_rest).split_at_mut(end - at);
                let (v, vr) = std::mem::take(&mut v_rest).split_at_mut((end - at) * B2);
                pieces.push((b, c, v));
                c_rest = cr;
                v_rest = vr;
                at = end;
            }
        }
        pieces.into_par_iter().for_each(|(b, c, v)| {
            let base = p.bin_offsets()[b] as usize;
            let w32 = p.bin_offsets()[b + 1] as usize - base;
            let mut k = 0usize;
            for i in b * 32..((b + 1) * 32).min(n) {
                let fi = &fixed[3 * i..3 * i + 3];
                let lane = i - b * 32;
                let len = p.row_lengths()[i] as usize;
                let mut diag_done = false;
                for s in 0..len {
                    let slot = base + s * 32 + lane;
                    let j = p.col_indices()[slot] as usize;
                    if !diag_done && j > i {
                        emit(c, v, &mut k, i, i, fi, fixed, None, vref, diag, base, w32);
                        diag_done = true;
                    }
                    emit(
                        c,
                        v,
                        &mut k,
                        i,
                        j,
                        fi,
                        fixed,
                        Some(slot),
                        vref,
                        diag,
                        base,
                        w32,
                    );
                }
                if !diag_done {
                    emit(c, v, &mut k, i, i, fi, fixed, None, vref, diag, base, w32);
                }
            }
        });
        #[allow(clippy::too_many_arguments)]
        fn emit(
            c: &mut [u32],
            v: &mut [f64],
            k: &mut usize,
            i: usize,
            j: usize,
            fi: &[bool],
            fixed: &[bool],
            slot: Option<usize>,
            vref: &[f64],
            diag: &[f64],
            base: usize,
            w32: usize,
        ) {
            c[*k] = j as u32;
            let out = &mut v[*k * B2..(*k + 1) * B2];
            let fj = &fixed[3 * j..3 * j + 3];
            for r in 0..3 {
                for q in 0..3 {
                    let raw = match slot {
                        None => diag[i * 9 + r * 3 + q],
                        Some(s) => vref[base * 9 + (r * 3 + q) * w32 + (s - base)],
                    };
                    out[r * 3 + q] = if fi[r] || fj[q] {
                        if slot.is_none() && r == q {
                            1.0
                        } else {
                            0.0
                        }
                    } else {
                        raw
                    };
                }
            }
            *k += 1;
        }
        let m = BlockCsr {
            nrows: n,
            ncols: n,
            row_ptr,
            cols,
            vals,
        };
        debug_assert!(m.validate().is_ok());
        Ok(m)
    }

    /// `y = A x` (rows in parallel, each summed in column order).
    pub fn spmv(&self, x: &[f64], y: &mut [f64]) {
        y.par_chunks_mut(3)
            .with_min_len(256)
            .enumerate()
            .for_each(|(i, yi)| {
                let mut acc = [0.0f64; 3];
                for k in self.row_range(i) {
                    let j = self.cols[k] as usize;
                    let a = &self.vals[k * B2..(k + 1) * B2];
                    for r in 0..3 {
                        let mut s = acc[r];
                        s += a[r * 3] * x[3 * j];
                        s += a[r * 3 + 1] * x[3 * j + 1];
                        s += a[r * 3 + 2] * x[3 * j + 2];
                        acc[r] = s;
                    }
                }
                yi.copy_from_slice(&acc);
            });
    }

    /// `y += A x`.
    pub fn spmv_add(&self, x: &[f64], y: &mut [f64]) {
        y.par_chunks_mut(3)
            .with_min_len(256)
            .enumerate()
            .for_each(|(i, yi)| {
                let mut acc = [0.0f64; 3];
                for k in self.row_range(i) {
                    let j = self.cols[k] as usize;
                    let a = &self.vals[k * B2..(k + 1) * B2];
                    for r in 0..3 {
                        let mut s = acc[r];
                        s += a[r * 3] * x[3 * j];
                        s += a[r * 3 + 1] * x[3 * j + 1];
                        s += a[r * 3 + 2] * x[3 * j + 2];
                        acc[r] = s;
                    }
                }
                for r in 0..3 {
                    yi[r] += acc[r];
                }
            });
    }

    /// The diagonal block of row `i` (zeros if not stored).
    pub fn diagonal_block(&self, i: usize) -> [f64; 9] {
        let mut out = [0.0; 9];
        if let Some(k) = self.find(i, i as u32) {
            out.copy_from_slice(&self.vals[k * B2..(k + 1) * B2]);
        }
        out
    }

    /// The transpose (each block transposed); rows of the result list their columns in
    /// ascending order.
    pub fn transpose(&self) -> BlockCsr {
        let mut counts = vec![0u32; self.ncols];
        for &j in &self.cols {
            counts[j as usize] += 1;
        }
        let row_ptr = offsets(&counts).expect("a transpose has as many blocks as its matrix");
        let mut next: Vec<u32> = row_ptr[..self.ncols].to_vec();
        let mut cols = vec![0u32; self.nnz()];
        let mut vals = vec![0.0f64; self.nnz() * B2];
        for i in 0..self.nrows {
            for k in self.row_range(i) {
                let j = self.cols[k] as usize;
                let at = next[j] as usize;
                next[j] += 1;
                cols[at] = i as u32;
                let src = &self.vals[k * B2..(k + 1) * B2];
                let dst = &mut vals[at * B2..(at + 1) * B2];
                for r in 0..3 {
                    for q in 0..3 {
                        dst[q * 3 + r] = src[r * 3 + q];
                    }
                }
            }
        }
        BlockCsr {
            nrows: self.ncols,
            ncols: self.nrows,
            row_ptr,
            cols,
            vals,
        }
    }

    /// The product `A B` (Gustavson, row by row). The block `(i, j)` of the result sums
    /// `A_ik B_kj` over the stored `k` of row `i` in ascending order.
    pub fn matmul(&self, b: &BlockCsr) -> Result<BlockCsr, SolveError> {
        assert_eq!(self.ncols, b.nrows, "inner dimensions");
        let rows: Vec<(Vec<u32>, Vec<f64>)> = (0..self.nrows)
            .into_par_iter()
            .with_min_len(64)
            .map_init(
                || (vec![u32::MAX; b.ncols], Vec::<u32>::new()),
                |(marker, list), i| {
                    list.clear();
                    for k in self.row_range(i) {
                        let kk = self.cols[k] as usize;
                        for q in b.row_range(kk) {
                            let j = b.cols[q];
                            if marker[j as usize] != i as u32 {
                                marker[j as usize] = i as u32;
                                list.push(j);
                            }
                        }
                    }
                    list.sort_unstable();
                    for (pos, &j) in list.iter().enumerate() {
                        marker[j as usize] = pos as u32;
                    }
                    let mut vals = vec![0.0f64; list.len() * B2];
                    for k in self.row_range(i) {
                        let kk = self.cols[k] as usize;
                        let a = &self.vals[k * B2..(k + 1) * B2];
                        for q in b.row_range(kk) {
                            let pos = marker[b.cols[q] as usize] as usize;
                            block_mul_add(
                                &mut vals[pos * B2..(pos + 1) * B2],
                                a,
                                &b.vals[q * B2..(q + 1) * B2],
                            );
                        }
                    }
                    // the markers hold positions now: reset them for the next row
                    for &j in list.iter() {
                        marker[j as usize] = u32::MAX;
                    }
                    (list.clone(), vals)
                },
            )
            .collect();
        let lens: Vec<u32> = rows.iter().map(|r| r.0.len() as u32).collect();
        let row_ptr = offsets(&lens)?;
        let mut cols = Vec::with_capacity(row_ptr[self.nrows] as usize);
        let mut vals = Vec::with_capacity(row_ptr[self.nrows] as usize * B2);
        for (c, v) in rows {
            cols.extend(c);
            vals.extend(v);
        }
        Ok(BlockCsr {
            nrows: self.nrows,
            ncols: b.ncols,
            row_ptr,
            cols,
            vals,
        })
    }

    /// Make a square matrix exactly symmetric: both `(i, j)` and `(j, i)` become
    /// `½ (A_ij + A_jiᵀ)` (and its transpose). The pattern must be structurally symmetric.
    pub fn symmetrize(&mut self) -> Result<(), SolveError> {
        let n = self.nrows;
        let mirror: Vec<Result<Vec<f64>, SolveError>> = (0..n)
            .into_par_iter()
            .with_min_len(64)
            .map(|i| {
                let mut out = Vec::with_capacity(self.row_range(i).len() * B2);
                for k in self.row_range(i) {
                    let j = self.cols[k] as usize;
                    let t = self.find(j, i as u32).ok_or(SolveError::InvalidInput {
                        what: "Galerkin operator",
                        message: format!("pattern is not symmetric at block ({i}, {j})"),
                    })?;
                    let (a, b) = (
                        &self.vals[k * B2..(k + 1) * B2],
                        &self.vals[t * B2..(t + 1) * B2],
                    );
                    for r in 0..3 {
                        for q in 0..3 {
                            // the pair is added in index order of (min, max) so that (i, j)
                            // and (j, i) round identically
                            let (x, y) = (a[r * 3 + q], b[q * 3 + r]);
                            out.push(if i <= j { 0.5 * (x + y) } else { 0.5 * (y + x) });
                        }
                    }
                }
                Ok(out)
            })
            .collect();
        let mut at = 0;
        for m in mirror {
            let m = m?;
            self.vals[at..at + m.len()].copy_from_slice(&m);
            at += m.len();
        }
        Ok(())
    }

    /// Largest `|A_ij − A_jiᵀ|` relative to the largest entry (0 for an exactly symmetric
    /// matrix).
    pub fn asymmetry(&self) -> f64 {
        let mut d = 0.0f64;
        let mut s = 0.0f64;
        for i in 0..self.nrows {
            for k in self.row_range(i) {
                let j = self.cols[k] as usize;
                let a = &self.vals[k * B2..(k + 1) * B2];
                s = a.iter().fold(s, |m, v| m.max(v.abs()));
                match self.find(j, i as u32) {
                    Some(t) => {
                        let b = &self.vals[t * B2..(t + 1) * B2];
                        for r in 0..3 {
                            for q in 0..3 {
                                d = d.max((a[r * 3 + q] - b[q * 3 + r]).abs());
                            }
                        }
                    }
                    None => d = d.max(a.iter().fold(0.0f64, |m, v| m.max(v.abs()))),
                }
            }
        }
        if s > 0.0 {
            d / s
        } else {
            0.0
        }
    }

    /// Dense row-major copy (`3 nrows × 3 ncols`), for small coarse matrices and tests.
    pub fn to_dense(&self) -> Vec<f64> {
        let (m, nc) = (3 * self.nrows, 3 * self.ncols);
        let mut d = vec![0.0; m * nc];
        for i in 0..self.nrows {
            for k in self.row_range(i) {
                let j = self.cols[k] as usize;
                for r in 0..3 {
                    for q in 0..3 {
                        d[(3 * i + r) * nc + 3 * j + q] = self.vals[k * B2 + r * 3 + q];
                    }
                }
            }
        }
        d
    }
}

/// A square block CSR matrix as a solver operator.
impl BlockOperator for BlockCsr {
    fn num_block_rows(&self) -> usize {
        self.nrows
    }
    fn block_size(&self) -> usize {
        3
    }
    fn apply(&self, x: &[f64], y: &mut [f64]) {
        self.spmv(x, y);
    }
    fn diagonal_block(&self, i: usize, out: &mut [f64]) {
        out[..9].copy_from_slice(&BlockCsr::diagonal_block(self, i));
    }
}

/// CSR offsets from row lengths, with an overflow check of the 32-bit offsets.
pub fn offsets(lens: &[u32]) -> Result<Vec<u32>, SolveError> {
    let mut out = Vec::with_capacity(lens.len() + 1);
    let mut acc: u64 = 0;
    out.push(0u32);
    for &l in lens {
        acc += l as u64;
        if acc > u32::MAX as u64 {
            return Err(SolveError::TooLarge(format!(
                "{acc} blocks do not fit 32-bit offsets"
            )));
        }
        out.push(acc as u32);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(s: &mut u64) -> f64 {
        *s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }

    fn random(nr: usize, nc: usize, per_row: usize, seed: u64) -> BlockCsr {
        let mut s = seed;
        let mut row_ptr = vec![0u32];
        let mut cols = Vec::new();
        let mut vals = Vec::new();
        for _ in 0..nr {
            let mut c: Vec<u32> = (0..per_row)
                .map(|_| ((lcg(&mut s) + 1.0) * 0.5 * nc as f64) as u32 % nc as u32)
                .collect();
            c.sort_unstable();
            c.dedup();
            for _ in 0..c.len() * 9 {
                vals.push(lcg(&mut s));
            }
            cols.extend(c);
            row_ptr.push(cols.len() as u32);
        }
        BlockCsr {
            nrows: nr,
            ncols: nc,
            row_ptr,
            cols,
            vals,
        }
    }

    fn dense_mul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for l in 0..k {
                for j in 0..n {
                    c[i * n + j] += a[i * k + l] * b[l * n + j];
                }
            }
        }
        c
    }

    #[test]
    fn matmul_and_transpose_match_dense() {
        let a = random(37, 23, 5, 1);
        let b = random(23, 41, 4, 2);
        a.validate().unwrap();
        let c = a.matmul(&b).unwrap();
        c.validate().unwrap();
        let d = dense_mul(&a.to_dense(), &b.to_dense(), 111, 69, 123);
        for (x, y) in c.to_dense().iter().zip(&d) {
            assert!((x - y).abs() < 1e-12);
        }
        let t = a.transpose();
        t.validate().unwrap();
        let (ad, td) = (a.to_dense(), t.to_dense());
        for i in 0..111 {
            for j in 0..69 {
                assert_eq!(ad[i * 69 + j], td[j * 111 + i]);
            }
        }
        // spmv
        let x: Vec<f64> = (0..69).map(|i| (i as f64 * 0.37).sin()).collect();
        let mut y = vec![0.0; 111];
        a.spmv(&x, &mut y);
        for i in 0..111 {
            let e: f64 = (0..69).map(|j| ad[i * 69 + j] * x[j]).sum();
            assert!((y[i] - e).abs() < 1e-12);
        }
        // symmetrize A Aᵀ-like products
        let mut s = a.matmul(&a.transpose()).unwrap();
        s.vals[1] += 1e-3; // break the symmetry a little
        assert!(s.asymmetry() > 0.0);
        s.symmetrize().unwrap();
        assert_eq!(s.asymmetry(), 0.0);
    }
}
