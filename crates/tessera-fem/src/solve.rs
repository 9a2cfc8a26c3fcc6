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
//! The preconditioner `P` is block Jacobi: the inverses of the `e × e` diagonal blocks that
//! Bin-BCSR* stores separately. For a constrained component the block's row and column are
//! replaced by the identity before inversion, which is the block diagonal of `S A S + (I − S)`.
//!
//! Convergence: `‖r‖₂ ≤ tol · ‖S(b − A z)‖₂` (relative residual). The solver reports the
//! residual history and fails with a clear error on non-finite values, on loss of positive
//! definiteness (`cᵀq ≤ 0`, the sign of a singular, under-constrained system) and on divergence.

use rayon::prelude::*;

/// A symmetric linear operator made of `e × e` blocks, as the solver needs it.
pub trait BlockOperator: Sync {
    /// Number of block rows (nodes).
    fn num_block_rows(&self) -> usize;
    /// Block size `e` (DOFs per node).
    fn block_size(&self) -> usize;
    /// `y = A x` (scalar vectors of length `num_block_rows() * block_size()`, node-major).
    fn apply(&self, x: &[f64], y: &mut [f64]);
    /// The diagonal block of node `i`, row-major, into `out` (`e * e` values).
    fn diagonal_block(&self, i: usize, out: &mut [f64]);
}

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

/// Dirichlet constraints: a mask per scalar DOF and the prescribed values.
#[derive(Clone, Debug, Default)]
pub struct Constraints {
    /// `true` where the DOF is prescribed.
    pub fixed: Vec<bool>,
    /// Prescribed values (ignored where `fixed` is false).
    pub values: Vec<f64>,
}

impl Constraints {
    /// No constraints on `n` DOFs.
    pub fn none(n: usize) -> Self {
        Constraints {
            fixed: vec![false; n],
            values: vec![0.0; n],
        }
    }
    /// Fix component `comp` of node `node` (block size `e`) to `value`.
    pub fn fix(&mut self, node: usize, e: usize, comp: usize, value: f64) {
        self.fixed[node * e + comp] = true;
        self.values[node * e + comp] = value;
    }
    /// Number of fixed DOFs.
    pub fn num_fixed(&self) -> usize {
        self.fixed.iter().filter(|&&f| f).count()
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

/// Solver failures.
#[derive(Debug, thiserror::Error)]
pub enum SolveError {
    #[error("vector length {found} does not match the operator's {expected} DOFs")]
    Dimension { expected: usize, found: usize },
    #[error("the problem is unconstrained: no Dirichlet DOF is fixed, so the stiffness matrix is singular (rigid-body modes); fix some boundary region")]
    Unconstrained,
    /// The fixed DOFs leave rigid-body motions of the body unconstrained.
    #[error("the stiffness matrix is singular: the constraints leave rigid-body modes free ({free}: {modes}); fix more components or regions")]
    RigidModesFree { free: usize, modes: String },
    #[error("the system is singular on the free DOFs (cᵀAc = {value:e} at iteration {iteration}): the constraints do not remove all rigid-body modes, or the material is invalid")]
    Singular { iteration: usize, value: f64 },
    #[error("the stiffness matrix on the free DOFs is not positive definite (Cholesky pivot {index}): the constraints do not remove all rigid-body modes")]
    NotPositiveDefinite { index: usize },
    #[error("diagonal block of node {node} is singular: a node with no stiffness (unused node or zero material)")]
    SingularBlock { node: usize },
    #[error("non-finite value in the {what} at iteration {iteration}")]
    NonFinite {
        what: &'static str,
        iteration: usize,
    },
    #[error("PCG diverged: relative residual {residual:e} at iteration {iteration}")]
    Diverged { iteration: usize, residual: f64 },
    #[error("PCG did not converge in {iterations} iterations: relative residual {residual:e} > tolerance {tolerance:e}")]
    NotConverged {
        iterations: usize,
        residual: f64,
        tolerance: f64,
    },
}

/// Block-Jacobi preconditioner with constrained rows/columns replaced by the identity.
pub struct BlockJacobi {
    e: usize,
    inv: Vec<f64>,
}

impl BlockJacobi {
    pub fn new<A: BlockOperator + ?Sized>(a: &A, cons: &Constraints) -> Result<Self, SolveError> {
        let e = a.block_size();
        let n = a.num_block_rows();
        let inv: Vec<Result<Vec<f64>, SolveError>> = (0..n)
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| {
                let mut b = vec![0.0; e * e];
                a.diagonal_block(i, &mut b);
                for c in 0..e {
                    if cons.fixed[i * e + c] {
                        for k in 0..e {
                            b[c * e + k] = 0.0;
                            b[k * e + c] = 0.0;
                        }
                        b[c * e + c] = 1.0;
                    }
                }
                invert_small(&b, e).ok_or(SolveError::SingularBlock { node: i })
            })
            .collect();
        let mut flat = Vec::with_capacity(n * e * e);
        for r in inv {
            flat.extend(r?);
        }
        Ok(BlockJacobi { e, inv: flat })
    }

    /// `y = P⁻¹ x`.
    pub fn apply(&self, x: &[f64], y: &mut [f64]) {
        let e = self.e;
        y.par_chunks_mut(e)
            .zip(x.par_chunks(e))
            .zip(self.inv.par_chunks(e * e))
            .for_each(|((yb, xb), m)| {
                for r in 0..e {
                    let mut s = 0.0;
                    for c in 0..e {
                        s += m[r * e + c] * xb[c];
                    }
                    yb[r] = s;
                }
            });
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

fn dot(a: &[f64], b: &[f64]) -> f64 {
    // fixed chunking so the sum is deterministic regardless of thread count
    a.par_chunks(8192)
        .zip(b.par_chunks(8192))
        .map(|(x, y)| x.iter().zip(y).map(|(p, q)| p * q).sum::<f64>())
        .collect::<Vec<_>>()
        .iter()
        .sum()
}

fn filter(v: &mut [f64], fixed: &[bool]) {
    v.par_iter_mut().zip(fixed.par_iter()).for_each(|(x, &f)| {
        if f {
            *x = 0.0
        }
    });
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
    let n = a.num_block_rows() * a.block_size();
    for (len, _) in [
        (b.len(), "b"),
        (cons.fixed.len(), "fixed"),
        (cons.values.len(), "values"),
    ] {
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
    let prec = BlockJacobi::new(a, cons)?;
    x.clear();
    x.extend((0..n).map(|i| if cons.fixed[i] { cons.values[i] } else { 0.0 }));
    let mut r = vec![0.0; n];
    a.apply(x, &mut r);
    r.par_iter_mut()
        .zip(b.par_iter())
        .for_each(|(ri, bi)| *ri = bi - *ri);
    filter(&mut r, &cons.fixed);
    let r0 = dot(&r, &r).sqrt();
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
    prec.apply(&r, &mut c);
    filter(&mut c, &cons.fixed);
    let mut delta = dot(&r, &c);
    let mut q = vec![0.0; n];
    let mut s = vec![0.0; n];
    for it in 1..=params.max_iterations {
        a.apply(&c, &mut q);
        filter(&mut q, &cons.fixed);
        let cq = dot(&c, &q);
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
        let rel = dot(&r, &r).sqrt() / r0;
        history.push(rel);
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
        prec.apply(&r, &mut s);
        filter(&mut s, &cons.fixed);
        let delta_new = dot(&r, &s);
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
