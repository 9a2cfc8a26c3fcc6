//! The CPU reference of one Runge-Kutta stage on one 16x16 tile, operation by operation the
//! computation of `shallow_water.cu` (`tile_stage`), so both produce the same bits.
//!
//! Notation (Kurganov & Petrova 2007; Brodtkorb et al. 2012): `w = h + B` (water surface),
//! `hu`, `hv` momenta, cell averages; `B` piecewise bilinear from the cell corners, so a
//! face's `B` is the mean of its two corners and the cell's `B` the mean of its four.
//!
//! 1. *Reconstruction* per direction with the generalized minmod limiter
//!    `s = minmod(theta (U_i - U_{i-1}), (U_{i+1} - U_{i-1}) / 2, theta (U_{i+1} - U_i))`,
//!    face values `U +- s / 2`; where a face's `w` falls below its `B` the slope is reduced so
//!    that face depth is zero (positivity, KP07 §2.2). Face velocities are desingularized,
//!    `u = sqrt(2) h (hu) / sqrt(h^4 + max(h^4, eps))`, and momenta rebuilt as `h u`.
//! 2. *Central-upwind flux* with `a+ = max(u_L + c_L, u_R + c_R, 0)`,
//!    `a- = min(u_L - c_L, u_R - c_R, 0)`, written as
//!    `H = F_L + (a- (F_L - F_R) + a+ a- (U_R - U_L)) / (a+ - a-)` (the same as KP07's form;
//!    it gives `H = F_L` exactly when both sides agree). Walls: no mass flux, the inside
//!    pressure `g h^2 / 2`, no tangential flux.
//! 3. *Well-balanced source*: the `hu` right-hand side is
//!    `((p_E - p_W) - (H_E - H_W)) / dx - g (w_E - w_W)(h_E + h_W) / (2 dx)`, which equals
//!    `-(H_E - H_W)/dx - g (B_E - B_W)(h_E + h_W) / (2 dx)` of KP07 and cancels to exactly
//!    zero (not merely to rounding) for a lake at rest.
//! 4. *Time*: SSP-RK2, `U* = U + dt L(U)`, `U^{n+1} = (U + (U* + dt L(U*))) / 2`, with
//!    `dt = CFL dx / max a` (CFL 1/4, positivity) from the first stage. A cell whose depth is
//!    not positive after a stage is set dry (`w = B`, no momentum); the largest negative depth
//!    met is reported (rounding only). In cells thinner than `kappa` the momenta become
//!    `h u` with the desingularized `u` (KP07), and Darcy-Weisbach bed friction
//!    `du/dt = -f |u| u / (8 h)` is applied semi-implicitly; both keep the thin films at
//!    fronts over sloping ground from racing (f = 0 gives the frictionless scheme).

/// Tile side in cells.
pub const T: usize = 16;
const R: usize = T + 4;
const SQRT2: f64 = std::f64::consts::SQRT_2;

/// Scalar parameters of a stage (the GPU's parameter block).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StageParams {
    pub nx: usize,
    pub ny: usize,
    pub dx: f64,
    pub g: f64,
    pub theta: f64,
    /// Desingularization `eps` (a depth to the fourth power).
    pub eps: f64,
    pub cfl: f64,
    pub dt_max: f64,
    /// Rain rate (m/s) inside the disc `(x - rx)^2 + (y - ry)^2 <= r2`.
    pub rain: f64,
    pub rain_x: f64,
    pub rain_y: f64,
    pub rain_r2: f64,
    /// Depth below which cell momenta are desingularized after each stage (`eps = kappa^4`).
    pub kappa: f64,
    /// Darcy-Weisbach bed friction factor `f` (0: frictionless).
    pub friction: f64,
}

impl StageParams {
    pub fn tiles_x(&self) -> usize {
        self.nx.div_ceil(T)
    }
    pub fn tiles_y(&self) -> usize {
        self.ny.div_ceil(T)
    }
    /// The block uploaded to the GPU (order of `load_params` in the kernel source).
    pub fn param_block(&self) -> [f64; 12] {
        [
            self.dx,
            self.g,
            self.theta,
            self.eps,
            self.cfl,
            self.dt_max,
            self.rain,
            self.rain_x,
            self.rain_y,
            self.rain_r2,
            self.kappa,
            self.friction,
        ]
    }
    /// `dt = min(cfl dx / amax, dt_max)`, `dt_max` when nothing moves.
    pub fn dt(&self, amax: f64) -> f64 {
        if amax > 0.0 {
            dmin((self.cfl * self.dx) / amax, self.dt_max)
        } else {
            self.dt_max
        }
    }
}

#[inline]
pub(crate) fn dmax(a: f64, b: f64) -> f64 {
    if a > b {
        a
    } else {
        b
    }
}
#[inline]
pub(crate) fn dmin(a: f64, b: f64) -> f64 {
    if a < b {
        a
    } else {
        b
    }
}

#[inline]
fn minmod3(a: f64, b: f64, c: f64) -> f64 {
    if a > 0.0 && b > 0.0 && c > 0.0 {
        dmin(dmin(a, b), c)
    } else if a < 0.0 && b < 0.0 && c < 0.0 {
        dmax(dmax(a, b), c)
    } else {
        0.0
    }
}

#[inline]
fn slope(m: f64, c: f64, p: f64, theta: f64) -> f64 {
    minmod3(theta * (c - m), 0.5 * (p - m), theta * (p - c))
}

/// The desingularization factor `k = sqrt(2) h / sqrt(h^4 + max(h^4, eps))`, `u = k q`.
#[inline]
pub fn desing_factor(h: f64, eps: f64) -> f64 {
    let h2 = h * h;
    let h4 = h2 * h2;
    (SQRT2 * h) / (h4 + dmax(h4, eps)).sqrt()
}

/// Desingularized velocity `sqrt(2) h q / sqrt(h^4 + max(h^4, eps))` (as `k q`).
#[inline]
pub fn desing(h: f64, q: f64, eps: f64) -> f64 {
    desing_factor(h, eps) * q
}

#[inline]
fn pressure(h: f64, halfg: f64) -> f64 {
    (halfg * h) * h
}

#[derive(Clone, Copy, Debug, Default)]
struct Face {
    w: f64,
    h: f64,
    u: f64,
    v: f64,
}

#[allow(clippy::too_many_arguments)]
#[inline]
fn reconstruct(
    wm: f64,
    w0: f64,
    wp: f64,
    qm: f64,
    q0: f64,
    qp: f64,
    tm: f64,
    t0: f64,
    tp: f64,
    blo: f64,
    bhi: f64,
    p: &StageParams,
) -> (Face, Face) {
    let sw = slope(wm, w0, wp, p.theta);
    let sq = slope(qm, q0, qp, p.theta);
    let st = slope(tm, t0, tp, p.theta);
    let mut whi = w0 + 0.5 * sw;
    let mut wlo = w0 - 0.5 * sw;
    if whi < bhi {
        whi = bhi;
        wlo = 2.0 * w0 - bhi;
    } else if wlo < blo {
        wlo = blo;
        whi = 2.0 * w0 - blo;
    }
    let mut hhi = whi - bhi;
    if !(hhi > 0.0) {
        hhi = 0.0;
    }
    let mut hlo = wlo - blo;
    if !(hlo > 0.0) {
        hlo = 0.0;
    }
    let (qhi, qlo) = (q0 + 0.5 * sq, q0 - 0.5 * sq);
    let (thi, tlo) = (t0 + 0.5 * st, t0 - 0.5 * st);
    let (khi, klo) = (desing_factor(hhi, p.eps), desing_factor(hlo, p.eps));
    (
        Face {
            w: wlo,
            h: hlo,
            u: klo * qlo,
            v: klo * tlo,
        },
        Face {
            w: whi,
            h: hhi,
            u: khi * qhi,
            v: khi * thi,
        },
    )
}

#[inline]
fn flux(l: &Face, r: &Face, g: f64, halfg: f64) -> ([f64; 3], f64) {
    let (cl, cr) = ((g * l.h).sqrt(), (g * r.h).sqrt());
    let ap = dmax(dmax(l.u + cl, r.u + cr), 0.0);
    let am = dmin(dmin(l.u - cl, r.u - cr), 0.0);
    let (ql, qr) = (l.h * l.u, r.h * r.u);
    let (tl, tr) = (l.h * l.v, r.h * r.v);
    let fl = [ql, ql * l.u + pressure(l.h, halfg), ql * l.v];
    let fr = [qr, qr * r.u + pressure(r.h, halfg), qr * r.v];
    let den = ap - am;
    let out = if den > 0.0 {
        let (apm, inv) = (ap * am, 1.0 / den);
        [
            fl[0] + (am * (fl[0] - fr[0]) + apm * (r.w - l.w)) * inv,
            fl[1] + (am * (fl[1] - fr[1]) + apm * (qr - ql)) * inv,
            fl[2] + (am * (fl[2] - fr[2]) + apm * (tr - tl)) * inv,
        ]
    } else {
        [0.0; 3]
    };
    (out, dmax(ap, -am))
}

#[inline]
fn wall_flux(inside: &Face, g: f64, halfg: f64) -> ([f64; 3], f64) {
    (
        [0.0, pressure(inside.h, halfg), 0.0],
        inside.u.abs() + (g * inside.h).sqrt(),
    )
}

#[inline]
fn mirror(i: i64, n: usize) -> (usize, bool) {
    let n = n as i64;
    let (i, flip) = if i < 0 {
        (-1 - i, true)
    } else if i >= n {
        (2 * n - 1 - i, true)
    } else {
        (i, false)
    };
    (i.clamp(0, n - 1) as usize, flip)
}

/// After each stage: a cell with a non-positive depth is set dry (`neg` tracks the largest
/// negative depth); in cells thinner than `kappa` the momenta are rebuilt from desingularized
/// velocities (KP07); bed friction `du/dt = -f |u| u / (8 h)` (Darcy-Weisbach) is applied
/// semi-implicitly over `dt`.
#[inline]
pub(crate) fn clamp_cell(
    w: &mut f64,
    hu: &mut f64,
    hv: &mut f64,
    b: f64,
    p: &StageParams,
    dt: f64,
    neg: &mut f64,
) {
    let h = *w - b;
    if !(h > 0.0) {
        if h < 0.0 && -h > *neg {
            *neg = -h;
        }
        *w = b;
        *hu = 0.0;
        *hv = 0.0;
        return;
    }
    if h < p.kappa {
        let k = desing_factor(h, p.eps);
        *hu = h * (k * *hu);
        *hv = h * (k * *hv);
    }
    if p.friction > 0.0 {
        let ih = 1.0 / h;
        let (u, v) = (*hu * ih, *hv * ih);
        let sp = (u * u + v * v).sqrt();
        let k = 1.0 / (1.0 + dt * (((p.friction * 0.125) * sp) * ih));
        *hu *= k;
        *hv *= k;
    }
}

/// Stage 2's extra inputs: `L(U^n)` (three components), the tiles' active flags, `dt`.
pub type StageTwo<'a> = (&'a [f64], &'a [f64], &'a [f64], &'a [u32], f64);

/// Read-only inputs of a stage.
pub struct StageInput<'a> {
    pub w: &'a [f64],
    pub hu: &'a [f64],
    pub hv: &'a [f64],
    /// Cell-centre bathymetry (mean of the four corners).
    pub bc: &'a [f64],
    /// Corner bathymetry, `(nx + 1) x (ny + 1)`.
    pub corners: &'a [f32],
    /// Stage 2 only: `L(U^n)` and the active flags of the tiles, and `dt`.
    pub r1: Option<StageTwo<'a>>,
}

/// What one tile's stage produced: per in-domain cell of the tile (row-major 16x16,
/// `None` outside the domain) three values (stage 1: `L(U)`; stage 2: `U^{n+1}`), the
/// tile's largest wave speed (stage 1), wet flag (stage 2) and largest negative depth.
pub struct TileOut {
    pub cells: [[f64; 3]; T * T],
    pub amax: f64,
    pub wet: bool,
    pub neg: f64,
}

/// One stage on tile `tile` (see the module docs).
pub fn tile_stage(tile: usize, p: &StageParams, inp: &StageInput<'_>) -> TileOut {
    let tx_n = p.tiles_x();
    let (i0, j0) = ((tile % tx_n) * T, (tile / tx_n) * T);
    let halfg = 0.5 * p.g;
    let idx = 1.0 / p.dx;
    let mut neg = 0.0f64;
    let mut sw = [[0.0f64; R]; R];
    let mut su = [[0.0f64; R]; R];
    let mut sv = [[0.0f64; R]; R];
    let mut sb = [[0.0f64; R]; R];
    for lj in 0..R {
        for li in 0..R {
            let (si, fx) = mirror(i0 as i64 - 2 + li as i64, p.nx);
            let (sj, fy) = mirror(j0 as i64 - 2 + lj as i64, p.ny);
            let s = si + p.nx * sj;
            let (mut cw, mut cu, mut cv, cb) = (inp.w[s], inp.hu[s], inp.hv[s], inp.bc[s]);
            if let Some((rw, ru, rv, active, dt)) = inp.r1 {
                let st = si / T + tx_n * (sj / T);
                if active[st] != 0 {
                    cw += dt * rw[s];
                    cu += dt * ru[s];
                    cv += dt * rv[s];
                    clamp_cell(&mut cw, &mut cu, &mut cv, cb, p, dt, &mut neg);
                }
            }
            sw[lj][li] = cw;
            su[lj][li] = if fx { -cu } else { cu };
            sv[lj][li] = if fy { -cv } else { cv };
            sb[lj][li] = cb;
        }
    }
    let mut sc = [[0.0f64; T + 3]; T + 3];
    for (cj, row) in sc.iter_mut().enumerate() {
        for (ci, c) in row.iter_mut().enumerate() {
            let gi = (i0 as i64 - 1 + ci as i64).clamp(0, p.nx as i64) as usize;
            let gj = (j0 as i64 - 1 + cj as i64).clamp(0, p.ny as i64) as usize;
            *c = inp.corners[gi + (p.nx + 1) * gj] as f64;
        }
    }
    let mut amax = 0.0f64;
    let mut r = [[0.0f64; 3]; T * T];
    let mut lo = [[Face::default(); T + 2]; T];
    let mut hi = [[Face::default(); T + 2]; T];
    let mut f = [[[0.0f64; 3]; T + 1]; T];
    // x direction
    for row in 0..T {
        for cell in 0..T + 2 {
            let (li, lj) = (cell + 1, row + 2);
            let blo = 0.5 * (sc[row + 1][cell] + sc[row + 2][cell]);
            let bhi = 0.5 * (sc[row + 1][cell + 1] + sc[row + 2][cell + 1]);
            let (a, b) = reconstruct(
                sw[lj][li - 1],
                sw[lj][li],
                sw[lj][li + 1],
                su[lj][li - 1],
                su[lj][li],
                su[lj][li + 1],
                sv[lj][li - 1],
                sv[lj][li],
                sv[lj][li + 1],
                blo,
                bhi,
                p,
            );
            lo[row][cell] = a;
            hi[row][cell] = b;
        }
    }
    for row in 0..T {
        for face in 0..T + 1 {
            let gi = i0 + face;
            let (fl, a) = if gi == 0 {
                wall_flux(&lo[row][face + 1], p.g, halfg)
            } else if gi == p.nx {
                wall_flux(&hi[row][face], p.g, halfg)
            } else {
                flux(&hi[row][face], &lo[row][face + 1], p.g, halfg)
            };
            f[row][face] = fl;
            if gi <= p.nx && j0 + row < p.ny {
                amax = dmax(amax, a);
            }
        }
    }
    for ty in 0..T {
        for tx in 0..T {
            let (w_, e) = (&lo[ty][tx + 1], &hi[ty][tx + 1]);
            let (fw, fe) = (&f[ty][tx], &f[ty][tx + 1]);
            let (pe, pw) = (pressure(e.h, halfg), pressure(w_.h, halfg));
            let c = &mut r[tx + T * ty];
            c[0] = -((fe[0] - fw[0]) * idx);
            c[1] = ((pe - pw) - (fe[1] - fw[1])) * idx
                - (((p.g * (e.w - w_.w)) * (e.h + w_.h)) * 0.5) * idx;
            c[2] = -((fe[2] - fw[2]) * idx);
        }
    }
    // y direction
    for col in 0..T {
        for cell in 0..T + 2 {
            let (li, lj) = (col + 2, cell + 1);
            let blo = 0.5 * (sc[cell][col + 1] + sc[cell][col + 2]);
            let bhi = 0.5 * (sc[cell + 1][col + 1] + sc[cell + 1][col + 2]);
            let (a, b) = reconstruct(
                sw[lj - 1][li],
                sw[lj][li],
                sw[lj + 1][li],
                sv[lj - 1][li],
                sv[lj][li],
                sv[lj + 1][li],
                su[lj - 1][li],
                su[lj][li],
                su[lj + 1][li],
                blo,
                bhi,
                p,
            );
            lo[col][cell] = a;
            hi[col][cell] = b;
        }
    }
    for col in 0..T {
        for face in 0..T + 1 {
            let gj = j0 + face;
            let (fl, a) = if gj == 0 {
                wall_flux(&lo[col][face + 1], p.g, halfg)
            } else if gj == p.ny {
                wall_flux(&hi[col][face], p.g, halfg)
            } else {
                flux(&hi[col][face], &lo[col][face + 1], p.g, halfg)
            };
            f[col][face] = fl;
            if gj <= p.ny && i0 + col < p.nx {
                amax = dmax(amax, a);
            }
        }
    }
    let mut wet = false;
    for ty in 0..T {
        for tx in 0..T {
            let (s_, n) = (&lo[tx][ty + 1], &hi[tx][ty + 1]);
            let (fs, fnn) = (&f[tx][ty], &f[tx][ty + 1]);
            let (pn, ps) = (pressure(n.h, halfg), pressure(s_.h, halfg));
            let c = &mut r[tx + T * ty];
            c[0] -= (fnn[0] - fs[0]) * idx;
            c[2] += ((pn - ps) - (fnn[1] - fs[1])) * idx
                - (((p.g * (n.w - s_.w)) * (n.h + s_.h)) * 0.5) * idx;
            c[1] -= (fnn[2] - fs[2]) * idx;
            let (gi, gj) = (i0 + tx, j0 + ty);
            if gi >= p.nx || gj >= p.ny {
                continue;
            }
            if p.rain > 0.0 {
                let x = (gi as f64 + 0.5) * p.dx - p.rain_x;
                let y = (gj as f64 + 0.5) * p.dx - p.rain_y;
                if x * x + y * y <= p.rain_r2 {
                    c[0] += p.rain;
                }
            }
            if let Some((_, _, _, _, dt)) = inp.r1 {
                let s = gi + p.nx * gj;
                let (cw, cu, cv, b) = (
                    sw[ty + 2][tx + 2],
                    su[ty + 2][tx + 2],
                    sv[ty + 2][tx + 2],
                    sb[ty + 2][tx + 2],
                );
                let mut nw = 0.5 * (inp.w[s] + (cw + dt * c[0]));
                let mut nu = 0.5 * (inp.hu[s] + (cu + dt * c[1]));
                let mut nv = 0.5 * (inp.hv[s] + (cv + dt * c[2]));
                clamp_cell(&mut nw, &mut nu, &mut nv, b, p, dt, &mut neg);
                *c = [nw, nu, nv];
                wet |= nw - b > 0.0;
            }
        }
    }
    TileOut {
        cells: r,
        amax,
        wet,
        neg,
    }
}
