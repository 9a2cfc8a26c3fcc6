//! Element stiffness and consistent mass matrices of linear isotropic elasticity with the
//! Bernstein-Bézier basis on constant-metric simplices, in closed form (dissertation §4.4.4,
//! Eqs. 4.7-4.8; Weber et al. [WMA+15]).
//!
//! # Setting
//!
//! A `d`-simplex `T` (d = 2 triangles, d = 3 tetrahedra) with vertices `v_0 … v_d` and
//! barycentric coordinates `ξ_0 … ξ_d` (`Σ ξ_i = 1`). Its volume is `|T|` and the gradients of
//! the barycentric coordinates are the constant vectors `b_i = ∇ξ_i` (Eq. 4.8). The DOF
//! dimension is `e = d` (d = 2: plane strain in the x-y plane, see [`crate::material`]).
//!
//! The order-`p` Bernstein-Bézier basis is indexed by multi-indices `α ∈ N^{d+1}`, `|α| = p`,
//! in the local node order of [`crate::multi_index::multi_indices`]:
//!
//! ```text
//! B_α = (p! / α!) ξ^α,      α! = Π α_i!,   ξ^α = Π ξ_i^{α_i}
//! ```
//!
//! # The two rules
//!
//! **Product rule.** For `|α| = p`, `|β| = q`:
//! `B_α B_β = [C(α+β, α) / C(p+q, p)] B_{α+β}` with `C(α+β, α) = Π_i C(α_i+β_i, α_i)`
//! (multiply the prefactors: `p! q! / (α! β!) = C(α+β,α) / C(p+q,p) · (p+q)! / (α+β)!`).
//!
//! **Integral rule.** Every degree-`n` Bernstein polynomial has the same integral,
//! `∫_T B_γ = |T| / C(n+d, d)` (from `∫_T ξ^γ = |T| d! γ! / (n+d)!`).
//!
//! **Derivative rule.** `∂B_α/∂ξ_i = p B^{p-1}_{α-e_i}` (zero when `α_i = 0`), so by the chain
//! rule `∇B_α = p Σ_i B^{p-1}_{α-e_i} b_i`.
//!
//! # Stiffness
//!
//! With `u = B_α e_k`, `v = B_β e_l`, the bilinear form of Eq. 4.7,
//! `a(u, v) = ∫ λ div u div v + 2 μ ε(u) : ε(v)`, gives the `(k, l)` entry of block `(α, β)`:
//!
//! ```text
//! K_αβ = λ G_αβ + μ (G_αβᵀ + tr(G_αβ) I),     G_αβ = ∫_T ∇B_α ∇B_βᵀ   (e × e)
//! ```
//!
//! Inserting the derivative rule and then the product and integral rules:
//!
//! ```text
//! G_αβ = p² Σ_{i,j} ∫ B_{α-e_i} B_{β-e_j} · b_i b_jᵀ
//!      = Σ_{i,j} W_αβij · |T| b_i b_jᵀ,
//! W_αβij = p² C(α-e_i+β-e_j, α-e_i) / ( C(2p-2, p-1) C(2p-2+d, d) )   (0 if α_i = 0 or β_j = 0)
//! ```
//!
//! i.e. a weighted sum of the outer products `b_i b_jᵀ` (dissertation §4.4.4). The weights
//! `W` depend only on `(d, p)` and are tabulated once in [`ElementTemplate`]; per cell only the
//! `(d+1)²` products `P_ij = |T| b_i b_jᵀ` are formed. For `p = 1`, `W_αβij = δ_{αi} δ_{βj}` and
//! `G_ab = |T| b_a b_bᵀ`, the classic linear tetrahedron. Symmetry: `W_βαji = W_αβij`, so
//! `G_βα = G_αβᵀ` and `K_βα = K_αβᵀ`; only blocks with `α <= β` (local index) are stored.
//!
//! # Consistent mass
//!
//! `M_αβ = ρ ∫ B_α B_β · I = ρ |T| C(α+β, α) / ( C(2p, p) C(2p+d, d) ) · I`. Since the basis is
//! a partition of unity, `Σ_αβ M_αβ = ρ |T| I` (tested).
//!
//! # Storage
//!
//! Symmetric element matrices are stored as the upper-triangle blocks `(a, b)`, `a <= b`, in
//! the order of [`sym_index`], each block `e × e` row-major. Dense matrices (for tests) use the
//! DOF order `a e + k`. All element math is `f64`; assembly converts to `f32` on request.

use crate::error::FemError;
use crate::material::Lame;
use crate::multi_index::{binomial, multi_indices};
use tessera_sparse::binbcsr::Scalar;

/// Highest supported polynomial order (binomials and tables stay small).
pub const MAX_ORDER: usize = 12;

/// Index of block `(a, b)`, `a <= b`, in the upper-triangle block order of an `m`-node element.
#[inline(always)]
pub fn sym_index(a: usize, b: usize, m: usize) -> usize {
    debug_assert!(a <= b && b < m);
    // row a starts after Σ_{r<a} (m - r) = a (2m - a + 1) / 2 blocks
    a * (2 * m - a + 1) / 2 + (b - a)
}

/// Number of upper-triangle blocks of an `m`-node element: `m (m + 1) / 2`.
#[inline]
pub fn num_sym_blocks(m: usize) -> usize {
    m * (m + 1) / 2
}

/// Constant geometry of a simplex: volume and barycentric gradients `b_i = ∇ξ_i` (Eq. 4.8).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CellGeometry {
    /// Dimension `d` (2 or 3).
    pub d: usize,
    /// Volume (area for triangles), positive.
    pub volume: f64,
    /// `grads[i][0..d]` = `∇ξ_i`, `i = 0..=d`.
    pub grads: [[f64; 3]; 4],
}

impl CellGeometry {
    /// Geometry of the simplex with vertices `verts[0..=d]` (for d = 2 the x-y coordinates;
    /// the triangle must lie in a plane z = const). `cell` only labels errors.
    pub fn new(d: usize, verts: &[[f64; 3]], cell: usize) -> Result<Self, FemError> {
        let mut grads = [[0.0; 3]; 4];
        match d {
            3 => {
                let c = |i: usize| sub(verts[i], verts[0]);
                let (a, b, cc) = (c(1), c(2), c(3));
                let det = dot(a, cross(b, cc));
                let vol = det.abs() / 6.0;
                let scale = norm(a).max(norm(b)).max(norm(cc));
                if !vol.is_finite() || det.abs() <= 1e-13 * scale * scale * scale {
                    return Err(FemError::DegenerateCell { cell, volume: vol });
                }
                // rows of J^{-1} for J = [a b c] (columns): (b×c, c×a, a×b) / det
                let r1 = cross(b, cc);
                let r2 = cross(cc, a);
                let r3 = cross(a, b);
                for k in 0..3 {
                    grads[1][k] = r1[k] / det;
                    grads[2][k] = r2[k] / det;
                    grads[3][k] = r3[k] / det;
                    grads[0][k] = -(grads[1][k] + grads[2][k] + grads[3][k]);
                }
                Ok(Self {
                    d,
                    volume: vol,
                    grads,
                })
            }
            2 => {
                let scale = norm(sub(verts[1], verts[0])).max(norm(sub(verts[2], verts[0])));
                if (verts[1][2] - verts[0][2]).abs() > 1e-12 * scale
                    || (verts[2][2] - verts[0][2]).abs() > 1e-12 * scale
                {
                    return Err(FemError::NotPlanar { cell });
                }
                let a = [verts[1][0] - verts[0][0], verts[1][1] - verts[0][1]];
                let b = [verts[2][0] - verts[0][0], verts[2][1] - verts[0][1]];
                let det = a[0] * b[1] - a[1] * b[0];
                let vol = det.abs() / 2.0;
                if !vol.is_finite() || det.abs() <= 1e-13 * scale * scale {
                    return Err(FemError::DegenerateCell { cell, volume: vol });
                }
                // J = [a b], J^{-1} = [[b1, -b0], [-a1, a0]] / det
                grads[1] = [b[1] / det, -b[0] / det, 0.0];
                grads[2] = [-a[1] / det, a[0] / det, 0.0];
                grads[0] = [
                    -(grads[1][0] + grads[2][0]),
                    -(grads[1][1] + grads[2][1]),
                    0.0,
                ];
                Ok(Self {
                    d,
                    volume: vol,
                    grads,
                })
            }
            _ => Err(FemError::UnsupportedDimension(d)),
        }
    }
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
fn norm(a: [f64; 3]) -> f64 {
    dot(a, a).sqrt()
}

/// The geometry-independent tables of the order-`p` Bernstein-Bézier element of dimension
/// `d`: the stiffness weights `W_αβij` and the mass weights (see the module docs).
#[derive(Clone, Debug)]
pub struct ElementTemplate {
    d: usize,
    p: usize,
    m: usize,
    alphas: Vec<[u8; 4]>,
    /// The non-zero stiffness weights of each `(a, b)`: `nz[nz_off[a m + b]..nz_off[a m + b + 1]]` =
    /// `(i (d+1) + j, W_abij)` in increasing `i (d+1) + j` (a few of the `(d+1)²`: the
    /// element kernels loop over these only).
    nz_off: Vec<u32>,
    nz: Vec<(u8, f64)>,
    /// Bit `i (d+1) + j` set when some `W_abij` with `a <= b` is non-zero.
    used_ij: u32,
    /// Per local node `a`: bit `i (d+1) + j` set when a non-zero `W` of a block of row `a`
    /// (`W_abij` for `a <= b`, `W_baij` for `b < a`) uses `P_ij` ([`Self::stiffness_row_as`]).
    row_ij: Vec<u32>,
    /// `mass_w[a m + b] = C(α+β, α) / (C(2p, p) C(2p+d, d))`.
    mass_w: Vec<f64>,
}

/// `Π_i C(α_i + β_i, α_i)`.
fn multi_binomial(a: &[u8; 4], b: &[u8; 4]) -> f64 {
    (0..4)
        .map(|i| binomial(a[i] as usize + b[i] as usize, a[i] as usize) as f64)
        .product()
}

impl ElementTemplate {
    /// Tabulate the weights for dimension `d` (2 or 3) and order `p` (1..=[`MAX_ORDER`]).
    pub fn new(d: usize, p: usize) -> Result<Self, FemError> {
        if d != 2 && d != 3 {
            return Err(FemError::UnsupportedDimension(d));
        }
        if !(1..=MAX_ORDER).contains(&p) {
            return Err(FemError::InvalidOrder(p));
        }
        let alphas = multi_indices(d, p);
        let m = alphas.len();
        let nv = d + 1;
        let denom_k = binomial(2 * p - 2, p - 1) as f64 * binomial(2 * p - 2 + d, d) as f64;
        let pp = (p * p) as f64;
        let mut stiff_w = vec![0.0; m * m * nv * nv];
        for a in 0..m {
            for b in 0..m {
                for i in 0..nv {
                    if alphas[a][i] == 0 {
                        continue;
                    }
                    let mut ai = alphas[a];
                    ai[i] -= 1;
                    for j in 0..nv {
                        if alphas[b][j] == 0 {
                            continue;
                        }
                        let mut bj = alphas[b];
                        bj[j] -= 1;
                        stiff_w[(a * m + b) * nv * nv + i * nv + j] =
                            pp * multi_binomial(&ai, &bj) / denom_k;
                    }
                }
            }
        }
        let mut nz_off = Vec::with_capacity(m * m + 1);
        let mut nz = Vec::new();
        nz_off.push(0u32);
        for ab in 0..m * m {
            for ij in 0..nv * nv {
                let w = stiff_w[ab * nv * nv + ij];
                if w != 0.0 {
                    nz.push((ij as u8, w));
                }
            }
            nz_off.push(nz.len() as u32);
        }
        let mut used_ij = 0u32;
        for a in 0..m {
            for b in a..m {
                let ab = a * m + b;
                for &(ij, _) in &nz[nz_off[ab] as usize..nz_off[ab + 1] as usize] {
                    used_ij |= 1 << ij;
                }
            }
        }
        let row_ij = (0..m)
            .map(|a| {
                let mut mask = 0u32;
                for b in 0..m {
                    let ab = if a <= b { a * m + b } else { b * m + a };
                    for &(ij, _) in &nz[nz_off[ab] as usize..nz_off[ab + 1] as usize] {
                        mask |= 1 << ij;
                    }
                }
                mask
            })
            .collect();
        let denom_m = binomial(2 * p, p) as f64 * binomial(2 * p + d, d) as f64;
        let mut mass_w = vec![0.0; m * m];
        for a in 0..m {
            for b in 0..m {
                mass_w[a * m + b] = multi_binomial(&alphas[a], &alphas[b]) / denom_m;
            }
        }
        Ok(Self {
            d,
            p,
            m,
            alphas,
            nz_off,
            nz,
            used_ij,
            row_ij,
            mass_w,
        })
    }

    /// Simplex dimension `d`.
    pub fn dim(&self) -> usize {
        self.d
    }
    /// Polynomial order `p`.
    pub fn order(&self) -> usize {
        self.p
    }
    /// Nodes per element `m = C(p+d, d)`.
    pub fn num_nodes(&self) -> usize {
        self.m
    }
    /// DOF dimension `e` (= `d`).
    pub fn dof_dim(&self) -> usize {
        self.d
    }
    /// Local node multi-indices (local node order).
    pub fn multi_indices(&self) -> &[[u8; 4]] {
        &self.alphas
    }
    /// Local indices of the vertex nodes `p e_i`, `i = 0..=d`.
    pub fn vertex_locals(&self) -> Vec<usize> {
        (0..=self.d)
            .map(|i| {
                self.alphas
                    .iter()
                    .position(|a| a[i] as usize == self.p)
                    .expect("vertex node")
            })
            .collect()
    }
    /// Scalars of one `e × e` block.
    pub fn block_len(&self) -> usize {
        self.d * self.d
    }
    /// Scalars of the symmetric (upper-triangle block) element matrix.
    pub fn sym_len(&self) -> usize {
        num_sym_blocks(self.m) * self.d * self.d
    }

    /// The products `P_ij = |T| b_i b_jᵀ` (row-major `e × e` each, `(d+1)²` of them).
    fn outer_products(&self, g: &CellGeometry) -> [[f64; 9]; 16] {
        let (nv, e) = (self.d + 1, self.d);
        let mut pij = [[0.0; 9]; 16];
        for i in 0..nv {
            for j in 0..nv {
                for k in 0..e {
                    for l in 0..e {
                        pij[i * nv + j][k * e + l] = g.volume * g.grads[i][k] * g.grads[j][l];
                    }
                }
            }
        }
        pij
    }

    /// Stiffness block `K_ab` (row-major `e × e`) from precomputed outer products.
    #[inline]
    fn stiffness_block(
        &self,
        pij: &[[f64; 9]; 16],
        lame: Lame,
        a: usize,
        b: usize,
        out: &mut [f64],
    ) {
        let e = self.d;
        let ab = a * self.m + b;
        let mut gm = [0.0; 9];
        // the non-zero W_abij in increasing ij: the same sums as over all (d+1)² weights
        for &(ij, wij) in &self.nz[self.nz_off[ab] as usize..self.nz_off[ab + 1] as usize] {
            let p = &pij[ij as usize];
            for c in 0..e * e {
                gm[c] += wij * p[c];
            }
        }
        if a == b {
            // G_aa is symmetric in exact arithmetic; make it so in floating point too
            for k in 0..e {
                for l in k + 1..e {
                    let v = 0.5 * (gm[k * e + l] + gm[l * e + k]);
                    gm[k * e + l] = v;
                    gm[l * e + k] = v;
                }
            }
        }
        let tr: f64 = (0..e).map(|k| gm[k * e + k]).sum();
        for k in 0..e {
            for l in 0..e {
                let mut v = lame.lambda * gm[k * e + l] + lame.mu * gm[l * e + k];
                if k == l {
                    v += lame.mu * tr;
                }
                out[k * e + l] = v;
            }
        }
    }

    /// Symmetric element stiffness matrix: blocks `(a, b)`, `a <= b`, in [`sym_index`] order.
    /// `out.len()` must be [`Self::sym_len`].
    pub fn stiffness_sym(&self, g: &CellGeometry, lame: Lame, out: &mut [f64]) {
        let pij = self.outer_products(g);
        let e2 = self.block_len();
        let mut s = 0;
        for a in 0..self.m {
            for b in a..self.m {
                self.stiffness_block(&pij, lame, a, b, &mut out[s * e2..(s + 1) * e2]);
                s += 1;
            }
        }
    }

    /// [`Self::stiffness_sym`] converted to `T` as it is computed (no intermediate `f64`
    /// matrix; the values are the same bit for bit).
    pub fn stiffness_sym_as<T: Scalar>(&self, g: &CellGeometry, lame: Lame, out: &mut [T]) {
        match self.d {
            3 => self.stiffness_sym_e::<T, 3, 9>(g, lame, out),
            _ => self.stiffness_sym_e::<T, 2, 4>(g, lame, out),
        }
    }

    /// [`Self::stiffness_sym_as`] for dimension `E` (`E2 = E²`): only the outer products
    /// that some weight uses, fixed-size blocks, the same operations in the same order as
    /// [`Self::outer_products`] and [`Self::stiffness_block`].
    fn stiffness_sym_e<T: Scalar, const E: usize, const E2: usize>(
        &self,
        g: &CellGeometry,
        lame: Lame,
        out: &mut [T],
    ) {
        let nv = E + 1;
        let mut vb = [[0.0f64; 3]; 4];
        for (v, gr) in vb.iter_mut().zip(&g.grads).take(nv) {
            for k in 0..E {
                v[k] = g.volume * gr[k];
            }
        }
        let mut pij = [[0.0f64; E2]; 16];
        for (ij, pq) in pij.iter_mut().enumerate().take(nv * nv) {
            if self.used_ij & (1 << ij) != 0 {
                let (i, j) = (ij / nv, ij % nv);
                for k in 0..E {
                    for l in 0..E {
                        pq[k * E + l] = vb[i][k] * g.grads[j][l];
                    }
                }
            }
        }
        let mut s = 0;
        for a in 0..self.m {
            for b in a..self.m {
                let ab = a * self.m + b;
                let mut gm = [0.0f64; E2];
                for &(ij, wij) in &self.nz[self.nz_off[ab] as usize..self.nz_off[ab + 1] as usize] {
                    let p = &pij[ij as usize];
                    for c in 0..E2 {
                        gm[c] += wij * p[c];
                    }
                }
                out[s * E2..(s + 1) * E2].copy_from_slice(&lame_block::<T, E, E2>(
                    gm,
                    lame,
                    true,
                    a == b,
                ));
                s += 1;
            }
        }
    }

    /// Row `a` of the element stiffness matrix in `T`: `add(b, K_ab)` for every local node
    /// `b` in increasing order (`K_ab` an `e × e` row-major block). Each block is computed
    /// from the cell's geometry with the operations of [`Self::stiffness_sym_as`] in the same
    /// order (blocks below the diagonal as the transposed upper block), so it equals the
    /// stored element block bit for bit; only the outer products `P_ij` that row `a` uses
    /// are formed. The kernel of the inline summation (dissertation §4.4.4, "Inline").
    #[inline]
    pub fn stiffness_row_with<T: Scalar, const E: usize, const E2: usize>(
        &self,
        g: &CellGeometry,
        lame: Lame,
        a: usize,
        mut add: impl FnMut(usize, [T; E2]),
    ) {
        if self.p == 1 {
            return self.stiffness_row_linear::<T, E, E2>(g, lame, a, add);
        }
        let nv = E + 1;
        let m = self.m;
        let mut vb = [[0.0f64; 3]; 4];
        for (v, gr) in vb.iter_mut().zip(&g.grads).take(nv) {
            for k in 0..E {
                v[k] = g.volume * gr[k];
            }
        }
        let used = self.row_ij[a];
        let mut pij = [[0.0f64; E2]; 16];
        for (ij, pq) in pij.iter_mut().enumerate().take(nv * nv) {
            if used & (1 << ij) != 0 {
                let (i, j) = (ij / nv, ij % nv);
                for k in 0..E {
                    for l in 0..E {
                        pq[k * E + l] = vb[i][k] * g.grads[j][l];
                    }
                }
            }
        }
        for b in 0..m {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let ab = lo * m + hi;
            let mut gm = [0.0f64; E2];
            for &(ij, wij) in &self.nz[self.nz_off[ab] as usize..self.nz_off[ab + 1] as usize] {
                let p = &pij[ij as usize];
                for c in 0..E2 {
                    gm[c] += wij * p[c];
                }
            }
            add(b, lame_block::<T, E, E2>(gm, lame, a <= b, lo == hi));
        }
    }

    /// [`Self::stiffness_row_with`] for `p = 1`, where local node `a` is vertex `a` and the
    /// only non-zero weight of block `(a, b)` is `W_abab = 1`, so `G_ab = 0 + 1 · P_ab` with
    /// `P_ab = (|T| b_a) b_bᵀ` (blocks below the diagonal from `P_ba`, as stored). The same
    /// operations in the same order as the general kernel, without its weight tables or the
    /// products row `a` does not use: the values are equal bit for bit.
    #[inline(always)]
    fn stiffness_row_linear<T: Scalar, const E: usize, const E2: usize>(
        &self,
        g: &CellGeometry,
        lame: Lame,
        a: usize,
        mut add: impl FnMut(usize, [T; E2]),
    ) {
        debug_assert_eq!(self.m, E + 1);
        for b in 0..=E {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let mut gm = [0.0f64; E2];
            for k in 0..E {
                let v = g.volume * g.grads[lo][k];
                for l in 0..E {
                    // `0 + W · P` with `W = 1`, as the general kernel sums it
                    gm[k * E + l] = 0.0 + 1.0 * (v * g.grads[hi][l]);
                }
            }
            add(b, lame_block::<T, E, E2>(gm, lame, a <= b, lo == hi));
        }
    }

    /// Row `a` of the consistent mass matrix in `T` (`add(b, M_ab)`, `b` increasing), equal
    /// bit for bit to the blocks of [`Self::mass_sym_as`].
    #[inline]
    pub fn mass_row_with<T: Scalar, const E: usize, const E2: usize>(
        &self,
        g: &CellGeometry,
        density: f64,
        a: usize,
        mut add: impl FnMut(usize, [T; E2]),
    ) {
        let m = self.m;
        for b in 0..m {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let v = T::from_f64(density * g.volume * self.mass_w[lo * m + hi]);
            let mut blk = [T::ZERO; E2];
            for k in 0..E {
                blk[k * E + k] = v;
            }
            add(b, blk);
        }
    }

    /// [`Self::mass_sym`] converted to `T`.
    pub fn mass_sym_as<T: Scalar>(&self, g: &CellGeometry, density: f64, out: &mut [T]) {
        let e = self.d;
        let e2 = e * e;
        let mut s = 0;
        for a in 0..self.m {
            for b in a..self.m {
                let v = T::from_f64(density * g.volume * self.mass_w[a * self.m + b]);
                let blk = &mut out[s * e2..(s + 1) * e2];
                blk.fill(T::ZERO);
                for k in 0..e {
                    blk[k * e + k] = v;
                }
                s += 1;
            }
        }
    }

    /// Row `a` of the element stiffness matrix: blocks `(a, b)` for all `b`, `m e²` scalars.
    /// Used by the inline summation (element matrices computed inside the summation).
    pub fn stiffness_row(&self, g: &CellGeometry, lame: Lame, a: usize, out: &mut [f64]) {
        let pij = self.outer_products(g);
        let e2 = self.block_len();
        let e = self.d;
        let mut tmp = [0.0; 9];
        for b in 0..self.m {
            let blk = &mut out[b * e2..(b + 1) * e2];
            if b >= a {
                self.stiffness_block(&pij, lame, a, b, blk);
            } else {
                // K_ab = K_baᵀ, computed as the stored (upper) block so the assembled matrix
                // is exactly symmetric, whichever summation produced it
                self.stiffness_block(&pij, lame, b, a, &mut tmp);
                for k in 0..e {
                    for l in 0..e {
                        blk[k * e + l] = tmp[l * e + k];
                    }
                }
            }
        }
    }

    /// Symmetric consistent mass matrix (blocks `ρ |T| w_ab I`, [`sym_index`] order).
    pub fn mass_sym(&self, g: &CellGeometry, density: f64, out: &mut [f64]) {
        let e = self.d;
        let e2 = e * e;
        let mut s = 0;
        for a in 0..self.m {
            for b in a..self.m {
                let v = density * g.volume * self.mass_w[a * self.m + b];
                let blk = &mut out[s * e2..(s + 1) * e2];
                blk.fill(0.0);
                for k in 0..e {
                    blk[k * e + k] = v;
                }
                s += 1;
            }
        }
    }

    /// Row `a` of the consistent mass matrix (`m e²` scalars).
    pub fn mass_row(&self, g: &CellGeometry, density: f64, a: usize, out: &mut [f64]) {
        let e = self.d;
        let e2 = e * e;
        for b in 0..self.m {
            let v = density * g.volume * self.mass_w[a * self.m + b];
            let blk = &mut out[b * e2..(b + 1) * e2];
            blk.fill(0.0);
            for k in 0..e {
                blk[k * e + k] = v;
            }
        }
    }

    /// Dense `(m e) × (m e)` stiffness matrix, DOF order `a e + k` (for tests and tools).
    pub fn stiffness_dense(&self, g: &CellGeometry, lame: Lame) -> Vec<f64> {
        let mut sym = vec![0.0; self.sym_len()];
        self.stiffness_sym(g, lame, &mut sym);
        self.expand(&sym)
    }

    /// Dense `(m e) × (m e)` consistent mass matrix.
    pub fn mass_dense(&self, g: &CellGeometry, density: f64) -> Vec<f64> {
        let mut sym = vec![0.0; self.sym_len()];
        self.mass_sym(g, density, &mut sym);
        self.expand(&sym)
    }

    /// Expand upper-triangle blocks to the dense symmetric matrix.
    pub fn expand(&self, sym: &[f64]) -> Vec<f64> {
        let (m, e) = (self.m, self.d);
        let n = m * e;
        let mut out = vec![0.0; n * n];
        for a in 0..m {
            for b in a..m {
                let blk = &sym[sym_index(a, b, m) * e * e..][..e * e];
                for k in 0..e {
                    for l in 0..e {
                        out[(a * e + k) * n + b * e + l] = blk[k * e + l];
                        out[(b * e + l) * n + a * e + k] = blk[k * e + l];
                    }
                }
            }
        }
        out
    }
}

/// Block `(a, b)` of a stiffness row from `G` (dissertation §4.4.3), shared by the general and
/// the `p = 1` row kernels: a diagonal block (`lo == hi`) has `G` symmetrized first; stored
/// entry (k, l) = λ G_kl + μ G_lk (+ μ tr G on the diagonal). Below the diagonal of the
/// element matrix (`upper == false`) the block is the stored one transposed, whose entry
/// (k, l) = λ G_lk + μ G_kl: the same two products, added in swapped order (an exact
/// operation).
#[inline(always)]
fn lame_block<T: Scalar, const E: usize, const E2: usize>(
    mut gm: [f64; E2],
    lame: Lame,
    upper: bool,
    diagonal: bool,
) -> [T; E2] {
    if diagonal {
        for k in 0..E {
            for l in k + 1..E {
                let v = 0.5 * (gm[k * E + l] + gm[l * E + k]);
                gm[k * E + l] = v;
                gm[l * E + k] = v;
            }
        }
    }
    let mut tr = 0.0;
    for k in 0..E {
        tr += gm[k * E + k];
    }
    let (x, y) = if upper {
        (lame.lambda, lame.mu)
    } else {
        (lame.mu, lame.lambda)
    };
    let mut blk = [T::ZERO; E2];
    for k in 0..E {
        for l in 0..E {
            let mut v = x * gm[k * E + l] + y * gm[l * E + k];
            if k == l {
                v += lame.mu * tr;
            }
            blk[k * E + l] = T::from_f64(v);
        }
    }
    blk
}
