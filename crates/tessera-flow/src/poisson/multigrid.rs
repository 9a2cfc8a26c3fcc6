//! The cut-cell geometric multigrid (dissertation §6.3.2, WMSF15): hierarchy, V-cycle,
//! coarsest-level direct solve, and multigrid-preconditioned conjugate gradients (MGPCG).
//!
//! **Cycle.** A V(ν1, ν2) cycle with red-black Gauss-Seidel smoothing (red then black
//! before the coarse correction, black then red after it, so the cycle is a symmetric
//! preconditioner). Transfers are those of the Galerkin identity `A_H = R A_h P`
//! ([`super::level`]): `R = 1/2 P^T` restricts the residual, the coarse correction is
//! interpolated piecewise-constantly and scaled by `ω` ([`MgParams::correction`]). With
//! piecewise-constant interpolation the exact Galerkin correction (`ω = 1`) is too small for
//! smooth errors by about a factor of two (Braess 1995) and the cycle converges at only
//! 0.6-0.9 per cycle; `ω = 2` makes `ω P A_H^-1 R = P A_H^-1 P^T`, the rediscretized coarse
//! problem with the children's summed residual as right-hand side, and converges at about
//! 0.1 per cycle independent of the grid size (tests/convergence.rs, `tessera bench flow`).
//!
//! **Coarsest level.** Coarsening stops at [`MgParams::max_coarse_cells`] cells; that level
//! is solved directly with a dense symmetric generalized inverse computed once.
//!
//! **Enclosed fluid.** A connected fluid region without a Dirichlet face (a closed box, a
//! pocket sealed by obstacles) makes `A` singular with the constants on the region as null
//! space; `A x = b` is solvable only when `b` sums to zero over the region (the
//! compatibility condition: no net flux through closed walls). The solver projects the
//! right-hand side onto the compatible space region by region, and the coarsest-level
//! inverse is the pseudo-inverse on such regions (pin one cell, invert, project out the
//! constant), so neither the cycle nor CG diverges; the solution is the one of zero mean on
//! each region.

use tessera_core::Par;

use super::level::Level;
use crate::real::Real;

/// Knobs of the multigrid solver.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MgParams {
    /// Red-black Gauss-Seidel sweeps before the coarse correction (ν1).
    pub pre_smooth: usize,
    /// Sweeps after it (ν2).
    pub post_smooth: usize,
    /// Scale `ω` of the interpolated coarse correction (see the module docs).
    pub correction: f64,
    /// Stop coarsening when a level has at most this many cells.
    pub max_coarse_cells: usize,
    /// Stop when `|r| / |b| <= tolerance` (2-norms).
    pub tolerance: f64,
    /// Iteration limit (CG iterations or cycles).
    pub max_iterations: usize,
    /// CG preconditioned by one V-cycle, or V-cycles alone.
    pub method: Method,
}

/// The outer iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Conjugate gradients preconditioned by one V-cycle per iteration.
    Mgpcg,
    /// Stand-alone V-cycles.
    VCycle,
}

impl Default for MgParams {
    fn default() -> Self {
        MgParams {
            pre_smooth: 2,
            post_smooth: 2,
            correction: 2.0,
            max_coarse_cells: 512,
            tolerance: 1e-5,
            max_iterations: 50,
            method: Method::Mgpcg,
        }
    }
}

/// What a solve did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SolveReport {
    /// Iterations (V-cycles) performed.
    pub iterations: usize,
    /// `|b|` after the compatibility projection.
    pub rhs_norm: f64,
    /// `|b - A x|` before the first iteration and after each one.
    pub residuals: Vec<f64>,
    /// Whether the tolerance was reached.
    pub converged: bool,
}

impl SolveReport {
    /// `|r_final| / |b|` (0 for a zero right-hand side).
    pub fn relative_residual(&self) -> f64 {
        if self.rhs_norm == 0.0 {
            0.0
        } else {
            self.residuals.last().copied().unwrap_or(0.0) / self.rhs_norm
        }
    }
    /// Mean reduction of the residual per iteration, `(|r_k| / |r_0|)^(1/k)`.
    pub fn convergence_factor(&self) -> f64 {
        match (self.residuals.first(), self.residuals.last()) {
            (Some(&r0), Some(&rk)) if self.iterations > 0 && r0 > 0.0 => {
                (rk / r0).powf(1.0 / self.iterations as f64)
            }
            _ => 0.0,
        }
    }
}

/// Connected fluid regions without a Dirichlet face, on one level.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FloatingRegions {
    /// Region of each cell (`u32::MAX`: inactive, or in a region with a Dirichlet face).
    pub label: Vec<u32>,
    /// Cells per region.
    pub count: Vec<u32>,
}

impl FloatingRegions {
    /// Label the regions of `level` (union-find over faces of non-zero weight).
    pub fn find<T: Real>(level: &Level<T>) -> Self {
        let n = level.len();
        let mut parent: Vec<u32> = (0..n as u32).collect();
        fn root(p: &mut [u32], mut a: u32) -> u32 {
            while p[a as usize] != a {
                let g = p[p[a as usize] as usize];
                p[a as usize] = g;
                a = g;
            }
            a
        }
        let st = level.strides();
        for c in 0..n {
            let ijk = level.ijk(c);
            for a in 0..level.dim {
                if ijk[a] > 0 && level.weights[a][c] > T::ZERO {
                    let (ra, rb) = (
                        root(&mut parent, c as u32),
                        root(&mut parent, (c - st[a]) as u32),
                    );
                    if ra != rb {
                        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
                        parent[hi as usize] = lo;
                    }
                }
            }
        }
        let active: Vec<bool> = (0..n).map(|c| level.is_active(c)).collect();
        let mut anchored = vec![false; n];
        for c in 0..n {
            if active[c] && level.dirichlet[c] > T::ZERO {
                let r = root(&mut parent, c as u32);
                anchored[r as usize] = true;
            }
        }
        let mut id = vec![u32::MAX; n];
        let mut label = vec![u32::MAX; n];
        let mut count: Vec<u32> = Vec::new();
        for c in 0..n {
            if !active[c] {
                continue;
            }
            let r = root(&mut parent, c as u32) as usize;
            if anchored[r] {
                continue;
            }
            if id[r] == u32::MAX {
                id[r] = count.len() as u32;
                count.push(0);
            }
            label[c] = id[r];
            count[id[r] as usize] += 1;
        }
        FloatingRegions { label, count }
    }

    /// Whether there is any floating region.
    pub fn any(&self) -> bool {
        !self.count.is_empty()
    }

    /// Subtract each region's mean from `v` on that region (in f64, cells in order).
    pub fn project<T: Real>(&self, v: &mut [T]) {
        if !self.any() {
            return;
        }
        let mut sum = vec![0.0f64; self.count.len()];
        for (c, &l) in self.label.iter().enumerate() {
            if l != u32::MAX {
                sum[l as usize] += v[c].to_f64();
            }
        }
        let mean: Vec<T> = sum
            .iter()
            .zip(&self.count)
            .map(|(s, &n)| T::from_f64(s / n as f64))
            .collect();
        for (c, &l) in self.label.iter().enumerate() {
            if l != u32::MAX {
                v[c] -= mean[l as usize];
            }
        }
    }
}

/// The coarsest level's direct solve `x = M b`: `M` is the inverse of `A` on regions with a
/// Dirichlet face and the pseudo-inverse on floating ones (module docs), over the active
/// cells only, dense and symmetric.
#[derive(Clone, Debug, PartialEq)]
pub struct CoarseSolver {
    /// The level's active cells, in order.
    pub cells: Vec<u32>,
    /// `M`, `cells.len()^2` entries, row-major (symmetric).
    pub inverse: Vec<f64>,
}

impl CoarseSolver {
    /// Factor the coarsest level.
    pub fn new<T: Real>(level: &Level<T>) -> Self {
        let n_all = level.len();
        let cells: Vec<u32> = (0..n_all as u32)
            .filter(|&c| level.is_active(c as usize))
            .collect();
        let n = cells.len();
        let mut pos = vec![u32::MAX; n_all];
        for (i, &c) in cells.iter().enumerate() {
            pos[c as usize] = i as u32;
        }
        let mut a = vec![0.0f64; n * n];
        for (r, c, v) in level.triplets() {
            let (i, j) = (pos[r], pos[c]);
            if i != u32::MAX && j != u32::MAX {
                a[i as usize * n + j as usize] = v;
            }
        }
        // pin the first cell of every floating region
        let regions = FloatingRegions::find(level);
        let mut pinned = vec![false; regions.count.len()];
        let mut pins = Vec::new();
        for (i, &c) in cells.iter().enumerate() {
            let l = regions.label[c as usize];
            if l != u32::MAX && !pinned[l as usize] {
                pinned[l as usize] = true;
                pins.push(i);
                for k in 0..n {
                    a[i * n + k] = 0.0;
                    a[k * n + i] = 0.0;
                }
                a[i * n + i] = 1.0;
            }
        }
        let mut inv = spd_inverse(&a, n);
        for &p in &pins {
            for k in 0..n {
                inv[p * n + k] = 0.0;
                inv[k * n + p] = 0.0;
            }
        }
        // M = Q G Q on each floating region (Q removes the region's mean)
        if regions.any() {
            let lab: Vec<u32> = cells.iter().map(|&c| regions.label[c as usize]).collect();
            let nreg = regions.count.len();
            let cnt: Vec<f64> = regions.count.iter().map(|&k| k as f64).collect();
            // row means over the row's own region
            let mut rm = vec![0.0f64; n];
            for i in 0..n {
                if lab[i] == u32::MAX {
                    continue;
                }
                let mut s = 0.0;
                for j in 0..n {
                    if lab[j] == lab[i] {
                        s += inv[i * n + j];
                    }
                }
                rm[i] = s / cnt[lab[i] as usize];
            }
            let mut tm = vec![0.0f64; nreg];
            for i in 0..n {
                if lab[i] != u32::MAX {
                    tm[lab[i] as usize] += rm[i] / cnt[lab[i] as usize];
                }
            }
            for i in 0..n {
                if lab[i] == u32::MAX {
                    continue;
                }
                for j in 0..n {
                    if lab[j] == lab[i] {
                        inv[i * n + j] += tm[lab[i] as usize] - rm[i] - rm[j];
                    }
                }
            }
        }
        CoarseSolver {
            cells,
            inverse: inv,
        }
    }

    /// `x = M b` (inactive cells of `x` set to zero).
    pub fn solve<T: Real>(&self, b: &[T], x: &mut [T]) {
        x.iter_mut().for_each(|v| *v = T::ZERO);
        let n = self.cells.len();
        let bg: Vec<f64> = self.cells.iter().map(|&c| b[c as usize].to_f64()).collect();
        for (i, &c) in self.cells.iter().enumerate() {
            let row = &self.inverse[i * n..(i + 1) * n];
            let s: f64 = row.iter().zip(&bg).map(|(m, v)| m * v).sum();
            x[c as usize] = T::from_f64(s);
        }
    }
}

/// Inverse of a symmetric positive definite `n x n` matrix (f64): Cholesky `A = L L^T`,
/// then `A^-1 = L^-T L^-1` (all loops run along rows).
fn spd_inverse(a: &[f64], n: usize) -> Vec<f64> {
    let mut l = a.to_vec();
    for j in 0..n {
        let (upto, rest) = l.split_at_mut((j + 1) * n);
        let rowj = &mut upto[j * n..];
        let mut d = rowj[j];
        for k in 0..j {
            d -= rowj[k] * rowj[k];
        }
        let d = if d > 0.0 { d.sqrt() } else { 1e-150 };
        rowj[j] = d;
        for rowi in rest.chunks_mut(n) {
            let mut s = rowi[j];
            for k in 0..j {
                s -= rowi[k] * rowj[k];
            }
            rowi[j] = s / d;
        }
    }
    // w[c * n + i] = (L^-1)_{i c}: forward substitution per column
    let mut w = vec![0.0f64; n * n];
    for c in 0..n {
        let wc = &mut w[c * n..(c + 1) * n];
        for i in c..n {
            let li = &l[i * n..i * n + n];
            let mut s = if i == c { 1.0 } else { 0.0 };
            for k in c..i {
                s -= li[k] * wc[k];
            }
            wc[i] = s / li[i];
        }
    }
    // (A^-1)_{ij} = sum_k (L^-1)_{ki} (L^-1)_{kj} = sum_k w[i][k] w[j][k]
    let mut inv = vec![0.0f64; n * n];
    for i in 0..n {
        for j in i..n {
            let (wi, wj) = (&w[i * n..(i + 1) * n], &w[j * n..(j + 1) * n]);
            let s: f64 = (j..n).map(|k| wi[k] * wj[k]).sum();
            inv[i * n + j] = s;
            inv[j * n + i] = s;
        }
    }
    inv
}

/// The multigrid hierarchy with its work vectors.
#[derive(Clone, Debug)]
pub struct Multigrid<T> {
    pub params: MgParams,
    /// Levels, finest first.
    pub levels: Vec<Level<T>>,
    /// Direct solve of the last level.
    pub coarse: CoarseSolver,
    /// Floating regions of the finest level.
    pub floating: FloatingRegions,
    par: Par,
    // per level l >= 1: solution and right-hand side; per level l < last: residual
    xs: Vec<Vec<T>>,
    bs: Vec<Vec<T>>,
    rs: Vec<Vec<T>>,
    // CG vectors on the finest level
    cg: [Vec<T>; 4],
    rhs: Vec<T>,
}

impl<T: Real> Multigrid<T> {
    /// Build the hierarchy below `finest` by repeated rediscretization.
    pub fn new(finest: Level<T>, params: MgParams, par: Par) -> Self {
        let mut levels = vec![finest];
        loop {
            let l = levels.last().expect("at least the finest level");
            let can = l.dims[..l.dim].iter().any(|&d| d > 1);
            if l.len() <= params.max_coarse_cells.max(1) || !can {
                break;
            }
            let c = l.coarsen(par);
            levels.push(c);
        }
        let coarse = CoarseSolver::new(levels.last().expect("non-empty"));
        let floating = FloatingRegions::find(&levels[0]);
        let xs = levels.iter().map(|l| vec![T::ZERO; l.len()]).collect();
        let bs = levels.iter().map(|l| vec![T::ZERO; l.len()]).collect();
        let rs = levels.iter().map(|l| vec![T::ZERO; l.len()]).collect();
        let n0 = levels[0].len();
        Multigrid {
            params,
            levels,
            coarse,
            floating,
            par,
            xs,
            bs,
            rs,
            cg: std::array::from_fn(|_| vec![T::ZERO; n0]),
            rhs: vec![T::ZERO; n0],
        }
    }

    /// The finest level.
    pub fn finest(&self) -> &Level<T> {
        &self.levels[0]
    }

    /// One V-cycle on the finest level, improving `x` for `A x = b`.
    pub fn vcycle(&mut self, x: &mut [T], b: &[T]) {
        let last = self.levels.len() - 1;
        let par = self.par;
        let p = self.params;
        let half = T::from_f64(0.5);
        let omega = T::from_f64(p.correction);
        if last == 0 {
            self.coarse.solve(b, x);
            return;
        }
        // down
        for l in 0..last {
            let lev = &self.levels[l];
            let (xl, bl): (&mut [T], &[T]) = if l == 0 {
                (&mut *x, b)
            } else {
                self.xs[l].iter_mut().for_each(|v| *v = T::ZERO);
                (&mut self.xs[l][..], &self.bs[l][..])
            };
            for _ in 0..p.pre_smooth {
                lev.smooth(par, xl, bl, 0);
                lev.smooth(par, xl, bl, 1);
            }
            let r = &mut self.rs[l];
            lev.residual(par, xl, bl, r);
            let (head, tail) = self.bs.split_at_mut(l + 1);
            let _ = head;
            lev.restrict(par, r, &self.levels[l + 1], &mut tail[0], half);
        }
        self.coarse.solve(&self.bs[last], &mut self.xs[last]);
        // up
        for l in (0..last).rev() {
            let lev = &self.levels[l];
            let (lo, hi) = self.xs.split_at_mut(l + 1);
            let xl: &mut [T] = if l == 0 { &mut *x } else { &mut lo[l][..] };
            let bl: &[T] = if l == 0 { b } else { &self.bs[l][..] };
            lev.prolong_add(par, &hi[0], &self.levels[l + 1], xl, omega);
            for _ in 0..p.post_smooth {
                lev.smooth(par, xl, bl, 1);
                lev.smooth(par, xl, bl, 0);
            }
        }
    }

    /// `z = M r`: one V-cycle from a zero initial guess (the MGPCG preconditioner).
    pub fn precondition(&mut self, r: &[T], z: &mut [T]) {
        z.iter_mut().for_each(|v| *v = T::ZERO);
        self.vcycle(z, r);
    }

    /// Solve `A x = b` from the initial guess in `x` ([`MgParams::method`]).
    pub fn solve(&mut self, x: &mut [T], b: &[T]) -> SolveReport {
        let par = self.par;
        let mut rhs = std::mem::take(&mut self.rhs);
        rhs.copy_from_slice(b);
        let n = rhs.len();
        for c in 0..n {
            if !self.levels[0].is_active(c) {
                rhs[c] = T::ZERO;
                x[c] = T::ZERO;
            }
        }
        self.floating.project(&mut rhs);
        let bnorm = dot(par, &rhs, &rhs).sqrt();
        let mut rep = SolveReport {
            rhs_norm: bnorm,
            ..Default::default()
        };
        if bnorm == 0.0 {
            x.iter_mut().for_each(|v| *v = T::ZERO);
            rep.residuals.push(0.0);
            rep.converged = true;
            self.rhs = rhs;
            return rep;
        }
        let tol = self.params.tolerance * bnorm;
        let [mut r, mut z, mut d, mut q] = std::mem::take(&mut self.cg);
        let r0 = self.levels[0].residual(par, x, &rhs, &mut r).sqrt();
        rep.residuals.push(r0);
        if r0 <= tol {
            rep.converged = true;
        } else {
            match self.params.method {
                Method::VCycle => {
                    for _ in 0..self.params.max_iterations {
                        self.vcycle(x, &rhs);
                        rep.iterations += 1;
                        let rn = self.levels[0].residual(par, x, &rhs, &mut r).sqrt();
                        rep.residuals.push(rn);
                        if rn <= tol {
                            rep.converged = true;
                            break;
                        }
                        if !rn.is_finite() {
                            break;
                        }
                    }
                }
                Method::Mgpcg => {
                    self.precondition(&r, &mut z);
                    d.copy_from_slice(&z);
                    let mut rz = dot(par, &r, &z);
                    for _ in 0..self.params.max_iterations {
                        self.levels[0].apply(par, &d, &mut q);
                        let dq = dot(par, &d, &q);
                        if dq.is_nan() || dq <= 0.0 {
                            break;
                        }
                        let alpha = T::from_f64(rz / dq);
                        axpy(x, alpha, &d);
                        axpy(&mut r, -alpha, &q);
                        rep.iterations += 1;
                        let rn = dot(par, &r, &r).sqrt();
                        rep.residuals.push(rn);
                        if rn <= tol {
                            rep.converged = true;
                            break;
                        }
                        if !rn.is_finite() {
                            break;
                        }
                        self.precondition(&r, &mut z);
                        let rz_new = dot(par, &r, &z);
                        let beta = T::from_f64(rz_new / rz);
                        rz = rz_new;
                        for (dv, &zv) in d.iter_mut().zip(&z) {
                            *dv = zv + beta * *dv;
                        }
                    }
                }
            }
        }
        self.floating.project(x);
        self.cg = [r, z, d, q];
        self.rhs = rhs;
        rep
    }
}

/// `sum a_i b_i` in f64 (fixed chunking, so the result does not depend on the pool size).
pub fn dot<T: Real>(par: Par, a: &[T], b: &[T]) -> f64 {
    use rayon::prelude::*;
    const CH: usize = 8192;
    let part = |(x, y): (&[T], &[T])| -> f64 {
        x.iter()
            .zip(y)
            .map(|(p, q)| p.to_f64() * q.to_f64())
            .sum::<f64>()
    };
    let parts: Vec<f64> = match par {
        Par::Seq => a.chunks(CH).zip(b.chunks(CH)).map(part).collect(),
        Par::Rayon => a.par_chunks(CH).zip(b.par_chunks(CH)).map(part).collect(),
    };
    parts.iter().sum()
}

fn axpy<T: Real>(y: &mut [T], a: T, x: &[T]) {
    for (yv, &xv) in y.iter_mut().zip(x) {
        *yv += a * xv;
    }
}
