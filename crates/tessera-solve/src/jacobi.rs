//! Block-Jacobi preconditioning: the inverses of the `e × e` diagonal blocks that Bin-BCSR*
//! stores separately (dissertation §4.4.2).

use rayon::prelude::*;

use crate::constraints::Constraints;
use crate::error::SolveError;
use crate::operator::{BlockOperator, Preconditioner};

/// Block-Jacobi preconditioner with constrained rows/columns replaced by the identity: the
/// inverse of the block diagonal of `S A S + (I − S)`.
pub struct BlockJacobi {
    e: usize,
    inv: Vec<f64>,
}

impl BlockJacobi {
    /// Invert the diagonal blocks of `a` (constrained rows and columns replaced by the
    /// identity first). Errors: a singular block.
    pub fn new<A: BlockOperator + ?Sized>(a: &A, cons: &Constraints) -> Result<Self, SolveError> {
        let e = a.block_size();
        let n = a.num_block_rows();
        let inv: Vec<Result<Vec<f64>, SolveError>> = (0..n)
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| {
                let mut b = vec![0.0; e * e];
                a.diagonal_block(i, &mut b);
                identity_on_fixed(&mut b, e, &cons.fixed[i * e..(i + 1) * e]);
                invert_small(&b, e).ok_or(SolveError::SingularBlock { node: i })
            })
            .collect();
        let mut flat = Vec::with_capacity(n * e * e);
        for r in inv {
            flat.extend(r?);
        }
        Ok(BlockJacobi { e, inv: flat })
    }

    /// From already inverted blocks (`e²` per block row, row-major).
    pub fn from_inverses(e: usize, inv: Vec<f64>) -> Self {
        BlockJacobi { e, inv }
    }

    /// The inverted blocks, `e²` per block row.
    pub fn inverses(&self) -> &[f64] {
        &self.inv
    }

    /// Block size.
    pub fn block_size(&self) -> usize {
        self.e
    }
}

impl Preconditioner for BlockJacobi {
    /// `z = P⁻¹ r`.
    fn apply(&self, r: &[f64], z: &mut [f64]) {
        let e = self.e;
        z.par_chunks_mut(e)
            .with_min_len(512)
            .zip(r.par_chunks(e))
            .zip(self.inv.par_chunks(e * e))
            .for_each(|((zb, rb), m)| {
                for i in 0..e {
                    let mut s = 0.0;
                    for j in 0..e {
                        s += m[i * e + j] * rb[j];
                    }
                    zb[i] = s;
                }
            });
    }
}

/// Replace row and column `c` of the `e × e` block `b` by those of the identity for every
/// constrained component `c` (`fixed` has `e` entries).
pub fn identity_on_fixed(b: &mut [f64], e: usize, fixed: &[bool]) {
    for c in 0..e {
        if fixed[c] {
            for k in 0..e {
                b[c * e + k] = 0.0;
                b[k * e + c] = 0.0;
            }
            b[c * e + c] = 1.0;
        }
    }
}

/// Inverse of a small dense matrix (Gauss-Jordan with partial pivoting); `None` if singular.
pub fn invert_small(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut m = a.to_vec();
    let mut inv = vec![0.0; n * n];
    for i in 0..n {
        inv[i * n + i] = 1.0;
    }
    let scale = a.iter().fold(0.0f64, |s, v| s.max(v.abs()));
    if !(scale > 0.0) || !scale.is_finite() {
        return None;
    }
    for col in 0..n {
        let piv =
            (col..n).max_by(|&i, &j| m[i * n + col].abs().total_cmp(&m[j * n + col].abs()))?;
        if m[piv * n + col].abs() <= 1e-14 * scale {
            return None;
        }
        if piv != col {
            for k in 0..n {
                m.swap(piv * n + k, col * n + k);
                inv.swap(piv * n + k, col * n + k);
            }
        }
        let d = 1.0 / m[col * n + col];
        for k in 0..n {
            m[col * n + k] *= d;
            inv[col * n + k] *= d;
        }
        for r in 0..n {
            if r != col {
                let f = m[r * n + col];
                if f != 0.0 {
                    for k in 0..n {
                        m[r * n + k] -= f * m[col * n + k];
                        inv[r * n + k] -= f * inv[col * n + k];
                    }
                }
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invert_small_matches_identity() {
        let a = [4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0];
        let inv = invert_small(&a, 3).unwrap();
        for i in 0..3 {
            for j in 0..3 {
                let s: f64 = (0..3).map(|k| a[i * 3 + k] * inv[k * 3 + j]).sum();
                assert!((s - if i == j { 1.0 } else { 0.0 }).abs() < 1e-14);
            }
        }
        assert!(invert_small(&[1.0, 2.0, 2.0, 4.0], 2).is_none());
    }
}
