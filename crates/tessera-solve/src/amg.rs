//! Smoothed-aggregation algebraic multigrid for 3D elasticity on node blocks (Vaněk, Mandel
//! and Brezina 1996), with the six rigid-body modes as near-null space: the preconditioner
//! of the static solve `K u = f` (dissertation §4.1) where block Jacobi needs thousands of
//! iterations.
//!
//! Setup, level by level, on the filtered operator `Ā = S A S + (I − S)` (constrained DOFs
//! decoupled, [`BlockCsr::from_binbcsr_filtered`]):
//!
//! 1. strength graph on node blocks and MIS(2) aggregation ([`crate::aggregation`]);
//! 2. tentative prolongator `P̂` by a QR factorization of the near-null space `B` restricted
//!    to each aggregate: `B_agg = Q R`, the rows of `P̂` are `Q`, the coarse near-null space
//!    is `R` ([`tentative_prolongator`]); `P̂ B_c = B` exactly, so the rigid-body modes are
//!    interpolated exactly. With six modes an aggregate becomes 6 coarse DOFs: two coarse
//!    `3 × 3` block rows;
//! 3. `λ_max(D⁻¹Ā)` by a few Lanczos (CG) steps, and the Jacobi-smoothed prolongator
//!    `P = (I − ω D⁻¹ Ā) P̂` with `ω = 4 / (3 λ_max)` ([`smooth_prolongator`]);
//! 4. the Galerkin operator `A_c = Pᵀ Ā P` in block form ([`galerkin`]), made exactly
//!    symmetric; coarse DOFs that interpolate nothing (rank-deficient aggregates) get a unit
//!    diagonal;
//! 5. repeat until at most [`AmgParams::coarse_size`] DOFs remain; the coarsest operator is
//!    inverted densely ([`crate::dense::spd_inverse`]).
//!
//! The cycle ([`Amg::cycle`]): Chebyshev (or damped block-Jacobi) pre-smoothing from zero,
//! restriction `Pᵀ r`, the coarse cycle (once for a V-cycle, twice for a W-cycle), prolongation,
//! the same smoother again. It is symmetric positive definite, so it preconditions PCG
//! ([`Preconditioner`]).

use std::sync::Mutex;
use std::time::Instant;

use rayon::prelude::*;

use crate::aggregation::{aggregate_mis2, strength_graph, Aggregates, NONE};
use crate::blockcsr::{block_mul_add, offsets, BlockCsr, B2};
use crate::dense::{dense_mv, spd_inverse};
use crate::error::SolveError;
use crate::jacobi::{invert_small, BlockJacobi};
use crate::nullspace::{rigid_body_modes, NearNullSpace};
use crate::operator::Preconditioner;
use crate::smoother::{lambda_max_estimate, LevelSmoother, Smoother};

/// Multigrid cycle shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Cycle {
    /// One coarse visit per level.
    #[default]
    V,
    /// Two coarse visits per level.
    W,
}

impl Cycle {
    /// Name as in the problem file.
    pub fn name(self) -> &'static str {
        match self {
            Cycle::V => "v",
            Cycle::W => "w",
        }
    }
}

/// Knobs of the AMG setup and cycle, with the defaults that work for elasticity.
#[derive(Clone, Debug, PartialEq)]
pub struct AmgParams {
    /// Strength threshold `θ` (see [`crate::aggregation`]).
    pub strength: f64,
    /// Smoother on every level but the coarsest.
    pub smoother: Smoother,
    /// The coarsest level has at most this many DOFs (inverted densely).
    pub coarse_size: usize,
    /// Levels at most (the coarsest included).
    pub max_levels: usize,
    /// V- or W-cycle.
    pub cycle: Cycle,
    /// `ω λ_max(D⁻¹A)` of the prolongator smoothing (4/3).
    pub prolongation_damping: f64,
    /// CG steps of the `λ_max(D⁻¹A)` estimate.
    pub eigen_steps: usize,
    /// The Chebyshev interval is `[λ / ratio, λ]`.
    pub chebyshev_ratio: f64,
    /// Safety factor on the estimated `λ_max` for the smoother.
    pub chebyshev_safety: f64,
    /// Near-null space interpolated exactly.
    pub near_null_space: NearNullSpace,
}

impl Default for AmgParams {
    fn default() -> Self {
        AmgParams {
            strength: 0.08,
            smoother: Smoother::Chebyshev { degree: 2 },
            coarse_size: 512,
            max_levels: 16,
            cycle: Cycle::V,
            prolongation_damping: 4.0 / 3.0,
            eigen_steps: 10,
            chebyshev_ratio: 30.0,
            chebyshev_safety: 1.1,
            near_null_space: NearNullSpace::RigidBody,
        }
    }
}

impl AmgParams {
    /// Check the ranges of the knobs.
    pub fn validate(&self) -> Result<(), SolveError> {
        let bad = |m: String| {
            Err(SolveError::InvalidInput {
                what: "amg",
                message: m,
            })
        };
        if !(self.strength >= 0.0 && self.strength < 1.0) {
            return bad(format!("strength must be in [0, 1), got {}", self.strength));
        }
        match self.smoother {
            Smoother::Chebyshev { degree } if !(1..=16).contains(&degree) => {
                return bad(format!("Chebyshev degree must be 1..=16, got {degree}"))
            }
            Smoother::Jacobi { sweeps, omega }
                if !(1..=16).contains(&sweeps) || !(omega > 0.0 && omega < 2.0) =>
            {
                return bad(format!(
                    "Jacobi needs 1..=16 sweeps and 0 < omega < 2, got {sweeps}, {omega}"
                ))
            }
            _ => {}
        }
        if !(6..=20_000).contains(&self.coarse_size) {
            return bad(format!(
                "coarse_size must be in 6..=20000 DOFs, got {}",
                self.coarse_size
            ));
        }
        if !(1..=40).contains(&self.max_levels) {
            return bad(format!(
                "max_levels must be 1..=40, got {}",
                self.max_levels
            ));
        }
        if !(self.prolongation_damping > 0.0 && self.prolongation_damping < 2.0) {
            return bad("prolongation_damping must be in (0, 2)".into());
        }
        if !(1..=100).contains(&self.eigen_steps)
            || !(self.chebyshev_ratio > 1.0)
            || !(self.chebyshev_safety >= 1.0)
        {
            return bad("eigen_steps 1..=100, chebyshev_ratio > 1, chebyshev_safety >= 1".into());
        }
        Ok(())
    }
}

/// One level of the hierarchy (all but the coarsest).
pub struct AmgLevel {
    /// The level's operator (level 0: the filtered fine operator).
    pub a: BlockCsr,
    /// Inverted diagonal blocks of `a`.
    pub dinv: BlockJacobi,
    /// The smoother with its Chebyshev interval.
    pub smoother: LevelSmoother,
    /// `λ_max(D⁻¹A)` as estimated (no safety factor).
    pub lambda: f64,
    /// Block rows per graph node on this level.
    pub group: usize,
    /// The aggregates of this level's graph nodes.
    pub aggregates: Aggregates,
    /// The smoothed prolongator to the next level.
    pub p: BlockCsr,
    /// Its transpose, the restriction.
    pub r: BlockCsr,
}

/// Statistics of a hierarchy.
#[derive(Clone, Debug, PartialEq)]
pub struct AmgStats {
    /// DOFs per level, finest first (the coarsest included).
    pub dofs: Vec<usize>,
    /// Stored `3 × 3` blocks of each level's operator.
    pub blocks: Vec<usize>,
    /// `Σ blocks / blocks₀`.
    pub operator_complexity: f64,
    /// `Σ dofs / dofs₀`.
    pub grid_complexity: f64,
    /// Bytes of the hierarchy beyond the finest operator: coarse operators, prolongators,
    /// restrictions, inverted diagonal blocks, the dense coarse inverse.
    pub hierarchy_bytes: usize,
    /// Setup stages in run order (ms): strength + aggregation, tentative prolongator,
    /// eigenvalue estimates, prolongator smoothing, Galerkin products, coarse inverse.
    pub setup_ms: Vec<(String, f64)>,
}

/// A smoothed-aggregation hierarchy and its cycle (see the module docs).
pub struct Amg {
    /// Levels with smoothing, finest first.
    pub levels: Vec<AmgLevel>,
    /// The coarsest operator.
    pub coarse: BlockCsr,
    /// Its dense inverse (row-major).
    pub coarse_inverse: Vec<f64>,
    /// Near-null space of every level, finest first (`m` values per DOF).
    pub near_null: Vec<Vec<f64>>,
    pub params: AmgParams,
    pub stats: AmgStats,
    scratch: Mutex<Vec<Scratch>>,
}

#[derive(Default)]
struct Scratch {
    b: Vec<f64>,
    x: Vec<f64>,
    r: Vec<f64>,
    d: Vec<f64>,
    q: Vec<f64>,
    w: Vec<f64>,
}

impl Scratch {
    fn new(n: usize) -> Self {
        Scratch {
            b: vec![0.0; n],
            x: vec![0.0; n],
            r: vec![0.0; n],
            d: vec![0.0; n],
            q: vec![0.0; n],
            w: vec![0.0; n],
        }
    }
}

/// The tentative prolongator of an aggregation (see the module docs): for each aggregate the
/// near-null-space rows of its members (`3 g` DOFs per graph node, `m` values per DOF in
/// `b`) are factored `Q R` by modified Gram-Schmidt with one re-orthogonalization pass; a
/// column whose remaining norm falls to `1e-10` of its own norm is dependent and gives a
/// zero column of `Q` (and a zero row of `R`). Returns `P̂` (block rows of the level × `m/3`
/// block columns per aggregate) and the coarse near-null space (`m` rows per aggregate).
pub fn tentative_prolongator(
    ag: &Aggregates,
    g: usize,
    b: &[f64],
    m: usize,
) -> Result<(BlockCsr, Vec<f64>), SolveError> {
    let nn = ag.of_node.len();
    let na = ag.num_aggregates();
    let cb = m / 3;
    // members of each aggregate in ascending node order (counting sort)
    let mut counts = vec![0u32; na];
    for &a in &ag.of_node {
        if a != NONE {
            counts[a as usize] += 1;
        }
    }
    let start = offsets(&counts)?;
    let mut next = start.clone();
    let mut members = vec![0u32; start[na] as usize];
    for (i, &a) in ag.of_node.iter().enumerate() {
        if a != NONE {
            members[next[a as usize] as usize] = i as u32;
            next[a as usize] += 1;
        }
    }
    // per aggregate: Q (rows × m, column-major) and R (m × m)
    let qr: Vec<(Vec<f64>, Vec<f64>)> = (0..na)
        .into_par_iter()
        .with_min_len(64)
        .map(|a| {
            let mem = &members[start[a] as usize..start[a + 1] as usize];
            let rows = mem.len() * 3 * g;
            let mut q = vec![0.0; rows * m];
            for (pos, &node) in mem.iter().enumerate() {
                for t in 0..3 * g {
                    let dof = node as usize * 3 * g + t;
                    for k in 0..m {
                        q[k * rows + pos * 3 * g + t] = b[dof * m + k];
                    }
                }
            }
            let mut r = vec![0.0; m * m];
            local_qr(&mut q, &mut r, rows, m);
            (q, r)
        })
        .collect();
    // P̂: every aggregated block row has `cb` blocks, the columns of its aggregate
    let nrows = nn * g;
    let mut lens = vec![0u32; nrows];
    for (i, &a) in ag.of_node.iter().enumerate() {
        if a != NONE {
            for p in 0..g {
                lens[i * g + p] = cb as u32;
            }
        }
    }
    let row_ptr = offsets(&lens)?;
    let nnz = row_ptr[nrows] as usize;
    let mut cols = vec![0u32; nnz];
    let mut vals = vec![0.0; nnz * B2];
    let mut pos_in_agg = vec![0usize; nn];
    for a in 0..na {
        for (pos, &node) in members[start[a] as usize..start[a + 1] as usize]
            .iter()
            .enumerate()
        {
            pos_in_agg[node as usize] = pos;
        }
    }
    for (i, &a) in ag.of_node.iter().enumerate() {
        if a == NONE {
            continue;
        }
        let (q, _) = &qr[a as usize];
        let rows = (start[a as usize + 1] - start[a as usize]) as usize * 3 * g;
        let pos = pos_in_agg[i];
        for p in 0..g {
            let br = i * g + p;
            for c in 0..cb {
                let k = row_ptr[br] as usize + c;
                cols[k] = (a as usize * cb + c) as u32;
                for rr in 0..3 {
                    for qq in 0..3 {
                        vals[k * B2 + rr * 3 + qq] =
                            q[(3 * c + qq) * rows + pos * 3 * g + 3 * p + rr];
                    }
                }
            }
        }
    }
    let mut bc = vec![0.0; na * m * m];
    for (a, (_, r)) in qr.iter().enumerate() {
        bc[a * m * m..(a + 1) * m * m].copy_from_slice(r);
    }
    Ok((
        BlockCsr {
            nrows,
            ncols: na * cb,
            row_ptr,
            cols,
            vals,
        },
        bc,
    ))
}

/// In-place QR of the column-major `rows × m` matrix `q` by modified Gram-Schmidt with one
/// re-orthogonalization pass; `r` (row-major `m × m`) receives `R`. Dependent columns (see
/// [`tentative_prolongator`]) become zero.
pub fn local_qr(q: &mut [f64], r: &mut [f64], rows: usize, m: usize) {
    for k in 0..m {
        let mut n0 = 0.0;
        for t in 0..rows {
            n0 += q[k * rows + t] * q[k * rows + t];
        }
        for _pass in 0..2 {
            for j in 0..k {
                let mut s = 0.0;
                for t in 0..rows {
                    s += q[j * rows + t] * q[k * rows + t];
                }
                r[j * m + k] += s;
                for t in 0..rows {
                    q[k * rows + t] -= s * q[j * rows + t];
                }
            }
        }
        let mut nk = 0.0;
        for t in 0..rows {
            nk += q[k * rows + t] * q[k * rows + t];
        }
        if nk > 1e-20 * n0 && nk > 0.0 {
            let nrm = nk.sqrt();
            r[k * m + k] = nrm;
            let inv = 1.0 / nrm;
            for t in 0..rows {
                q[k * rows + t] *= inv;
            }
        } else {
            // dependent: the projections R[j][k], j < k, stay (B = Q R still holds)
            r[k * m + k] = 0.0;
            for t in 0..rows {
                q[k * rows + t] = 0.0;
            }
        }
    }
}

/// The inverted `3 × 3` diagonal blocks of a level operator. A block row whose diagonal is
/// exactly zero in some component (a coarse DOF that interpolates nothing) gets a unit
/// diagonal there first.
pub fn inverse_diagonal(a: &BlockCsr) -> Result<BlockJacobi, SolveError> {
    inverse_diagonal_blocks(a.nrows, |i| a.diagonal_block(i))
}

/// [`inverse_diagonal`] of the `n` diagonal blocks `diag(i)` (row-major `3 × 3`).
pub fn inverse_diagonal_blocks(
    n: usize,
    diag: impl Fn(usize) -> [f64; 9] + Sync,
) -> Result<BlockJacobi, SolveError> {
    let inv: Vec<Result<[f64; 9], SolveError>> = (0..n)
        .into_par_iter()
        .with_min_len(1024)
        .map(|i| {
            let mut d = diag(i);
            for c in 0..3 {
                if d[c * 3 + c] == 0.0 {
                    d[c * 3 + c] = 1.0;
                }
            }
            let v = invert_small(&d, 3).ok_or(SolveError::SingularBlock { node: i })?;
            let mut out = [0.0; 9];
            out.copy_from_slice(&v);
            Ok(out)
        })
        .collect();
    let mut flat = Vec::with_capacity(n * 9);
    for b in inv {
        flat.extend_from_slice(&b?);
    }
    Ok(BlockJacobi::from_inverses(3, flat))
}

/// The Jacobi-smoothed prolongator `P = P̂ − ω D⁻¹ (A P̂)`; its pattern is that of `A P̂`.
pub fn smooth_prolongator(
    a: &BlockCsr,
    dinv: &BlockJacobi,
    pt: &BlockCsr,
    omega: f64,
) -> Result<BlockCsr, SolveError> {
    let mut ap = a.matmul(pt)?;
    let di = dinv.inverses();
    let ptr = &ap.row_ptr;
    let cols = &ap.cols;
    ap.vals
        .par_chunks_mut(B2)
        .enumerate()
        .with_min_len(1024)
        .for_each(|(k, v)| {
            // the block row of slot k
            let i = ptr.partition_point(|&o| o as usize <= k) - 1;
            let mut t = [0.0; 9];
            block_mul_add(&mut t, &di[i * 9..(i + 1) * 9], v);
            let base = pt.find(i, cols[k]);
            for e in 0..9 {
                let p0 = base.map_or(0.0, |b| pt.vals[b * B2 + e]);
                v[e] = p0 - omega * t[e];
            }
        });
    Ok(ap)
}

/// The Galerkin coarse operator `A_c = Pᵀ (A P)` with `R = Pᵀ`, made exactly symmetric, with
/// a unit diagonal on coarse DOFs whose row is zero. Returns `(R, A_c)`.
pub fn galerkin(a: &BlockCsr, p: &BlockCsr) -> Result<(BlockCsr, BlockCsr), SolveError> {
    let r = p.transpose();
    let ap = a.matmul(p)?;
    let mut ac = r.matmul(&ap)?;
    drop(ap);
    ac.symmetrize()?;
    unit_diagonal_where_zero(&mut ac);
    Ok((r, ac))
}

/// Set the diagonal entry of every scalar row whose diagonal is exactly zero to 1 (rows of
/// coarse DOFs that interpolate nothing are zero).
pub fn unit_diagonal_where_zero(a: &mut BlockCsr) {
    for i in 0..a.nrows {
        if let Some(k) = a.find(i, i as u32) {
            for c in 0..3 {
                if a.vals[k * B2 + c * 3 + c] == 0.0 {
                    a.vals[k * B2 + c * 3 + c] = 1.0;
                }
            }
        }
    }
}

/// The dense inverse of the coarsest operator (row-major), with a unit diagonal entry
/// where the diagonal is exactly zero.
pub fn coarse_inverse(a: &BlockCsr) -> Result<Vec<f64>, SolveError> {
    let nc = 3 * a.nrows;
    let mut dense = a.to_dense();
    for i in 0..nc {
        if dense[i * nc + i] == 0.0 {
            dense[i * nc + i] = 1.0;
        }
    }
    spd_inverse(&dense, nc)
}

/// The smoother of a level with its Chebyshev interval from the estimate `lambda`.
pub fn level_smoother(params: &AmgParams, lambda: f64) -> LevelSmoother {
    let lmax = params.chebyshev_safety * lambda;
    LevelSmoother {
        kind: params.smoother,
        lmax,
        lmin: lmax / params.chebyshev_ratio,
    }
}

impl Amg {
    /// Build the hierarchy of the filtered fine operator `a0` with the rigid-body modes at the
    /// node `positions` (or the translations, per [`AmgParams::near_null_space`]); `fixed`
    /// marks the constrained DOFs (their near-null-space rows are zero).
    pub fn setup(
        a0: BlockCsr,
        fixed: &[bool],
        positions: &[[f64; 3]],
        params: &AmgParams,
    ) -> Result<Amg, SolveError> {
        if positions.len() != a0.nrows || fixed.len() != 3 * a0.nrows {
            return Err(SolveError::Dimension {
                expected: a0.nrows,
                found: positions.len(),
            });
        }
        let b = rigid_body_modes(positions, fixed, params.near_null_space);
        Amg::setup_with_near_null_space(a0, b, params)
    }

    /// Build the hierarchy with a given near-null space `b` (`m = params.near_null_space
    /// .dim()` values per DOF, zero on constrained DOFs).
    pub fn setup_with_near_null_space(
        a0: BlockCsr,
        b: Vec<f64>,
        params: &AmgParams,
    ) -> Result<Amg, SolveError> {
        Amg::setup_grouped(a0, b, 1, params)
    }

    /// [`Amg::setup_with_near_null_space`] for an operator whose first aggregation treats
    /// `group` consecutive block rows as one graph node (a coarse level of smoothed
    /// aggregation, where an aggregate's `m` coarse DOFs are `m / 3` block rows).
    pub fn setup_grouped(
        a0: BlockCsr,
        b: Vec<f64>,
        group: usize,
        params: &AmgParams,
    ) -> Result<Amg, SolveError> {
        params.validate()?;
        let m = params.near_null_space.dim();
        if a0.nrows != a0.ncols || b.len() != a0.nrows * 3 * m {
            return Err(SolveError::Dimension {
                expected: a0.nrows * 3 * m,
                found: b.len(),
            });
        }
        if group == 0 || !a0.nrows.is_multiple_of(group) {
            return Err(SolveError::InvalidInput {
                what: "amg",
                message: format!("{} block rows do not form groups of {group}", a0.nrows),
            });
        }
        let mut times = Timer::default();
        let mut levels: Vec<AmgLevel> = Vec::new();
        let mut near_null = vec![b];
        let mut a = a0;
        let mut group = group;
        while levels.len() + 1 < params.max_levels && 3 * a.nrows > params.coarse_size {
            let t = Instant::now();
            let graph = strength_graph(&a, group, params.strength);
            let aggregates = aggregate_mis2(&graph);
            times.add("aggregation", t);
            let na = aggregates.num_aggregates();
            // stop when the aggregation no longer coarsens
            if na == 0 || na * m >= 3 * a.nrows * 9 / 10 {
                break;
            }
            let t = Instant::now();
            let (pt, bc) = tentative_prolongator(&aggregates, group, near_null.last().unwrap(), m)?;
            times.add("tentative", t);
            let t = Instant::now();
            let dinv = inverse_diagonal(&a)?;
            let lambda = lambda_max_estimate(&a, &dinv, params.eigen_steps, None);
            times.add("eigenvalues", t);
            let t = Instant::now();
            let p = smooth_prolongator(&a, &dinv, &pt, params.prolongation_damping / lambda)?;
            drop(pt);
            times.add("smoothing", t);
            let t = Instant::now();
            let (r, ac) = galerkin(&a, &p)?;
            times.add("galerkin", t);
            levels.push(AmgLevel {
                a: std::mem::replace(&mut a, ac),
                dinv,
                smoother: level_smoother(params, lambda),
                lambda,
                group,
                aggregates,
                p,
                r,
            });
            near_null.push(bc);
            group = m / 3;
        }
        let t = Instant::now();
        let nc = 3 * a.nrows;
        let coarse_inverse = coarse_inverse(&a)?;
        times.add("coarse", t);
        let stats = stats_of(&levels, &a, &coarse_inverse, times.0);
        let scratch = levels
            .iter()
            .map(|l| Scratch::new(3 * l.a.nrows))
            .chain(std::iter::once(Scratch::new(nc)))
            .collect();
        Ok(Amg {
            levels,
            coarse: a,
            coarse_inverse,
            near_null,
            params: params.clone(),
            stats,
            scratch: Mutex::new(scratch),
        })
    }

    /// Number of levels (the coarsest included).
    pub fn num_levels(&self) -> usize {
        self.levels.len() + 1
    }

    /// DOFs of the finest level.
    pub fn num_dofs(&self) -> usize {
        self.stats.dofs[0]
    }

    /// One cycle for `A x = b` from `x = 0` (`b`, `x` of the finest level's length).
    pub fn cycle(&self, b: &[f64], x: &mut [f64]) {
        let mut s = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        s[0].b.copy_from_slice(b);
        self.cycle_at(0, &mut s);
        x.copy_from_slice(&s[0].x);
    }

    fn cycle_at(&self, l: usize, s: &mut [Scratch]) {
        if l == self.levels.len() {
            let n = 3 * self.coarse.nrows;
            let sc = &mut s[l];
            dense_mv(&self.coarse_inverse, n, &sc.b, &mut sc.x);
            return;
        }
        let lev = &self.levels[l];
        {
            let sc = &mut s[l];
            lev.smoother.smooth(
                &lev.a, &lev.dinv, &sc.b, &mut sc.x, true, true, &mut sc.r, &mut sc.d, &mut sc.q,
            );
        }
        {
            let (lo, hi) = s.split_at_mut(l + 1);
            lev.r.spmv(&lo[l].r, &mut hi[0].b);
        }
        self.cycle_at(l + 1, s);
        if self.params.cycle == Cycle::W && l + 1 < self.levels.len() {
            // second visit on the remaining coarse residual
            let ac = &self.levels[l + 1].a;
            {
                let sc = &mut s[l + 1];
                sc.w.copy_from_slice(&sc.x);
                ac.spmv(&sc.x, &mut sc.q);
                sc.b.par_iter_mut()
                    .zip(sc.q.par_iter())
                    .for_each(|(bi, qi)| *bi -= qi);
            }
            self.cycle_at(l + 1, s);
            let sc = &mut s[l + 1];
            sc.x.par_iter_mut()
                .zip(sc.w.par_iter())
                .for_each(|(xi, wi)| *xi += wi);
        }
        {
            let (lo, hi) = s.split_at_mut(l + 1);
            lev.p.spmv_add(&hi[0].x, &mut lo[l].x);
        }
        let sc = &mut s[l];
        lev.smoother.smooth(
            &lev.a, &lev.dinv, &sc.b, &mut sc.x, false, false, &mut sc.r, &mut sc.d, &mut sc.q,
        );
    }
}

impl Preconditioner for Amg {
    fn apply(&self, r: &[f64], z: &mut [f64]) {
        self.cycle(r, z);
    }
}

/// Setup stage times (ms), summed over the levels in first-run order.
#[derive(Default)]
pub struct Timer(pub Vec<(String, f64)>);

impl Timer {
    /// Add the time since `t` to stage `name`.
    pub fn add(&mut self, name: &str, t: Instant) {
        let ms = t.elapsed().as_secs_f64() * 1e3;
        match self.0.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => *v += ms,
            None => self.0.push((name.to_string(), ms)),
        }
    }
}

/// Statistics from the sizes of a hierarchy: DOFs and stored blocks per level (finest
/// first), the bytes beyond the finest operator, and the setup stage times.
pub fn stats_from_sizes(
    dofs: Vec<usize>,
    blocks: Vec<usize>,
    hierarchy_bytes: usize,
    setup_ms: Vec<(String, f64)>,
) -> AmgStats {
    let b0 = blocks.first().copied().unwrap_or(1).max(1) as f64;
    let d0 = dofs.first().copied().unwrap_or(1).max(1) as f64;
    AmgStats {
        operator_complexity: blocks.iter().sum::<usize>() as f64 / b0,
        grid_complexity: dofs.iter().sum::<usize>() as f64 / d0,
        dofs,
        blocks,
        hierarchy_bytes,
        setup_ms,
    }
}

fn stats_of(
    levels: &[AmgLevel],
    coarse: &BlockCsr,
    inv: &[f64],
    setup_ms: Vec<(String, f64)>,
) -> AmgStats {
    let mut dofs: Vec<usize> = levels.iter().map(|l| 3 * l.a.nrows).collect();
    dofs.push(3 * coarse.nrows);
    let mut blocks: Vec<usize> = levels.iter().map(|l| l.a.nnz()).collect();
    blocks.push(coarse.nnz());
    let hierarchy_bytes = levels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            (if i > 0 { l.a.bytes() } else { 0 })
                + l.p.bytes()
                + l.r.bytes()
                + 8 * l.dinv.inverses().len()
        })
        .sum::<usize>()
        + if levels.is_empty() { 0 } else { coarse.bytes() }
        + 8 * inv.len();
    stats_from_sizes(dofs, blocks, hierarchy_bytes, setup_ms)
}
