//! Dense symmetric positive definite matrices: the coarsest level of the multigrid
//! hierarchy is solved with the explicit inverse from a Cholesky factorization, so the
//! coarse solve is one dense matrix-vector product (on a GPU too).

use crate::error::SolveError;

/// Cholesky factor `L` (row-major, lower triangle) of the `n × n` SPD matrix `a`; errors on a
/// non-positive pivot.
pub fn cholesky(a: &[f64], n: usize) -> Result<Vec<f64>, SolveError> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            if i == j {
                let scale = a[i * n + i].abs().max(f64::MIN_POSITIVE);
                if !(s > 1e-14 * scale) || !s.is_finite() {
                    return Err(SolveError::NotPositiveDefinite { index: i });
                }
                l[i * n + i] = s.sqrt();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    Ok(l)
}

/// The inverse of the SPD matrix `a` (`n × n`, row-major) as `L⁻ᵀ L⁻¹` from its Cholesky
/// factor; each pair `(i, j)`, `(j, i)` is computed once, so the result is exactly symmetric.
pub fn spd_inverse(a: &[f64], n: usize) -> Result<Vec<f64>, SolveError> {
    let l = cholesky(a, n)?;
    // L⁻¹ column by column (lower triangular), then A⁻¹ = L⁻ᵀ L⁻¹
    let mut li = vec![0.0; n * n];
    for c in 0..n {
        li[c * n + c] = 1.0 / l[c * n + c];
        for i in c + 1..n {
            let mut s = 0.0;
            for k in c..i {
                s -= l[i * n + k] * li[k * n + c];
            }
            li[i * n + c] = s / l[i * n + i];
        }
    }
    let mut x = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            // (L⁻ᵀ L⁻¹)_ij = Σ_k L⁻¹_ki L⁻¹_kj, k >= max(i, j) = i
            let mut s = 0.0;
            for k in i..n {
                s += li[k * n + i] * li[k * n + j];
            }
            x[i * n + j] = s;
            x[j * n + i] = s;
        }
    }
    Ok(x)
}

/// `y = X b` for a dense row-major `n × n` matrix.
pub fn dense_mv(x: &[f64], n: usize, b: &[f64], y: &mut [f64]) {
    for i in 0..n {
        let mut s = 0.0;
        for j in 0..n {
            s += x[i * n + j] * b[j];
        }
        y[i] = s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_of_spd() {
        let n = 7;
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = 1.0 / (1.0 + (i + j) as f64) + if i == j { 2.0 } else { 0.0 };
            }
        }
        let x = spd_inverse(&a, n).unwrap();
        for i in 0..n {
            for j in 0..n {
                let s: f64 = (0..n).map(|k| a[i * n + k] * x[k * n + j]).sum();
                assert!((s - if i == j { 1.0 } else { 0.0 }).abs() < 1e-12);
                assert_eq!(x[i * n + j], x[j * n + i]);
            }
        }
        a[3 * n + 3] = -1.0;
        assert!(spd_inverse(&a, n).is_err());
    }
}
