//! One level of the cut-cell finite-volume Poisson operator (dissertation §6.3.2, Eq. 6.3).
//!
//! Eq. 6.3 on cell `c` of a grid of spacing `h`, written for `phi = (dt / rho) p` and
//! multiplied by `-1` so that the matrix is symmetric positive (semi-)definite:
//!
//! ```text
//! (A phi)_c = sum_f  w_f (phi_c - phi_F)  +  D_c phi_c  =  b_c,     w_f = A_f / h
//! ```
//!
//! `A_f` is the open (fluid) area of face `f`, `phi_F` the value in the cell across `f`.
//! Faces on the domain boundary are not in the sum: a wall or an inflow is a Neumann face
//! (no term), an outflow a Dirichlet face (`p = 0` half a cell away, so its weight `2 A_f / h`
//! goes into `D_c`).
//!
//! Storage (struct of arrays, one entry per cell so that every kernel indexes alike): `D`
//! and, per axis `a`, `w_a[c]` = the weight of the face between `c - e_a` and `c` (zero in the
//! first layer). The diagonal is not stored: `D_c` plus the weights of the cell's faces. A
//! cell whose diagonal is zero (solid, or cut off from every fluid face) is not an unknown:
//! smoothing sets it to zero.
//!
//! **Coarsening** ([`Level::coarsen`]) rediscretizes Eq. 6.3 on the grid of spacing `2h`:
//! a coarse face's open area is the sum of the open areas of the `2^(d-1)` fine faces that
//! tile it, and a coarse cell's Dirichlet faces are its children's. With `H = 2h`:
//!
//! ```text
//! w_F = (sum_{f in F} A_f) / H = 1/2 sum_{f in F} w_f,        D_C = 1/2 sum_{c in C} D_c
//! ```
//!
//! which is exactly `A_H = R A_h P` for piecewise-constant prolongation `P` (each fine cell
//! takes its parent's value) and restriction `R = 1/2 P^T` (WMSF15: the coarse systems are
//! the Galerkin ones without a sparse matrix product; tests/galerkin.rs checks it to 1e-12).
//! Odd sizes coarsen to `ceil(n / 2)`; a coarse cell then has fewer children.
//!
//! Weights are stored relative to `h^(d-2)` of the finest level (in 2D they are the open
//! fractions themselves), which scales the whole hierarchy by one constant.

use rayon::prelude::*;
use tessera_core::Par;

use crate::real::{Real, SharedSlice};

/// One level of the hierarchy: the operator of Eq. 6.3 on a `dims` grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Level<T> {
    /// Cells per axis; `dims[2] == 1` in 2D.
    pub dims: [usize; 3],
    /// 2 or 3.
    pub dim: usize,
    /// Spacing relative to the finest level (1, 2, 4, ...).
    pub scale: u32,
    /// Dirichlet part of the diagonal, `D_c`.
    pub dirichlet: Vec<T>,
    /// Face weights per axis: `weights[a][c]` couples `c - e_a` and `c`.
    pub weights: Vec<Vec<T>>,
}

/// Minimum number of rows per rayon task.
const MIN_ROWS: usize = 8;

impl<T: Real> Level<T> {
    /// A level with all weights zero.
    pub fn zeros(dims: [usize; 3], dim: usize, scale: u32) -> Self {
        let n = dims[0] * dims[1] * dims[2];
        Level {
            dims,
            dim,
            scale,
            dirichlet: vec![T::ZERO; n],
            weights: (0..dim).map(|_| vec![T::ZERO; n]).collect(),
        }
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.dims[0] * self.dims[1] * self.dims[2]
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Rows of cells along x: `ny * nz`.
    fn rows(&self) -> usize {
        self.dims[1] * self.dims[2]
    }
    /// Index strides per axis.
    pub fn strides(&self) -> [usize; 3] {
        [1, self.dims[0], self.dims[0] * self.dims[1]]
    }

    /// Weighted neighbour sum and diagonal of cell `c` at `ijk`, in the fixed order
    /// x-, x+, y-, y+, z-, z+ that the GPU kernels use too.
    #[inline(always)]
    fn stencil(&self, c: usize, ijk: [usize; 3], x: impl Fn(usize) -> T) -> (T, T) {
        let st = self.strides();
        let mut s = T::ZERO;
        let mut d = self.dirichlet[c];
        for a in 0..self.dim {
            let w = &self.weights[a];
            if ijk[a] > 0 {
                let wf = w[c];
                s += wf * x(c - st[a]);
                d += wf;
            }
            if ijk[a] + 1 < self.dims[a] {
                let wf = w[c + st[a]];
                s += wf * x(c + st[a]);
                d += wf;
            }
        }
        (s, d)
    }

    /// The diagonal `A_cc`.
    pub fn diagonal(&self, c: usize) -> T {
        let ijk = self.ijk(c);
        self.stencil(c, ijk, |_| T::ZERO).1
    }

    /// `(i, j, k)` of cell `c`.
    pub fn ijk(&self, c: usize) -> [usize; 3] {
        let [nx, ny, _] = self.dims;
        [c % nx, (c / nx) % ny, c / (nx * ny)]
    }

    /// Whether cell `c` is an unknown (non-zero diagonal).
    pub fn is_active(&self, c: usize) -> bool {
        self.diagonal(c) > T::ZERO
    }

    fn for_rows(&self, par: Par, f: impl Fn(usize) + Sync + Send) {
        let rows = self.rows();
        match par {
            Par::Seq => (0..rows).for_each(f),
            Par::Rayon => (0..rows).into_par_iter().with_min_len(MIN_ROWS).for_each(f),
        }
    }

    /// `y = A x`.
    pub fn apply(&self, par: Par, x: &[T], y: &mut [T]) {
        let nx = self.dims[0];
        let ny = self.dims[1];
        let row = |r: usize, out: &mut [T]| {
            let (j, k) = (r % ny, r / ny);
            for (i, o) in out.iter_mut().enumerate() {
                let c = r * nx + i;
                let (s, d) = self.stencil(c, [i, j, k], |n| x[n]);
                *o = d * x[c] - s;
            }
        };
        match par {
            Par::Seq => y.chunks_mut(nx).enumerate().for_each(|(r, o)| row(r, o)),
            Par::Rayon => y
                .par_chunks_mut(nx)
                .with_min_len(MIN_ROWS)
                .enumerate()
                .for_each(|(r, o)| row(r, o)),
        }
    }

    /// `r = b - A x`; returns `|r|^2` (summed in f64, per row then over rows in order).
    pub fn residual(&self, par: Par, x: &[T], b: &[T], r: &mut [T]) -> f64 {
        let nx = self.dims[0];
        let ny = self.dims[1];
        let row = |ri: usize, out: &mut [T]| -> f64 {
            let (j, k) = (ri % ny, ri / ny);
            let mut acc = 0.0f64;
            for (i, o) in out.iter_mut().enumerate() {
                let c = ri * nx + i;
                let (s, d) = self.stencil(c, [i, j, k], |n| x[n]);
                let v = b[c] - (d * x[c] - s);
                *o = v;
                acc += v.to_f64() * v.to_f64();
            }
            acc
        };
        let parts: Vec<f64> = match par {
            Par::Seq => r
                .chunks_mut(nx)
                .enumerate()
                .map(|(ri, o)| row(ri, o))
                .collect(),
            Par::Rayon => r
                .par_chunks_mut(nx)
                .with_min_len(MIN_ROWS)
                .enumerate()
                .map(|(ri, o)| row(ri, o))
                .collect(),
        };
        parts.iter().sum()
    }

    /// One Gauss-Seidel pass over the cells of `color` (`(i + j + k) % 2 == color`):
    /// `x_c = (b_c + sum_f w_f x_F) / A_cc`, and `x_c = 0` where `A_cc = 0`.
    pub fn smooth(&self, par: Par, x: &mut [T], b: &[T], color: usize) {
        let nx = self.dims[0];
        let ny = self.dims[1];
        let xs = SharedSlice::new(x);
        self.for_rows(par, |r| {
            let (j, k) = (r % ny, r / ny);
            let i0 = (color + j + k) % 2;
            for i in (i0..nx).step_by(2) {
                let c = r * nx + i;
                // SAFETY: this pass writes only cells of `color` and reads only their
                // neighbours, which have the other colour; each cell of `color` belongs to
                // exactly one row, handled by one task.
                let (s, d) = self.stencil(c, [i, j, k], |n| unsafe { xs.get(n) });
                let v = if d > T::ZERO { (b[c] + s) / d } else { T::ZERO };
                // SAFETY: as above.
                unsafe { xs.set(c, v) };
            }
        });
    }

    /// Dimensions of the next coarser level.
    pub fn coarse_dims(&self) -> [usize; 3] {
        let mut d = [1; 3];
        for (a, da) in d.iter_mut().enumerate().take(self.dim) {
            *da = self.dims[a].div_ceil(2);
        }
        d
    }

    /// Children of coarse cell `cc` (at coarse `IJK`) in this level: visits each existing
    /// fine cell index.
    #[inline(always)]
    fn children(&self, ijk_c: [usize; 3], mut f: impl FnMut(usize)) {
        let st = self.strides();
        let kz = if self.dim == 3 { 2 } else { 1 };
        for dk in 0..kz {
            let k = 2 * ijk_c[2] + dk;
            if k >= self.dims[2] {
                continue;
            }
            for dj in 0..2 {
                let j = 2 * ijk_c[1] + dj;
                if j >= self.dims[1] {
                    continue;
                }
                for di in 0..2 {
                    let i = 2 * ijk_c[0] + di;
                    if i >= self.dims[0] {
                        continue;
                    }
                    f(i * st[0] + j * st[1] + k * st[2]);
                }
            }
        }
    }

    /// The next coarser level: Eq. 6.3 rediscretized with summed open areas (module docs).
    pub fn coarsen(&self, par: Par) -> Level<T> {
        let cd = self.coarse_dims();
        let mut out = Level::zeros(cd, self.dim, self.scale * 2);
        let half = T::from_f64(0.5);
        let st = self.strides();
        let n = out.len();
        let fill = |cc: usize, dv: &mut T, wv: &mut [T; 3]| {
            let ijk_c = [cc % cd[0], (cc / cd[0]) % cd[1], cc / (cd[0] * cd[1])];
            let mut dsum = T::ZERO;
            self.children(ijk_c, |c| dsum += self.dirichlet[c]);
            *dv = half * dsum;
            for a in 0..self.dim {
                wv[a] = T::ZERO;
                if ijk_c[a] == 0 {
                    continue;
                }
                // the fine faces tiling the coarse face: the low faces of the children in
                // the layer 2 * I_a
                let mut s = T::ZERO;
                let kz = if self.dim == 3 { 2 } else { 1 };
                for dk in 0..kz {
                    for dj in 0..2 {
                        let mut f = [2 * ijk_c[0], 2 * ijk_c[1], 2 * ijk_c[2]];
                        // the two (or four) offsets run over the axes other than `a`
                        let others: [usize; 2] = match a {
                            0 => [1, 2],
                            1 => [0, 2],
                            _ => [0, 1],
                        };
                        f[others[0]] += dj;
                        f[others[1]] += dk;
                        if (0..3).any(|q| f[q] >= self.dims[q]) {
                            continue;
                        }
                        s += self.weights[a][f[0] * st[0] + f[1] * st[1] + f[2] * st[2]];
                    }
                }
                wv[a] = half * s;
            }
        };
        let mut tmp: Vec<(T, [T; 3])> = vec![(T::ZERO, [T::ZERO; 3]); n];
        match par {
            Par::Seq => tmp
                .iter_mut()
                .enumerate()
                .for_each(|(cc, (d, w))| fill(cc, d, w)),
            Par::Rayon => tmp
                .par_iter_mut()
                .with_min_len(4096)
                .enumerate()
                .for_each(|(cc, (d, w))| fill(cc, d, w)),
        }
        for (cc, (d, w)) in tmp.into_iter().enumerate() {
            out.dirichlet[cc] = d;
            for a in 0..self.dim {
                out.weights[a][cc] = w[a];
            }
        }
        out
    }

    /// `b_coarse[C] = scale * sum_{c in C} r[c]` (the children's integrated residuals).
    pub fn restrict(&self, par: Par, r: &[T], coarse: &Level<T>, b_coarse: &mut [T], scale: T) {
        let cd = coarse.dims;
        let f = |cc: usize, o: &mut T| {
            let ijk_c = [cc % cd[0], (cc / cd[0]) % cd[1], cc / (cd[0] * cd[1])];
            let mut s = T::ZERO;
            self.children(ijk_c, |c| s += r[c]);
            *o = scale * s;
        };
        match par {
            Par::Seq => b_coarse.iter_mut().enumerate().for_each(|(c, o)| f(c, o)),
            Par::Rayon => b_coarse
                .par_iter_mut()
                .with_min_len(4096)
                .enumerate()
                .for_each(|(c, o)| f(c, o)),
        }
    }

    /// `x[c] += scale * e_coarse[parent(c)]` for every cell of this level.
    pub fn prolong_add(&self, par: Par, e_coarse: &[T], coarse: &Level<T>, x: &mut [T], scale: T) {
        let [nx, ny, _] = self.dims;
        let [cx, cy, _] = coarse.dims;
        let row = |r: usize, out: &mut [T]| {
            let (j, k) = (r % ny, r / ny);
            let base = (j / 2) * cx + (k / 2) * cx * cy;
            for (i, o) in out.iter_mut().enumerate() {
                *o += scale * e_coarse[base + i / 2];
            }
        };
        match par {
            Par::Seq => x.chunks_mut(nx).enumerate().for_each(|(r, o)| row(r, o)),
            Par::Rayon => x
                .par_chunks_mut(nx)
                .with_min_len(MIN_ROWS)
                .enumerate()
                .for_each(|(r, o)| row(r, o)),
        }
    }

    /// The same level in another precision.
    pub fn convert<U: Real>(&self) -> Level<U> {
        let cv = |v: &Vec<T>| v.iter().map(|x| U::from_f64(x.to_f64())).collect();
        Level {
            dims: self.dims,
            dim: self.dim,
            scale: self.scale,
            dirichlet: cv(&self.dirichlet),
            weights: self.weights.iter().map(cv).collect(),
        }
    }

    /// The matrix as `(row, col, value)` triplets in f64, rows in order, each row's
    /// entries sorted by column (for tests and the coarsest-level direct solve).
    pub fn triplets(&self) -> Vec<(usize, usize, f64)> {
        let st = self.strides();
        let mut out = Vec::new();
        for c in 0..self.len() {
            let ijk = self.ijk(c);
            let mut row: Vec<(usize, f64)> = Vec::with_capacity(7);
            let d = self.diagonal(c).to_f64();
            if d != 0.0 {
                row.push((c, d));
            }
            for a in 0..self.dim {
                if ijk[a] > 0 {
                    let w = self.weights[a][c].to_f64();
                    if w != 0.0 {
                        row.push((c - st[a], -w));
                    }
                }
                if ijk[a] + 1 < self.dims[a] {
                    let w = self.weights[a][c + st[a]].to_f64();
                    if w != 0.0 {
                        row.push((c + st[a], -w));
                    }
                }
            }
            row.sort_by_key(|e| e.0);
            out.extend(row.into_iter().map(|(j, v)| (c, j, v)));
        }
        out
    }
}
