//! Sparse matrix layouts for compound entries (dissertation §5.3.1): the *outer* layout
//! (CSR = row-major, ELLPACK-R = padded column-major, Sliced ELLPACK = sliced padded
//! column-major with slice size k = 16 or 32), the *inner* layout of the entry array (AoS or
//! SoA) and the *vector* layout (AoS or SoA). Matrices are converted from a host CSR in the
//! natural AoS layout; each layout has a CPU reference SpMV that reads the arrays exactly as
//! the generated kernel does.

use std::fmt;
use std::str::FromStr;

use rayon::prelude::*;
use tessera_core::Par;

use crate::entry::EntrySpec;
use crate::error::{Result, SpmvError};
use crate::scalar::{Precision, Scalar};

/// Warp size w; the ELLPACK-R row stride is padded to a multiple of it (§5.3.1).
pub const WARP: usize = 32;

/// Outer layout (dissertation §5.3.1).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Outer {
    /// Compressed sparse row: offsets (n+1), row-major tuples.
    Csr,
    /// ELLPACK-R: per-row counts (n), padded and transposed (column-major, stride padded to the warp size).
    Ell,
    /// Sliced ELLPACK with slice size k (16 or 32): ceil(n/k)+1 slice offsets; each slice padded
    /// and transposed; padding holds explicit matrix zero entries.
    Sell(u32),
}

/// AoS or SoA, for the entry array (inner layout) or the vectors (vector layout).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Aos {
    /// Array of structures: the fields of one entry are adjacent.
    Aos,
    /// Structure of arrays: one array per field.
    Soa,
}

/// A complete layout `OUTER-INNER-VECTOR`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Layout {
    pub outer: Outer,
    pub inner: Aos,
    pub vector: Aos,
}

impl Layout {
    /// The "natural" layout CSR-AoS-AoS that schedule-only tuning uses (§5.4.1).
    pub const NATURAL: Layout = Layout {
        outer: Outer::Csr,
        inner: Aos::Aos,
        vector: Aos::Aos,
    };

    /// All 16 layouts: {csr, ell, sell16, sell32} x {aos, soa} x {aos, soa}.
    pub fn all() -> Vec<Layout> {
        let mut v = Vec::new();
        for outer in [Outer::Csr, Outer::Ell, Outer::Sell(16), Outer::Sell(32)] {
            for inner in [Aos::Aos, Aos::Soa] {
                for vector in [Aos::Aos, Aos::Soa] {
                    v.push(Layout {
                        outer,
                        inner,
                        vector,
                    });
                }
            }
        }
        v
    }

    /// The notation of the dissertation's tables: `ELL-AoS-AoS`, `SI-32-SoA-AoS`, `CSR-SoA-SoA`.
    pub fn paper_name(&self) -> String {
        let o = match self.outer {
            Outer::Csr => "CSR".to_string(),
            Outer::Ell => "ELL".to_string(),
            Outer::Sell(k) => format!("SI-{k}"),
        };
        let a = |x: Aos| if x == Aos::Aos { "AoS" } else { "SoA" };
        format!("{o}-{}-{}", a(self.inner), a(self.vector))
    }
}

impl fmt::Display for Outer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outer::Csr => f.write_str("csr"),
            Outer::Ell => f.write_str("ell"),
            Outer::Sell(k) => write!(f, "sell{k}"),
        }
    }
}
impl fmt::Display for Aos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if *self == Aos::Aos { "aos" } else { "soa" })
    }
}
impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.outer, self.inner, self.vector)
    }
}

impl FromStr for Layout {
    type Err = SpmvError;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            SpmvError::BadOption {
            what: "layout",
            value: s.to_string(),
            expected: "OUTER-INNER-VECTOR with OUTER in csr, ell, sell16, sell32 and INNER, VECTOR in aos, soa".into(),
        }
        };
        let parts: Vec<String> = s
            .trim()
            .to_ascii_lowercase()
            .split('-')
            .map(str::to_string)
            .collect();
        if parts.len() != 3 {
            return Err(bad());
        }
        let outer = match parts[0].as_str() {
            "csr" => Outer::Csr,
            "ell" => Outer::Ell,
            "sell16" => Outer::Sell(16),
            "sell32" => Outer::Sell(32),
            _ => return Err(bad()),
        };
        let aos = |p: &str| match p {
            "aos" => Ok(Aos::Aos),
            "soa" => Ok(Aos::Soa),
            _ => Err(bad()),
        };
        Ok(Layout {
            outer,
            inner: aos(&parts[1])?,
            vector: aos(&parts[2])?,
        })
    }
}

/// A sparse matrix with compound entries in CSR with the natural AoS entry layout (the host
/// format every layout is converted from). `values[p * entry_len + f]` is field `f` of stored
/// entry `p`.
#[derive(Clone, Debug, PartialEq)]
pub struct CsrMatrix<T> {
    pub n_rows: usize,
    pub n_cols: usize,
    /// Scalars per matrix entry.
    pub entry_len: usize,
    pub row_ptr: Vec<u32>,
    pub col_idx: Vec<u32>,
    pub values: Vec<T>,
}

impl<T: Scalar> CsrMatrix<T> {
    /// Checks offsets, column bounds and array lengths.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(SpmvError::BadMatrix(m));
        if self.row_ptr.len() != self.n_rows + 1 || self.row_ptr[0] != 0 {
            return bad(format!(
                "row_ptr has {} entries for {} rows",
                self.row_ptr.len(),
                self.n_rows
            ));
        }
        if self.row_ptr.windows(2).any(|w| w[0] > w[1]) {
            return bad("row_ptr is not monotone".into());
        }
        let nnz = self.row_ptr[self.n_rows] as usize;
        if self.col_idx.len() != nnz || self.values.len() != nnz * self.entry_len {
            return bad(format!(
                "nnz {nnz} but {} column indices and {} values (entry length {})",
                self.col_idx.len(),
                self.values.len(),
                self.entry_len
            ));
        }
        if let Some(c) = self.col_idx.iter().find(|&&c| c as usize >= self.n_cols) {
            return bad(format!("column index {c} >= {} columns", self.n_cols));
        }
        if self.n_rows >= u32::MAX as usize || nnz >= u32::MAX as usize {
            return bad("too large for 32-bit indices".into());
        }
        Ok(())
    }
    /// Number of stored (compound) entries.
    pub fn nnz(&self) -> usize {
        self.col_idx.len()
    }
    /// Converts the scalar type.
    pub fn cast<U: Scalar>(&self) -> CsrMatrix<U> {
        CsrMatrix {
            n_rows: self.n_rows,
            n_cols: self.n_cols,
            entry_len: self.entry_len,
            row_ptr: self.row_ptr.clone(),
            col_idx: self.col_idx.clone(),
            values: self
                .values
                .iter()
                .map(|v| U::from_f64(v.to_f64()))
                .collect(),
        }
    }
    /// Longest row.
    pub fn max_row_len(&self) -> usize {
        self.row_ptr
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
    }

    /// Plain CSR-AoS SpMV `y = A x` with natural AoS vectors: the reference all layouts are
    /// compared against.
    pub fn spmv(&self, spec: &EntrySpec, x: &[T], par: Par) -> Vec<T> {
        let (ml, vl) = (spec.matrix_len(), spec.vector_len());
        let zero: Vec<T> = spec.zero.iter().map(|&z| T::from_f64(z)).collect();
        let mut y = vec![T::default(); self.n_rows * vl];
        let row = |i: usize, yi: &mut [T]| {
            yi.copy_from_slice(&zero);
            for p in self.row_ptr[i] as usize..self.row_ptr[i + 1] as usize {
                let c = self.col_idx[p] as usize;
                spec.mul_add(
                    &self.values[p * ml..(p + 1) * ml],
                    &x[c * vl..(c + 1) * vl],
                    yi,
                );
            }
        };
        match par {
            Par::Seq => y.chunks_mut(vl).enumerate().for_each(|(i, yi)| row(i, yi)),
            _ => y
                .par_chunks_mut(vl)
                .enumerate()
                .for_each(|(i, yi)| row(i, yi)),
        }
        y
    }

    /// Per output scalar, `sum |coef * a * x|` over the products of its row: the scale for
    /// the rounding error bound of a reordered or fused evaluation.
    pub fn spmv_abs(&self, spec: &EntrySpec, x: &[T]) -> Vec<f64> {
        let (ml, vl) = (spec.matrix_len(), spec.vector_len());
        let mut y = vec![0.0; self.n_rows * vl];
        for i in 0..self.n_rows {
            for p in self.row_ptr[i] as usize..self.row_ptr[i + 1] as usize {
                let c = self.col_idx[p] as usize;
                spec.abs_mul_add(
                    &self.values[p * ml..(p + 1) * ml],
                    &x[c * vl..(c + 1) * vl],
                    &mut y[i * vl..(i + 1) * vl],
                );
            }
        }
        y
    }
}

/// A matrix converted to a [`Layout`]: the arrays the generated kernel reads.
#[derive(Clone, Debug)]
pub struct LayoutMatrix<T> {
    pub layout: Layout,
    pub n_rows: usize,
    pub n_cols: usize,
    pub entry_len: usize,
    /// CSR: row offsets (n+1). ELL: row counts (n). SELL-k: slice offsets in slots (ceil(n/k)+1).
    pub outer: Vec<u32>,
    /// Column index per slot (padding slots repeat a valid column of their row, or 0).
    pub cols: Vec<u32>,
    /// Entry values per slot: AoS `vals[p*L + f]`, SoA `vals[f*slots + p]`.
    pub vals: Vec<T>,
    /// Number of slots (stored entries including padding): the SoA field stride.
    pub slots: usize,
    /// ELLPACK-R: stride between the k-th entries of consecutive rows (n rounded up to the warp size).
    pub ell_stride: usize,
}

impl<T: Scalar> LayoutMatrix<T> {
    /// Converts a host CSR (natural AoS) to `layout` (the generated classes' host constructor, §5.3.2).
    pub fn from_csr(a: &CsrMatrix<T>, layout: Layout) -> Result<Self> {
        a.validate()?;
        let n = a.n_rows;
        let l = a.entry_len;
        let len = |i: usize| (a.row_ptr[i + 1] - a.row_ptr[i]) as usize;
        // slot of the k-th entry of row i, the outer array and the number of slots
        let (outer, slots, ell_stride): (Vec<u32>, usize, usize) = match layout.outer {
            Outer::Csr => (a.row_ptr.clone(), a.nnz(), 0),
            Outer::Ell => {
                let stride = n.div_ceil(WARP) * WARP;
                (
                    (0..n).map(|i| len(i) as u32).collect(),
                    a.max_row_len() * stride,
                    stride,
                )
            }
            Outer::Sell(k) => {
                let k = k as usize;
                let ns = n.div_ceil(k);
                let mut off = Vec::with_capacity(ns + 1);
                off.push(0u32);
                let mut total = 0usize;
                for s in 0..ns {
                    let w = (s * k..((s + 1) * k).min(n)).map(len).max().unwrap_or(0);
                    total += w * k;
                    if total >= u32::MAX as usize {
                        return Err(SpmvError::BadMatrix(
                            "sliced ELLPACK exceeds 32-bit offsets".into(),
                        ));
                    }
                    off.push(total as u32);
                }
                (off, total, 0)
            }
        };
        if slots >= u32::MAX as usize {
            return Err(SpmvError::BadMatrix(
                "layout exceeds 32-bit slot indices".into(),
            ));
        }
        let mut cols = vec![0u32; slots];
        let mut vals = vec![T::default(); slots * l];
        let put = |vals: &mut [T], p: usize, src: usize| {
            for f in 0..l {
                let v = a.values[src * l + f];
                match layout.inner {
                    Aos::Aos => vals[p * l + f] = v,
                    Aos::Soa => vals[f * slots + p] = v,
                }
            }
        };
        for i in 0..n {
            let b = a.row_ptr[i] as usize;
            let width = match layout.outer {
                Outer::Sell(k) => {
                    let s = i / k as usize;
                    ((outer[s + 1] - outer[s]) as usize) / k as usize
                }
                _ => len(i),
            };
            for kk in 0..width {
                let p = slot(&layout, &outer, ell_stride, i, kk);
                if kk < len(i) {
                    cols[p] = a.col_idx[b + kk];
                    put(&mut vals, p, b + kk);
                } else {
                    // padding: the matrix zero entry (all fields 0) at a column the row already reads
                    cols[p] = if len(i) > 0 {
                        a.col_idx[b + len(i) - 1]
                    } else {
                        0
                    };
                }
            }
        }
        Ok(LayoutMatrix {
            layout,
            n_rows: n,
            n_cols: a.n_cols,
            entry_len: l,
            outer,
            cols,
            vals,
            slots,
            ell_stride,
        })
    }

    /// CPU reference SpMV of this layout: `y = A x`, with `x` and `y` in the layout's vector
    /// layout. Walks the slots in exactly the order of the generated kernel's row loop.
    pub fn spmv(&self, spec: &EntrySpec, x: &[T], par: Par) -> Vec<T> {
        let (ml, vl) = (spec.matrix_len(), spec.vector_len());
        let n = self.n_rows;
        let lay = self.layout;
        let row = |i: usize| -> Vec<T> {
            let mut acc: Vec<T> = spec.zero.iter().map(|&z| T::from_f64(z)).collect();
            let mut a = vec![T::default(); ml];
            let mut xv = vec![T::default(); vl];
            let mut visit = |p: usize| {
                let c = self.cols[p] as usize;
                for (f, af) in a.iter_mut().enumerate() {
                    *af = match lay.inner {
                        Aos::Aos => self.vals[p * ml + f],
                        Aos::Soa => self.vals[f * self.slots + p],
                    };
                }
                for (g, xg) in xv.iter_mut().enumerate() {
                    *xg = match lay.vector {
                        Aos::Aos => x[c * vl + g],
                        Aos::Soa => x[g * self.n_cols + c],
                    };
                }
                spec.mul_add(&a, &xv, &mut acc);
            };
            match lay.outer {
                Outer::Csr => (self.outer[i]..self.outer[i + 1]).for_each(|p| visit(p as usize)),
                Outer::Ell => {
                    (0..self.outer[i] as usize).for_each(|k| visit(i + k * self.ell_stride))
                }
                Outer::Sell(k) => {
                    let k = k as usize;
                    let s = i / k;
                    let mut p = self.outer[s] as usize + i % k;
                    while p < self.outer[s + 1] as usize {
                        visit(p);
                        p += k;
                    }
                }
            }
            acc
        };
        let rows: Vec<Vec<T>> = match par {
            Par::Seq => (0..n).map(row).collect(),
            _ => (0..n).into_par_iter().map(row).collect(),
        };
        let mut y = vec![T::default(); n * vl];
        for (i, r) in rows.iter().enumerate() {
            for (g, &v) in r.iter().enumerate() {
                match lay.vector {
                    Aos::Aos => y[i * vl + g] = v,
                    Aos::Soa => y[g * n + i] = v,
                }
            }
        }
        y
    }

    /// Bytes of the stored arrays with `index_bytes` per index and `scalar_bytes` per scalar
    /// (seed 002 Table 9 uses 4-byte indices and 8-byte values).
    pub fn memory_bytes_with(&self, index_bytes: usize, scalar_bytes: usize) -> usize {
        (self.outer.len() + self.cols.len()) * index_bytes + self.vals.len() * scalar_bytes
    }
    /// Bytes of the stored arrays in this precision with 4-byte indices.
    pub fn memory_bytes(&self) -> usize {
        self.memory_bytes_with(4, T::PRECISION.bytes())
    }
}

/// Slot of the `k`-th stored entry of row `i` (the index arithmetic of the generated kernel).
fn slot(layout: &Layout, outer: &[u32], ell_stride: usize, i: usize, k: usize) -> usize {
    match layout.outer {
        Outer::Csr => outer[i] as usize + k,
        Outer::Ell => i + k * ell_stride,
        Outer::Sell(kk) => {
            let kk = kk as usize;
            outer[i / kk] as usize + k * kk + i % kk
        }
    }
}

/// Packs a natural AoS vector (`n` entries of `len` scalars) into `layout`.
pub fn pack_vector<T: Scalar>(x_aos: &[T], n: usize, len: usize, layout: Aos) -> Vec<T> {
    match layout {
        Aos::Aos => x_aos.to_vec(),
        Aos::Soa => {
            let mut v = vec![T::default(); n * len];
            for i in 0..n {
                for g in 0..len {
                    v[g * n + i] = x_aos[i * len + g];
                }
            }
            v
        }
    }
}

/// Inverse of [`pack_vector`].
pub fn unpack_vector<T: Scalar>(x: &[T], n: usize, len: usize, layout: Aos) -> Vec<T> {
    match layout {
        Aos::Aos => x.to_vec(),
        Aos::Soa => {
            let mut v = vec![T::default(); n * len];
            for i in 0..n {
                for g in 0..len {
                    v[i * len + g] = x[g * n + i];
                }
            }
            v
        }
    }
}

/// Bytes that one SpMV must at least move: every stored array of the layout once, `x` once
/// (each entry at least once) and `y` written once. Padding slots count, as the kernel reads them
/// (ELLPACK-R skips padding and reads only the counted slots).
pub fn bytes_moved<T: Scalar>(m: &LayoutMatrix<T>, spec: &EntrySpec, nnz: usize) -> usize {
    let s = T::PRECISION.bytes();
    let read_slots = match m.layout.outer {
        Outer::Ell => nnz,
        _ => m.slots,
    };
    let outer = match m.layout.outer {
        Outer::Csr => m.n_rows + 1,
        Outer::Ell => m.n_rows,
        Outer::Sell(k) => m.n_rows.div_ceil(k as usize) + 1,
    };
    outer * 4
        + read_slots * (4 + spec.matrix_len() * s)
        + m.n_cols * spec.vector_len() * s
        + m.n_rows * spec.vector_len() * s
}

/// Memory use of each outer layout relative to CSR (seed 002 §5.5, Table 9): returns
/// `(csr_bytes, [ell, sell16, sell32] as multiples of csr_bytes)` for the given precision.
pub fn memory_overhead<T: Scalar>(a: &CsrMatrix<T>) -> Result<(usize, [f64; 3])> {
    memory_overhead_with(a, 4, T::PRECISION.bytes())
}

/// [`memory_overhead`] with explicit index and scalar sizes (Table 9: 4 and 8).
pub fn memory_overhead_with<T: Scalar>(
    a: &CsrMatrix<T>,
    index_bytes: usize,
    scalar_bytes: usize,
) -> Result<(usize, [f64; 3])> {
    let base =
        LayoutMatrix::from_csr(a, Layout::NATURAL)?.memory_bytes_with(index_bytes, scalar_bytes);
    let mut r = [0.0; 3];
    for (k, outer) in [Outer::Ell, Outer::Sell(16), Outer::Sell(32)]
        .into_iter()
        .enumerate()
    {
        let m = LayoutMatrix::from_csr(
            a,
            Layout {
                outer,
                inner: Aos::Aos,
                vector: Aos::Aos,
            },
        )?;
        r[k] = m.memory_bytes_with(index_bytes, scalar_bytes) as f64 / base as f64;
    }
    Ok((base, r))
}

/// Tolerance check of a computed SpMV against the reference: `|y - y_ref| <= rtol * (|y_ref| + scale)`
/// per scalar, where `scale` is the row's `sum |a x|` ([`CsrMatrix::spmv_abs`]). Returns the
/// largest ratio `|y - y_ref| / (|y_ref| + scale)` (and whether it is within `rtol`).
pub fn compare<T: Scalar>(y: &[T], y_ref: &[T], scale: &[f64], rtol: f64) -> (f64, bool) {
    let mut worst: f64 = 0.0;
    let mut ok = y.len() == y_ref.len();
    for ((a, b), s) in y.iter().zip(y_ref).zip(scale) {
        let (a, b) = (a.to_f64(), b.to_f64());
        let d = (a - b).abs();
        let den = b.abs() + s + f64::MIN_POSITIVE;
        let r = d / den;
        if !(r <= rtol) {
            ok = false;
        }
        if r > worst || r.is_nan() {
            worst = if r.is_nan() { f64::INFINITY } else { r };
        }
    }
    (worst, ok)
}

/// Default relative tolerance for comparisons in `precision` (a few hundred unit roundoffs).
pub fn default_rtol(p: Precision) -> f64 {
    match p {
        Precision::F32 => 2e-5,
        Precision::F64 => 1e-13,
    }
}
