//! p-multigrid for Bernstein-Bézier elements of order `p >= 2` (dissertation §4.3): the
//! order-`p` level is smoothed on its own operator (Bin-BCSR*, filtered), the order-1 level
//! is handled by smoothed-aggregation AMG ([`crate::amg`]).
//!
//! The transfer is Bernstein degree elevation: an order-1 field on the mesh vertices has,
//! in the order-`p` BB basis, the coefficient `Σ_v (α_v / p) u_v` at the node with
//! multi-index `α` over its cell's vertices (the field's value at the control point), so
//! the prolongation `P` is exact for linear fields. It is passed in as a [`BlockCsr`]
//! (fine nodes × vertices, blocks `w I₃`; `tessera-fem` builds it from its node numbering).
//! Constrained DOFs are filtered out of `P` on both sides: `P̄ = S_p P S_1`. The order-1
//! operator is the Galerkin product `P̄ᵀ Ā_p P̄` (for nested spaces, the order-1 stiffness
//! matrix with the constraints applied).
//!
//! The cycle: Chebyshev pre-smoothing on the order-`p` level, restriction `P̄ᵀ r`, one AMG
//! cycle, prolongation, Chebyshev post-smoothing: symmetric, a valid PCG preconditioner.

use std::sync::Mutex;
use std::time::Instant;

use crate::amg::{galerkin, level_smoother, Amg, AmgParams};
use crate::blockcsr::{BlockCsr, B2};
use crate::constraints::Constraints;
use crate::error::SolveError;
use crate::jacobi::{identity_on_fixed, BlockJacobi};
use crate::operator::{BlockOperator, Preconditioner};
use crate::smoother::{lambda_max_estimate, LevelSmoother, Smoother};

/// A filtered operator `Ā x = S A x + (I − S) x` for vectors that vanish on the constrained
/// DOFs (then `Ā = S A S + (I − S)` exactly; every vector of the multigrid cycles does).
pub struct Filtered<'a, A: ?Sized> {
    pub a: &'a A,
    pub fixed: &'a [bool],
}

impl<A: BlockOperator + ?Sized> BlockOperator for Filtered<'_, A> {
    fn num_block_rows(&self) -> usize {
        self.a.num_block_rows()
    }
    fn block_size(&self) -> usize {
        self.a.block_size()
    }
    fn apply(&self, x: &[f64], y: &mut [f64]) {
        self.a.apply(x, y);
        for (i, &f) in self.fixed.iter().enumerate() {
            if f {
                y[i] = x[i];
            }
        }
    }
    fn diagonal_block(&self, i: usize, out: &mut [f64]) {
        let e = self.a.block_size();
        self.a.diagonal_block(i, out);
        identity_on_fixed(out, e, &self.fixed[i * e..(i + 1) * e]);
    }
    fn dot(&self, a: &[f64], b: &[f64]) -> f64 {
        self.a.dot(a, b)
    }
}

/// Knobs of p-multigrid: the AMG of the order-1 level and the smoother of the order-`p`
/// level.
#[derive(Clone, Debug, PartialEq)]
pub struct PmgParams {
    pub amg: AmgParams,
    /// Smoother on the order-`p` level.
    pub smoother: Smoother,
}

impl Default for PmgParams {
    fn default() -> Self {
        PmgParams {
            amg: AmgParams::default(),
            smoother: Smoother::Chebyshev { degree: 3 },
        }
    }
}

/// `P̄ = S_p P S_1`: the entries of the prolongation blocks in constrained rows (fine) or
/// columns (order 1) are zeroed.
pub fn filter_prolongation(p: &BlockCsr, fine_fixed: &[bool], coarse_fixed: &[bool]) -> BlockCsr {
    let mut out = p.clone();
    for i in 0..p.nrows {
        for k in p.row_range(i) {
            let j = p.cols[k] as usize;
            for r in 0..3 {
                for q in 0..3 {
                    if fine_fixed[3 * i + r] || coarse_fixed[3 * j + q] {
                        out.vals[k * B2 + r * 3 + q] = 0.0;
                    }
                }
            }
        }
    }
    out
}

/// p-multigrid over an order-`p` operator `A` (see the module docs).
pub struct PMultigrid<'a, A: BlockOperator + ?Sized> {
    fine: Filtered<'a, A>,
    dinv: BlockJacobi,
    /// Smoother of the order-`p` level.
    pub smoother: LevelSmoother,
    /// `λ_max(D⁻¹Ā_p)` as estimated.
    pub lambda: f64,
    /// `P̄` and `P̄ᵀ`.
    pub p: BlockCsr,
    pub r: BlockCsr,
    /// The AMG of the order-1 level.
    pub amg: Amg,
    /// Setup stages in run order (ms): fine smoother, Galerkin product, then the AMG's.
    pub setup_ms: Vec<(String, f64)>,
    scratch: Mutex<[Vec<f64>; 6]>,
}

impl<'a, A: BlockOperator + ?Sized> PMultigrid<'a, A> {
    /// Set up p-multigrid: `a` is the order-`p` operator (unfiltered) with its constraints,
    /// `a_filtered` the same as a filtered [`BlockCsr`] (for the Galerkin product; it may be
    /// dropped afterwards), `prolongation` the degree elevation (fine nodes × order-1
    /// nodes), `coarse_fixed` the constrained DOFs of the order-1 level and
    /// `coarse_positions` its node positions (for the rigid-body modes).
    pub fn setup(
        a: &'a A,
        cons: &'a Constraints,
        a_filtered: &BlockCsr,
        prolongation: &BlockCsr,
        coarse_fixed: &[bool],
        coarse_positions: &[[f64; 3]],
        params: &PmgParams,
    ) -> Result<Self, SolveError> {
        params.amg.validate()?;
        let n = a.num_block_rows();
        if a.block_size() != 3
            || prolongation.nrows != n
            || a_filtered.nrows != n
            || cons.fixed.len() != 3 * n
            || coarse_fixed.len() != 3 * prolongation.ncols
            || coarse_positions.len() != prolongation.ncols
        {
            return Err(SolveError::Dimension {
                expected: 3 * n,
                found: cons.fixed.len(),
            });
        }
        let mut setup_ms = Vec::new();
        let t = Instant::now();
        let fine = Filtered {
            a,
            fixed: &cons.fixed,
        };
        let dinv = BlockJacobi::new(a, cons)?;
        let lambda = lambda_max_estimate(&fine, &dinv, params.amg.eigen_steps, Some(&cons.fixed));
        let smoother = LevelSmoother {
            kind: params.smoother,
            ..level_smoother(&params.amg, lambda)
        };
        setup_ms.push(("fine_smoother".to_string(), ms(t)));
        let t = Instant::now();
        let p = filter_prolongation(prolongation, &cons.fixed, coarse_fixed);
        let (r, a1) = galerkin(a_filtered, &p)?;
        setup_ms.push(("galerkin_p".to_string(), ms(t)));
        let amg = Amg::setup(a1, coarse_fixed, coarse_positions, &params.amg)?;
        setup_ms.extend(amg.stats.setup_ms.iter().cloned());
        let nf = 3 * n;
        let nc = 3 * prolongation.ncols;
        Ok(PMultigrid {
            fine,
            dinv,
            smoother,
            lambda,
            p,
            r,
            amg,
            setup_ms,
            scratch: Mutex::new([
                vec![0.0; nf],
                vec![0.0; nf],
                vec![0.0; nf],
                vec![0.0; nf],
                vec![0.0; nc],
                vec![0.0; nc],
            ]),
        })
    }

    /// The inverted diagonal blocks of the order-`p` level (identity on constrained DOFs).
    pub fn fine_dinv(&self) -> &BlockJacobi {
        &self.dinv
    }

    /// Levels: the order-`p` level and the AMG's.
    pub fn num_levels(&self) -> usize {
        1 + self.amg.num_levels()
    }

    /// One cycle for `Ā x = b` from `x = 0`.
    pub fn cycle(&self, b: &[f64], x: &mut [f64]) {
        let mut s = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let [r, d, q, _, bc, xc] = &mut *s;
        self.smoother
            .smooth(&self.fine, &self.dinv, b, x, true, true, r, d, q);
        self.r.spmv(r, bc);
        self.amg.cycle(bc, xc);
        self.p.spmv_add(xc, x);
        self.smoother
            .smooth(&self.fine, &self.dinv, b, x, false, false, r, d, q);
    }
}

impl<A: BlockOperator + ?Sized> Preconditioner for PMultigrid<'_, A> {
    fn apply(&self, r: &[f64], z: &mut [f64]) {
        self.cycle(r, z);
    }
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
