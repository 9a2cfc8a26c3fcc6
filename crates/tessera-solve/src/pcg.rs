//! Iterative solution of the static system K u = f (dissertation §4.1, §4.4.2).
//!
//! The solver is the modified preconditioned conjugate gradient method of Baraff and Witkin
//! [BW98] in the corrected form of Ascher and Boxerman [AB03]: Dirichlet constraints (per node
//! and per component) are applied by a *filter* `S` that zeroes constrained components, so the
//! matrix and its sparsity pattern stay unchanged (dissertation §4.4.2: "makes it possible to
//! implement constraints without having to remove the corresponding lines from the matrix").
//!
//! With prescribed values `z` on constrained components and `x₀ = z` (free components 0):
//!
//! ```text
//! r = S(b − A x)          c = S(P⁻¹ r)          δ = rᵀc
//! repeat: q = S(A c);  α = δ / cᵀq;  x += α c;  r −= α q
//!         s = S(P⁻¹ r);  δ' = rᵀs;  c = s + (δ'/δ) c;  δ = δ'
//! ```
//!
//! The preconditioner `P` is any [`Preconditioner`] that is symmetric positive definite on the
//! free DOFs: block Jacobi ([`pcg`]), or the multigrid cycles of [`crate::amg`] and
//! [`crate::pmg`] ([`pcg_with`]).
//!
//! Convergence: `‖r‖₂ ≤ tol · ‖S(b − A z)‖₂` (relative residual). The solver reports the
//! residual history and fails with a clear error on non-finite values, on loss of positive
//! definiteness (`cᵀq ≤ 0`, the sign of a singular, under-constrained system) and on divergence.

use rayon::prelude::*;

use crate::constraints::{filter, Constraints};
use crate::error::SolveError;
use crate::jacobi::BlockJacobi;
use crate::operator::{BlockOperator, Preconditioner};

/// Solver settings.
#[derive(Clone, Debug)]
pub struct PcgParams {
    /// Relative residual tolerance.
    pub tolerance: f64,
    /// Iteration limit.
    pub max_iterations: usize,
    /// Fail when the residual grows beyond this factor of the initial residual.
    pub divergence_factor: f64,
}

impl Default for PcgParams {
    fn default() -> Self {
        PcgParams {
            tolerance: 1e-8,
            max_iterations: 10_000,
            divergence_factor: 1e8,
        }
    }
}

/// Outcome of a converged solve.
#[derive(Clone, Debug)]
pub struct SolveReport {
    pub iterations: usize,
    /// Final relative residual.
    pub final_residual: f64,
    /// Relative residual after each iteration (index 0: initial, = 1).
    pub history: Vec<f64>,
}

/// Check the lengths of `b` and the constraints against the operator, and that something is
/// fixed.
pub fn check_system(n: usize, b: &[f64], cons: &Constraints) -> Result<(), SolveError> {
    for len in [b.len(), cons.fixed.len(), cons.values.len()] {
        if len != n {
            return Err(SolveError::Dimension {
                expected: n,
                found: len,
            });
        }
    }
    if cons.num_fixed() == 0 {
        return Err(SolveError::Unconstrained);
    }
    Ok(())
}

/// Solve `A x = b` with Dirichlet constraints by filtered block-Jacobi PCG.
/// On success `x` holds the solution (prescribed values on constrained DOFs).
pub fn pcg<A: BlockOperator + ?Sized>(
    a: &A,
    b: &[f64],
    cons: &Constraints,
    params: &PcgParams,
    x: &mut Vec<f64>,
) -> Result<SolveReport, SolveError> {
    check_system(a.num_dofs(), b, cons)?;
    let prec = BlockJacobi::new(a, cons)?;
    pcg_with(a, &prec, b, cons, params, x, &mut |_, _| {})
}

/// Solve `A x = b` with Dirichlet constraints by filtered PCG with the preconditioner `m`.
/// `monitor(iteration, relative residual)` is called after every iteration. On success `x`
/// holds the solution (prescribed values on constrained DOFs).
pub fn pcg_with<A: BlockOperator + ?Sized, M: Preconditioner + ?Sized>(
    a: &A,
    m: &M,
    b: &[f64],
    cons: &Constraints,
    params: &PcgParams,
    x: &mut Vec<f64>,
    monitor: &mut dyn FnMut(usize, f64),
) -> Result<SolveReport, SolveError> {
    let n = a.num_dofs();
    check_system(n, b, cons)?;
    *x = cons.start_vector();
    let mut r = vec![0.0; n];
    a.apply(x, &mut r);
    r.par_iter_mut()
        .zip(b.par_iter())
        .for_each(|(ri, bi)| *ri = bi - *ri);
    filter(&mut r, &cons.fixed);
    let r0 = a.dot(&r, &r).sqrt();
    let mut history = vec![1.0];
    if !r0.is_finite() {
        return Err(SolveError::NonFinite {
            what: "initial residual",
            iteration: 0,
        });
    }
    if r0 == 0.0 {
        return Ok(SolveReport {
            iterations: 0,
            final_residual: 0.0,
            history,
        });
    }
    let mut c = vec![0.0; n];
    m.apply(&r, &mut c);
    filter(&mut c, &cons.fixed);
    let mut delta = a.dot(&r, &c);
    let mut q = vec![0.0; n];
    let mut s = vec![0.0; n];
    for it in 1..=params.max_iterations {
        a.apply(&c, &mut q);
        filter(&mut q, &cons.fixed);
        let cq = a.dot(&c, &q);
        if !cq.is_finite() {
            return Err(SolveError::NonFinite {
                what: "search direction",
                iteration: it,
            });
        }
        if cq <= 0.0 {
            return Err(SolveError::Singular {
                iteration: it,
                value: cq,
            });
        }
        let alpha = delta / cq;
        x.par_iter_mut()
            .zip(c.par_iter())
            .for_each(|(xi, ci)| *xi += alpha * ci);
        r.par_iter_mut()
            .zip(q.par_iter())
            .for_each(|(ri, qi)| *ri -= alpha * qi);
        let rel = a.dot(&r, &r).sqrt() / r0;
        history.push(rel);
        monitor(it, rel);
        crate::monitor::report(it, rel);
        if !rel.is_finite() {
            return Err(SolveError::NonFinite {
                what: "residual",
                iteration: it,
            });
        }
        if rel <= params.tolerance {
            return Ok(SolveReport {
                iterations: it,
                final_residual: rel,
                history,
            });
        }
        if rel > params.divergence_factor {
            return Err(SolveError::Diverged {
                iteration: it,
                residual: rel,
            });
        }
        m.apply(&r, &mut s);
        filter(&mut s, &cons.fixed);
        let delta_new = a.dot(&r, &s);
        let beta = delta_new / delta;
        delta = delta_new;
        c.par_iter_mut()
            .zip(s.par_iter())
            .for_each(|(ci, si)| *ci = si + beta * *ci);
    }
    let residual = *history.last().unwrap();
    Err(SolveError::NotConverged {
        iterations: params.max_iterations,
        residual,
        tolerance: params.tolerance,
    })
}

/// `‖S(f − K u)‖ / ‖S(f − K z)‖` with `z` the prescribed values (the PCG's measure).
pub fn relative_residual<A: BlockOperator + ?Sized>(
    a: &A,
    f: &[f64],
    cons: &Constraints,
    u: &[f64],
) -> f64 {
    let n = f.len();
    let mut y = vec![0.0; n];
    a.apply(u, &mut y);
    let r: f64 = (0..n)
        .filter(|&i| !cons.fixed[i])
        .map(|i| (f[i] - y[i]).powi(2))
        .sum::<f64>()
        .sqrt();
    let z = cons.start_vector();
    a.apply(&z, &mut y);
    let r0: f64 = (0..n)
        .filter(|&i| !cons.fixed[i])
        .map(|i| (f[i] - y[i]).powi(2))
        .sum::<f64>()
        .sqrt();
    if r0 == 0.0 {
        r
    } else {
        r / r0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1D chain of springs with e = 2 blocks (two decoupled chains), dense for the test.
    struct Dense {
        n: usize,
        e: usize,
        a: Vec<f64>,
    }
    impl BlockOperator for Dense {
        fn num_block_rows(&self) -> usize {
            self.n
        }
        fn block_size(&self) -> usize {
            self.e
        }
        fn apply(&self, x: &[f64], y: &mut [f64]) {
            let m = self.n * self.e;
            for i in 0..m {
                y[i] = (0..m).map(|j| self.a[i * m + j] * x[j]).sum();
            }
        }
        fn diagonal_block(&self, i: usize, out: &mut [f64]) {
            let m = self.n * self.e;
            for r in 0..self.e {
                for c in 0..self.e {
                    out[r * self.e + c] = self.a[(i * self.e + r) * m + i * self.e + c];
                }
            }
        }
    }

    fn chain(n: usize) -> Dense {
        let e = 2;
        let m = n * e;
        let mut a = vec![0.0; m * m];
        for k in 0..n - 1 {
            for comp in 0..e {
                let (i, j) = (k * e + comp, (k + 1) * e + comp);
                let s = 1.0 + comp as f64;
                a[i * m + i] += s;
                a[j * m + j] += s;
                a[i * m + j] -= s;
                a[j * m + i] -= s;
            }
        }
        Dense { n, e, a }
    }

    #[test]
    fn filtered_pcg_solves_spring_chain() {
        let n = 20;
        let a = chain(n);
        let mut cons = Constraints::none(n * 2);
        cons.fix(0, 2, 0, 0.0);
        cons.fix(0, 2, 1, 0.5);
        let mut b = vec![0.0; n * 2];
        b[(n - 1) * 2] = 1.0; // unit force on the last node, component 0
        let mut x = Vec::new();
        let rep = pcg(
            &a,
            &b,
            &cons,
            &PcgParams {
                tolerance: 1e-12,
                ..Default::default()
            },
            &mut x,
        )
        .unwrap();
        // exact: component 0 displacement grows by 1/k per spring (k = 1), component 1 rigidly 0.5
        for i in 0..n {
            assert!((x[i * 2] - i as f64).abs() < 1e-9, "node {i}: {}", x[i * 2]);
            assert!((x[i * 2 + 1] - 0.5).abs() < 1e-9);
        }
        assert!(rep.final_residual <= 1e-12);
        assert_eq!(rep.history.len(), rep.iterations + 1);
        assert!(relative_residual(&a, &b, &cons, &x) <= 1e-10);
    }

    #[test]
    fn unconstrained_and_underconstrained_are_errors() {
        let n = 5;
        let a = chain(n);
        let b = vec![1.0; n * 2];
        let mut x = Vec::new();
        assert!(matches!(
            pcg(
                &a,
                &b,
                &Constraints::none(n * 2),
                &PcgParams::default(),
                &mut x
            ),
            Err(SolveError::Unconstrained)
        ));
        let mut cons = Constraints::none(n * 2);
        cons.fix(0, 2, 0, 0.0); // component 1 free: singular
        let b: Vec<f64> = (0..n * 2)
            .map(|i| if i % 2 == 1 { (i as f64) - 4.0 } else { 0.0 })
            .collect();
        let r = pcg(&a, &b, &cons, &PcgParams::default(), &mut x);
        assert!(r.is_err(), "{r:?}");
    }
}
