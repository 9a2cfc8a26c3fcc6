//! Smoothers of the multigrid cycles: Chebyshev polynomials in the block-Jacobi
//! preconditioned operator `D⁻¹A`, and damped block Jacobi.
//!
//! Both are polynomials `q(D⁻¹A)` in the error propagation, and `D⁻¹A` is self-adjoint in
//! the `A` inner product, so the same smoother before and after the coarse correction gives
//! a symmetric cycle (a valid PCG preconditioner).
//!
//! Chebyshev (Adams, Brezina, Hu and Tuminaro 2003; Saad, Algorithm 12.1) targets the
//! interval `[λ_max / ratio, λ_max]` of `D⁻¹A`. `λ_max` comes from a few steps of
//! block-Jacobi preconditioned CG: its Lanczos tridiagonal matrix has Ritz values that
//! approach the extreme eigenvalues from inside, so the largest is scaled by a safety
//! factor (PETSc GAMG's recipe).

use rayon::prelude::*;

use crate::jacobi::BlockJacobi;
use crate::operator::{BlockOperator, Preconditioner};

/// Which smoother, with its knobs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Smoother {
    /// Chebyshev polynomial of this degree (matrix-vector products per application).
    Chebyshev { degree: usize },
    /// `sweeps` steps of `x += ω D⁻¹ (b − A x)`.
    Jacobi { sweeps: usize, omega: f64 },
}

impl Default for Smoother {
    fn default() -> Self {
        Smoother::Chebyshev { degree: 2 }
    }
}

impl Smoother {
    /// Name as in the problem file.
    pub fn name(&self) -> &'static str {
        match self {
            Smoother::Chebyshev { .. } => "chebyshev",
            Smoother::Jacobi { .. } => "jacobi",
        }
    }
}

/// A smoother bound to one level: the kind, the Chebyshev interval of `D⁻¹A`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LevelSmoother {
    pub kind: Smoother,
    /// Upper end of the Chebyshev interval (safety factor applied).
    pub lmax: f64,
    /// Lower end of the Chebyshev interval.
    pub lmin: f64,
}

impl LevelSmoother {
    /// The coefficients of the Chebyshev recurrence for step `k` (0-based) of `degree`:
    /// `(ρ_k ρ_{k-1}, 2 ρ_k / δ)`; step 0 is `(0, 1/θ)`.
    pub fn chebyshev_coefficients(&self, degree: usize) -> Vec<(f64, f64)> {
        let theta = 0.5 * (self.lmax + self.lmin);
        let delta = 0.5 * (self.lmax - self.lmin);
        let sigma = theta / delta;
        let mut rho = 1.0 / sigma;
        let mut out = vec![(0.0, 1.0 / theta)];
        for _ in 1..degree {
            let rho_new = 1.0 / (2.0 * sigma - rho);
            out.push((rho_new * rho, 2.0 * rho_new / delta));
            rho = rho_new;
        }
        out
    }

    /// Smooth `A x = b`. With `zero_start`, `x` is taken as 0 on entry (and overwritten).
    /// On return `r = b − A x` when `want_residual` (otherwise `r` is scratch). `d`, `z`, `q`
    /// are scratch vectors of the level's length.
    #[allow(clippy::too_many_arguments)]
    pub fn smooth<A: BlockOperator + ?Sized>(
        &self,
        a: &A,
        dinv: &BlockJacobi,
        b: &[f64],
        x: &mut [f64],
        zero_start: bool,
        want_residual: bool,
        r: &mut [f64],
        d: &mut [f64],
        q: &mut [f64],
    ) {
        if zero_start {
            r.copy_from_slice(b);
            x.fill(0.0);
        } else {
            a.apply(x, q);
            sub(b, q, r);
        }
        let steps: Vec<(f64, f64)> = match self.kind {
            Smoother::Chebyshev { degree } => self.chebyshev_coefficients(degree.max(1)),
            Smoother::Jacobi { sweeps, omega } => vec![(0.0, omega); sweeps.max(1)],
        };
        let last = steps.len() - 1;
        for (k, &(c_old, c_new)) in steps.iter().enumerate() {
            // d = c_old d + c_new D⁻¹ r ; x += d
            dinv.apply(r, q);
            d.par_iter_mut()
                .with_min_len(4096)
                .zip(q.par_iter())
                .zip(x.par_iter_mut())
                .for_each(|((di, qi), xi)| {
                    *di = c_old * *di + c_new * qi;
                    *xi += *di;
                });
            if k < last || want_residual {
                // r -= A d
                a.apply(d, q);
                r.par_iter_mut()
                    .with_min_len(4096)
                    .zip(q.par_iter())
                    .for_each(|(ri, qi)| *ri -= qi);
            }
        }
    }

    /// Matrix-vector products of one application (`zero_start`, with or without the
    /// residual).
    pub fn products(&self, zero_start: bool, want_residual: bool) -> usize {
        let k = match self.kind {
            Smoother::Chebyshev { degree } => degree.max(1),
            Smoother::Jacobi { sweeps, .. } => sweeps.max(1),
        };
        k - 1 + usize::from(want_residual) + usize::from(!zero_start)
    }
}

fn sub(a: &[f64], b: &[f64], out: &mut [f64]) {
    out.par_iter_mut()
        .with_min_len(4096)
        .zip(a.par_iter().zip(b.par_iter()))
        .for_each(|(o, (x, y))| *o = x - y);
}

/// The deterministic start vector of the eigenvalue estimate: values in `[-1, 1)` from a
/// hash of the index, zero where `fixed`.
pub fn start_vector(n: usize, fixed: Option<&[bool]>) -> Vec<f64> {
    (0..n)
        .map(|i| {
            if fixed.is_some_and(|f| f[i]) {
                0.0
            } else {
                let h = crate::aggregation::node_hash(i as u32 ^ 0x5bd1_e995);
                (h as f64) / (1u64 << 29) as f64 - 1.0
            }
        })
        .collect()
}

/// Estimate of `λ_max(D⁻¹A)` from `steps` steps of block-Jacobi preconditioned CG (the
/// largest Ritz value of its Lanczos matrix), without safety factor. `fixed` DOFs are kept
/// at zero (the operator must be the filtered one).
pub fn lambda_max_estimate<A: BlockOperator + ?Sized>(
    a: &A,
    dinv: &BlockJacobi,
    steps: usize,
    fixed: Option<&[bool]>,
) -> f64 {
    let n = a.num_dofs();
    let mut r = start_vector(n, fixed);
    let mut z = vec![0.0; n];
    let mut q = vec![0.0; n];
    dinv.apply(&r, &mut z);
    let mut p = z.clone();
    let mut rz = a.dot(&r, &z);
    let mut alphas: Vec<f64> = Vec::new();
    let mut betas: Vec<f64> = Vec::new();
    for _ in 0..steps.max(1) {
        if !(rz > 0.0) {
            break;
        }
        a.apply(&p, &mut q);
        let pq = a.dot(&p, &q);
        if !(pq > 0.0) {
            break;
        }
        let alpha = rz / pq;
        r.par_iter_mut()
            .with_min_len(4096)
            .zip(q.par_iter())
            .for_each(|(ri, qi)| *ri -= alpha * qi);
        dinv.apply(&r, &mut z);
        let rz_new = a.dot(&r, &z);
        let beta = rz_new / rz;
        alphas.push(alpha);
        betas.push(beta);
        p.par_iter_mut()
            .with_min_len(4096)
            .zip(z.par_iter())
            .for_each(|(pi, zi)| *pi = zi + beta * *pi);
        rz = rz_new;
    }
    lanczos_max(&alphas, &betas)
}

/// The largest eigenvalue of the Lanczos tridiagonal matrix of CG with coefficients
/// `alphas`, `betas`: `T_kk = 1/α_k + β_{k-1}/α_{k-1}`, `T_k,k+1 = √β_k / α_k`
/// (bisection on the Sturm sequence).
pub fn lanczos_max(alphas: &[f64], betas: &[f64]) -> f64 {
    let m = alphas.len();
    if m == 0 {
        return 1.0;
    }
    let diag: Vec<f64> = (0..m)
        .map(|k| {
            1.0 / alphas[k]
                + if k > 0 {
                    betas[k - 1] / alphas[k - 1]
                } else {
                    0.0
                }
        })
        .collect();
    let off: Vec<f64> = (0..m.saturating_sub(1))
        .map(|k| betas[k].sqrt() / alphas[k])
        .collect();
    // Gershgorin bounds
    let mut hi = f64::MIN;
    let mut lo = f64::MAX;
    for k in 0..m {
        let rad = if k > 0 { off[k - 1].abs() } else { 0.0 } + off.get(k).map_or(0.0, |v| v.abs());
        hi = hi.max(diag[k] + rad);
        lo = lo.min(diag[k] - rad);
    }
    // number of eigenvalues < x (Sturm count of T − x I)
    let count = |x: f64| -> usize {
        let mut c = 0;
        let mut d = 1.0f64;
        for k in 0..m {
            let o2 = if k > 0 { off[k - 1] * off[k - 1] } else { 0.0 };
            d = diag[k] - x - if k > 0 { o2 / d } else { 0.0 };
            if d == 0.0 {
                d = -1e-300;
            }
            if d < 0.0 {
                c += 1;
            }
        }
        c
    };
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if count(mid) < m {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanczos_of_diagonal_system() {
        // CG on diag(1..=5) with the identity preconditioner: after 5 steps the Ritz values
        // are the eigenvalues
        struct Diag;
        impl BlockOperator for Diag {
            fn num_block_rows(&self) -> usize {
                5
            }
            fn block_size(&self) -> usize {
                1
            }
            fn apply(&self, x: &[f64], y: &mut [f64]) {
                for i in 0..5 {
                    y[i] = (i + 1) as f64 * x[i];
                }
            }
            fn diagonal_block(&self, _i: usize, out: &mut [f64]) {
                out[0] = 1.0;
            }
        }
        let dinv = BlockJacobi::from_inverses(1, vec![1.0; 5]);
        let l = lambda_max_estimate(&Diag, &dinv, 5, None);
        assert!((l - 5.0).abs() < 1e-8, "{l}");
        let l3 = lambda_max_estimate(&Diag, &dinv, 3, None);
        assert!(l3 <= 5.0 + 1e-12 && l3 > 4.0, "{l3}");
    }
}
