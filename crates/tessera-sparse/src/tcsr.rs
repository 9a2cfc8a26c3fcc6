//! Ternary compressed sparse row (TCSR) matrices (dissertation §3.4).
//!
//! A TCSR matrix stores only the non-zero entries of a matrix with values in {-1, 0, 1}.
//! The value is encoded in the column index:
//!
//! ```text
//! columns_TCSR[i] = -columns[i] - 1   if values[i] = -1      (bitwise NOT of the index)
//!                    columns[i]       if values[i] = +1
//! ```
//!
//! so no value array is needed. Encoding and decoding are branch-free: with
//! `s = v >> 31` (arithmetic shift, 0 or -1), the column is `v ^ s` and the sign `1 | s`.

use crate::transpose::{
    transpose_entries, transpose_two_sided, StridedEntries, TcsrEntries, TransposeParams,
};
use rayon::prelude::*;
use tessera_core::Par;

/// Encode column `col` with sign `neg` (true for -1) as a TCSR entry (dissertation §3.4).
#[inline(always)]
pub fn encode(col: u32, neg: bool) -> i32 {
    (col as i32) ^ -(neg as i32)
}

/// Encode column `col` with an integer sign (+1 or -1; only the sign bit of `sign` is used).
#[inline(always)]
pub fn encode_signed(col: u32, sign: i32) -> i32 {
    (col as i32) ^ (sign >> 31)
}

/// Decode a TCSR entry into `(column, sign)` with `sign` in {+1, -1}.
#[inline(always)]
pub fn decode(v: i32) -> (u32, i32) {
    let s = v >> 31;
    ((v ^ s) as u32, 1 | s)
}

/// Decoded column of a TCSR entry.
#[inline(always)]
pub fn col(v: i32) -> u32 {
    (v ^ (v >> 31)) as u32
}

/// Whether a TCSR entry encodes -1.
#[inline(always)]
pub fn is_neg(v: i32) -> bool {
    v < 0
}

/// Flip the sign of an encoded entry (bitwise NOT).
#[inline(always)]
pub fn negate(v: i32) -> i32 {
    !v
}

/// Errors of TCSR construction.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TcsrError {
    #[error("offsets must have nrows + 1 = {expected} entries, found {found}")]
    OffsetsLength { expected: usize, found: usize },
    #[error("offsets must start at 0 and be non-decreasing (row {row})")]
    OffsetsNotMonotone { row: usize },
    #[error("last offset {last} does not match the number of entries {nnz}")]
    OffsetsEnd { last: usize, nnz: usize },
    #[error("row {row} has column {col}, but the matrix has only {ncols} columns")]
    ColumnOutOfRange { row: usize, col: u32, ncols: usize },
    #[error("more than 2^32 - 1 non-zero entries")]
    TooManyEntries,
}

/// A ternary CSR matrix: `offsets[nrows + 1]` and encoded `columns[nnz]` (dissertation
/// §3.4, Fig. 3.6).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Tcsr {
    ncols: usize,
    offsets: Vec<u32>,
    columns: Vec<i32>,
}

impl Tcsr {
    /// Build from raw arrays, checking offsets and column ranges.
    pub fn new(ncols: usize, offsets: Vec<u32>, columns: Vec<i32>) -> Result<Self, TcsrError> {
        if offsets.is_empty() {
            return Err(TcsrError::OffsetsLength {
                expected: 1,
                found: 0,
            });
        }
        if offsets[0] != 0 {
            return Err(TcsrError::OffsetsNotMonotone { row: 0 });
        }
        for r in 0..offsets.len() - 1 {
            if offsets[r + 1] < offsets[r] {
                return Err(TcsrError::OffsetsNotMonotone { row: r });
            }
        }
        let last = *offsets.last().unwrap() as usize;
        if last != columns.len() {
            return Err(TcsrError::OffsetsEnd {
                last,
                nnz: columns.len(),
            });
        }
        for r in 0..offsets.len() - 1 {
            for &v in &columns[offsets[r] as usize..offsets[r + 1] as usize] {
                let c = col(v);
                if c as usize >= ncols {
                    return Err(TcsrError::ColumnOutOfRange {
                        row: r,
                        col: c,
                        ncols,
                    });
                }
            }
        }
        Ok(Tcsr {
            ncols,
            offsets,
            columns,
        })
    }

    /// Build from raw arrays without checks. The caller guarantees the invariants of
    /// [`Tcsr::new`]; violating them gives wrong results or index panics later, never UB.
    pub fn from_raw_unchecked(ncols: usize, offsets: Vec<u32>, columns: Vec<i32>) -> Self {
        debug_assert!(!offsets.is_empty());
        debug_assert_eq!(*offsets.last().unwrap() as usize, columns.len());
        Tcsr {
            ncols,
            offsets,
            columns,
        }
    }

    /// Build from rows of signed columns `(col, sign)`; `sign < 0` means -1.
    pub fn from_rows<I, R>(ncols: usize, rows: I) -> Result<Self, TcsrError>
    where
        I: IntoIterator<Item = R>,
        R: IntoIterator<Item = (u32, i32)>,
    {
        let mut offsets = vec![0u32];
        let mut columns = Vec::new();
        for row in rows {
            for (c, s) in row {
                columns.push(encode(c, s < 0));
            }
            if columns.len() > u32::MAX as usize {
                return Err(TcsrError::TooManyEntries);
            }
            offsets.push(columns.len() as u32);
        }
        Tcsr::new(ncols, offsets, columns)
    }

    /// An empty matrix with `nrows` empty rows.
    pub fn empty(nrows: usize, ncols: usize) -> Self {
        Tcsr {
            ncols,
            offsets: vec![0; nrows + 1],
            columns: Vec::new(),
        }
    }

    pub fn nrows(&self) -> usize {
        self.offsets.len() - 1
    }
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    pub fn nnz(&self) -> usize {
        self.columns.len()
    }
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }
    pub fn columns(&self) -> &[i32] {
        &self.columns
    }
    /// Encoded entries of row `r`.
    #[inline]
    pub fn row(&self, r: usize) -> &[i32] {
        &self.columns[self.offsets[r] as usize..self.offsets[r + 1] as usize]
    }
    /// Number of entries in row `r`.
    #[inline]
    pub fn row_len(&self, r: usize) -> usize {
        (self.offsets[r + 1] - self.offsets[r]) as usize
    }
    /// Decoded `(col, sign)` pairs of row `r`.
    pub fn row_decoded(&self, r: usize) -> impl Iterator<Item = (u32, i32)> + '_ {
        self.row(r).iter().map(|&v| decode(v))
    }
    /// Bytes of the stored arrays (offsets + columns).
    pub fn bytes(&self) -> usize {
        self.offsets.len() * 4 + self.columns.len() * 4
    }
    /// Take the raw arrays `(ncols, offsets, columns)`.
    pub fn into_raw(self) -> (usize, Vec<u32>, Vec<i32>) {
        (self.ncols, self.offsets, self.columns)
    }
    /// Set the number of columns (for example after appending entities).
    pub fn set_ncols(&mut self, ncols: usize) {
        self.ncols = ncols;
    }

    /// Dense `(nrows x ncols)` matrix of `{-1, 0, 1}` values, for tests and small examples.
    pub fn to_dense(&self) -> Vec<Vec<i8>> {
        let mut d = vec![vec![0i8; self.ncols]; self.nrows()];
        for (r, row) in d.iter_mut().enumerate() {
            for (c, s) in self.row_decoded(r) {
                row[c as usize] += s as i8;
            }
        }
        d
    }

    /// Transpose (TCSR -> TCSC reinterpreted as TCSR), Listing 3.1 of the dissertation:
    /// count entries per column, scan into offsets, fill ([`crate::transpose`]). Every row
    /// of the result lists its entries in input order (by decoded column, since a row never
    /// repeats a column), identically for `Par::Seq` and `Par::Rayon` at any thread count.
    /// When every row has the same length (∂3 of a tetrahedral mesh, ∂2 of a
    /// triangle-faced mesh) the offsets are not read (implicit offsets, Eqs. 3.11-3.13).
    pub fn transpose(&self, par: Par) -> Tcsr {
        self.transpose_with(par, TransposeParams::default())
    }

    /// [`Tcsr::transpose`] with explicit [`TransposeParams`] (input chunks, column groups).
    pub fn transpose_with(&self, par: Par, params: TransposeParams) -> Tcsr {
        let parallel = par.is_parallel();
        let n = self.ncols;
        let (offsets, columns) = match self.uniform_row_len_with(par) {
            Some(2) => transpose_entries(
                &StridedEntries::<2> {
                    columns: &self.columns,
                },
                n,
                parallel,
                params,
            ),
            Some(3) => transpose_entries(
                &StridedEntries::<3> {
                    columns: &self.columns,
                },
                n,
                parallel,
                params,
            ),
            Some(4) => transpose_entries(
                &StridedEntries::<4> {
                    columns: &self.columns,
                },
                n,
                parallel,
                params,
            ),
            _ => transpose_entries(
                &TcsrEntries {
                    offsets: &self.offsets,
                    columns: &self.columns,
                },
                n,
                parallel,
                params,
            ),
        };
        Tcsr {
            ncols: self.nrows(),
            offsets,
            columns,
        }
    }

    /// [`Tcsr::transpose`] of an operator whose every column has at most one +1 and one -1
    /// entry: ∂3 of a consistently oriented manifold mesh (a face bounds at most two cells,
    /// seen with opposite orientations), whose transpose is δ3 (dissertation §3.3). Takes
    /// the two-slot scatter without counting ([`crate::transpose::transpose_two_sided`]),
    /// and the general transpose for any other input; the result is identical to
    /// [`Tcsr::transpose`]'s for every input and thread count.
    pub fn transpose_two_sided(&self, par: Par) -> Tcsr {
        self.transpose_two_sided_with(par, TransposeParams::default())
    }

    /// [`Tcsr::transpose_two_sided`] with explicit [`TransposeParams`] (its `chunks` and
    /// `min_parallel_nnz`; the fallback uses all of them).
    pub fn transpose_two_sided_with(&self, par: Par, params: TransposeParams) -> Tcsr {
        let parallel = par.is_parallel();
        let n = self.ncols;
        let fast = match self.uniform_row_len_with(par) {
            Some(4) => transpose_two_sided(
                &StridedEntries::<4> {
                    columns: &self.columns,
                },
                n,
                parallel,
                params,
            ),
            _ => transpose_two_sided(
                &TcsrEntries {
                    offsets: &self.offsets,
                    columns: &self.columns,
                },
                n,
                parallel,
                params,
            ),
        };
        match fast {
            Some((offsets, columns)) => Tcsr {
                ncols: self.nrows(),
                offsets,
                columns,
            },
            None => self.transpose_with(par, params),
        }
    }

    /// The common length of all rows, if every row has the same length (and there is at
    /// least one row).
    pub fn uniform_row_len(&self) -> Option<usize> {
        self.uniform_row_len_with(Par::Seq)
    }

    /// [`Tcsr::uniform_row_len`], checked by blocks of offsets (each block without an early
    /// exit, so that it vectorizes), the blocks in parallel with `Par::Rayon`: the
    /// transposes ask it first, and a serial pass over millions of offsets would be a
    /// serial part of every parallel transpose.
    pub fn uniform_row_len_with(&self, par: Par) -> Option<usize> {
        let n = self.nrows();
        if n == 0 {
            return None;
        }
        let k = self.row_len(0);
        if self.columns.len() != n * k {
            return None;
        }
        // every offset fits in u32 (it is at most nnz), so r * k does for r <= n
        const BLOCK: usize = 1 << 14;
        let block_ok = |(b, offs): (usize, &[u32])| {
            let mut expect = (b * BLOCK * k) as u32;
            let mut bad = 0u32;
            for &o in offs {
                bad |= o ^ expect;
                expect = expect.wrapping_add(k as u32);
            }
            bad == 0
        };
        let ok = match par {
            Par::Seq => self.offsets.chunks(BLOCK).enumerate().all(block_ok),
            Par::Rayon => self.offsets.par_chunks(BLOCK).enumerate().all(block_ok),
        };
        ok.then_some(k)
    }

    /// Sort every row by decoded column (SortRows of Listing 3.1).
    pub fn sort_rows(&mut self, par: Par) {
        let offs = &self.offsets;
        let key = |v: &i32| (col(*v), *v);
        match par {
            Par::Seq => {
                for r in 0..offs.len() - 1 {
                    self.columns[offs[r] as usize..offs[r + 1] as usize].sort_unstable_by_key(key);
                }
            }
            Par::Rayon => {
                // split into blocks of whole rows (few splits), sort the rows of each block
                let nrows = offs.len() - 1;
                let block = par.chunk_len(nrows).min(1 << 12);
                let mut blocks: Vec<(usize, &mut [i32])> = Vec::with_capacity(nrows / block + 1);
                let mut rest: &mut [i32] = &mut self.columns;
                let mut r0 = 0;
                while r0 < nrows {
                    let r1 = (r0 + block).min(nrows);
                    let (h, t) =
                        std::mem::take(&mut rest).split_at_mut((offs[r1] - offs[r0]) as usize);
                    blocks.push((r0, h));
                    rest = t;
                    r0 = r1;
                }
                blocks.into_par_iter().for_each(|(r0, cols)| {
                    let base = offs[r0];
                    let r1 = (r0 + block).min(nrows);
                    for r in r0..r1 {
                        cols[(offs[r] - base) as usize..(offs[r + 1] - base) as usize]
                            .sort_unstable_by_key(key);
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn encode_decode_roundtrip() {
        for c in [0u32, 1, 2, 17, 1 << 30, (i32::MAX) as u32] {
            for neg in [false, true] {
                let v = encode(c, neg);
                assert_eq!(decode(v), (c, if neg { -1 } else { 1 }));
                assert_eq!(v < 0, neg);
            }
        }
        assert_eq!(encode(0, true), -1);
        assert_eq!(encode(5, true), -6);
        assert_eq!(encode_signed(5, -1), -6);
        assert_eq!(encode_signed(5, 1), 5);
        assert_eq!(negate(encode(3, false)), encode(3, true));
    }

    fn arb_tcsr() -> impl Strategy<Value = Tcsr> {
        (1usize..40, 1usize..40).prop_flat_map(|(nr, nc)| {
            proptest::collection::vec(
                proptest::collection::btree_set((0..nc as u32, any::<bool>()), 0..nc.min(8)),
                nr,
            )
            .prop_map(move |rows| {
                Tcsr::from_rows(
                    nc,
                    rows.into_iter().map(|set| {
                        let mut seen = std::collections::BTreeMap::new();
                        for (c, n) in set {
                            seen.entry(c).or_insert(n);
                        }
                        seen.into_iter()
                            .map(|(c, n)| (c, if n { -1 } else { 1 }))
                            .collect::<Vec<_>>()
                    }),
                )
                .unwrap()
            })
        })
    }

    proptest! {
        #[test]
        fn transpose_twice_is_identity(m in arb_tcsr()) {
            let t = m.transpose(Par::Seq);
            let tt = t.transpose(Par::Seq);
            prop_assert_eq!(tt, m.clone());
            prop_assert_eq!(t.to_dense(), transpose_dense(&m.to_dense(), m.ncols()));
        }

        #[test]
        fn transpose_seq_equals_rayon(m in arb_tcsr()) {
            prop_assert_eq!(m.transpose(Par::Seq), m.transpose(Par::Rayon));
        }

        #[test]
        fn uniform_row_len_by_blocks_equals_row_by_row(m in arb_tcsr()) {
            let k = m.row_len(0);
            let want = (0..m.nrows()).all(|r| m.row_len(r) == k).then_some(k);
            prop_assert_eq!(m.uniform_row_len(), want);
            prop_assert_eq!(m.uniform_row_len_with(Par::Seq), want);
            prop_assert_eq!(m.uniform_row_len_with(Par::Rayon), want);
        }
    }

    /// Rows of 3 over several blocks of the check, one row broken in one block at a time
    /// (first, middle and last offsets included).
    #[test]
    fn uniform_row_len_over_several_blocks() {
        let nr = 50_000usize;
        let cols: Vec<i32> = (0..nr).flat_map(|r| [0, 1 + (r % 3) as i32, 5]).collect();
        let offs: Vec<u32> = (0..=nr as u32).map(|r| 3 * r).collect();
        let m = Tcsr::new(7, offs.clone(), cols.clone()).unwrap();
        for par in [Par::Seq, Par::Rayon] {
            assert_eq!(m.uniform_row_len_with(par), Some(3));
        }
        for r in [0usize, 1, 16_383, 16_384, 16_385, 40_000, nr - 1] {
            // row r one entry shorter, row r + 1 (or r - 1) one longer: same nnz
            let mut o = offs.clone();
            if r + 1 < nr {
                o[r + 1] -= 1;
            } else {
                o[r] += 1;
            }
            let m = Tcsr::new(7, o, cols.clone());
            let Ok(m) = m else { continue };
            for par in [Par::Seq, Par::Rayon] {
                assert_eq!(m.uniform_row_len_with(par), None, "row {r}");
            }
        }
    }

    fn transpose_dense(d: &[Vec<i8>], ncols: usize) -> Vec<Vec<i8>> {
        (0..ncols)
            .map(|c| d.iter().map(|row| row[c]).collect())
            .collect()
    }

    #[test]
    fn rejects_bad_input() {
        assert!(matches!(
            Tcsr::new(2, vec![0, 1], vec![2]),
            Err(TcsrError::ColumnOutOfRange { .. })
        ));
        assert!(matches!(
            Tcsr::new(2, vec![0, 2], vec![1]),
            Err(TcsrError::OffsetsEnd { .. })
        ));
        assert!(matches!(
            Tcsr::new(2, vec![1, 1], vec![1]),
            Err(TcsrError::OffsetsNotMonotone { .. })
        ));
    }

    #[test]
    fn large_transpose_seq_equals_rayon() {
        // ragged rows, > 2^16 columns to exercise the parallel scan
        let nr = 50_000usize;
        let nc = 80_000usize;
        let rows = (0..nr).map(|r| {
            let len = (r * 31 % 7) as u32;
            (0..len)
                .map(move |k| {
                    (
                        ((r as u64 * 2654435761 + k as u64 * 97) % nc as u64) as u32,
                        if (r + k as usize) % 3 == 0 { -1 } else { 1 },
                    )
                })
                .collect::<std::collections::BTreeMap<u32, i32>>()
        });
        let m = Tcsr::from_rows(nc, rows).unwrap();
        assert_eq!(m.transpose(Par::Seq), m.transpose(Par::Rayon));
    }
}
