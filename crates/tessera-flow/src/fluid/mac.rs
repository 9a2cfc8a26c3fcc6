//! The staggered (MAC) grid of dissertation §6.3.2 (Fig. 6.6; Harlow and Welch): pressure
//! and scalars at cell centres, the normal velocity component `u_a` on the faces normal to
//! axis `a`, and the CPU reference of every operation of a time step. Each function here is
//! one GPU kernel (`src/cuda/kernels/flow.cu`), with the same arithmetic in f32 and the same
//! order of operations, so the two agree to rounding.
//!
//! Positions are in grid units (cell `(i, j, k)` spans `[i, i+1] x [j, j+1] x [k, k+1]`).
//! An array whose sample `(i, j, k)` sits at `(i, j, k) + off` is sampled (multi)linearly,
//! with the position clamped to the samples' range: cell values have `off = (1/2, 1/2, 1/2)`,
//! the faces of axis `a` the same with `off_a = 0`.

use rayon::prelude::*;

/// Index geometry of a MAC grid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mac {
    /// Cells per axis (`dims[2] == 1` in 2D).
    pub dims: [usize; 3],
    /// 2 or 3.
    pub dim: usize,
}

/// Sample offsets of cell-centred values.
pub const CELL: [f32; 3] = [0.5, 0.5, 0.5];

impl Mac {
    pub fn cells(&self) -> usize {
        self.dims[0] * self.dims[1] * self.dims[2]
    }
    /// Sample counts of the faces normal to axis `a`.
    pub fn face_dims(&self, a: usize) -> [usize; 3] {
        let mut d = self.dims;
        d[a] += 1;
        d
    }
    pub fn faces(&self, a: usize) -> usize {
        let d = self.face_dims(a);
        d[0] * d[1] * d[2]
    }
    /// Sample offsets of the faces normal to axis `a`.
    pub fn face_offset(a: usize) -> [f32; 3] {
        let mut o = CELL;
        o[a] = 0.0;
        o
    }
}

/// Base index and weights of a clamped (multi)linear sample: returns `(i0, t)` per axis.
#[inline(always)]
fn locate(n: [usize; 3], off: [f32; 3], g: [f32; 3], dim: usize) -> ([usize; 3], [f32; 3]) {
    let mut i0 = [0usize; 3];
    let mut t = [0.0f32; 3];
    for a in 0..dim {
        let hi = (n[a] - 1) as f32;
        let s = (g[a] - off[a]).max(0.0).min(hi);
        let f = s.floor();
        let mut i = f as usize;
        if i + 1 >= n[a] {
            i = n[a].saturating_sub(2);
        }
        i0[a] = i;
        t[a] = if n[a] > 1 { s - i as f32 } else { 0.0 };
    }
    (i0, t)
}

/// Multilinear sample of `q` (dims `n`, offsets `off`) at grid position `g`.
#[inline(always)]
pub fn sample(q: &[f32], n: [usize; 3], off: [f32; 3], g: [f32; 3], dim: usize) -> f32 {
    let (i0, t) = locate(n, off, g, dim);
    let sy = n[0];
    let sz = n[0] * n[1];
    let c = i0[0] + sy * i0[1] + sz * i0[2];
    let dx = if n[0] > 1 { 1 } else { 0 };
    let dy = if n[1] > 1 { sy } else { 0 };
    let x0 = q[c] + t[0] * (q[c + dx] - q[c]);
    let x1 = q[c + dy] + t[0] * (q[c + dy + dx] - q[c + dy]);
    let y0 = x0 + t[1] * (x1 - x0);
    if dim == 2 {
        return y0;
    }
    let dz = if n[2] > 1 { sz } else { 0 };
    let c2 = c + dz;
    let x2 = q[c2] + t[0] * (q[c2 + dx] - q[c2]);
    let x3 = q[c2 + dy] + t[0] * (q[c2 + dy + dx] - q[c2 + dy]);
    let y1 = x2 + t[1] * (x3 - x2);
    y0 + t[2] * (y1 - y0)
}

/// Minimum and maximum of the samples [`sample`] interpolates at `g`.
#[inline(always)]
pub fn sample_range(
    q: &[f32],
    n: [usize; 3],
    off: [f32; 3],
    g: [f32; 3],
    dim: usize,
) -> (f32, f32) {
    let (i0, _) = locate(n, off, g, dim);
    let sy = n[0];
    let sz = n[0] * n[1];
    let c = i0[0] + sy * i0[1] + sz * i0[2];
    let dx = if n[0] > 1 { 1 } else { 0 };
    let dy = if n[1] > 1 { sy } else { 0 };
    let dz = if dim == 3 && n[2] > 1 { sz } else { 0 };
    let mut lo = q[c];
    let mut hi = q[c];
    let nz = if dim == 3 { 2 } else { 1 };
    for kz in 0..nz {
        for ky in 0..2 {
            for kx in 0..2 {
                let v = q[c + kx * dx + ky * dy + kz * dz];
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
    }
    (lo, hi)
}

/// The velocity at grid position `g`, in grid cells per unit of the caller's time scale
/// `s` (`s = dt / h` gives displacement in cells per step).
#[inline(always)]
pub fn velocity(mac: &Mac, vel: &[&[f32]; 3], g: [f32; 3], s: f32) -> [f32; 3] {
    let mut u = [0.0f32; 3];
    for a in 0..mac.dim {
        u[a] = s * sample(vel[a], mac.face_dims(a), Mac::face_offset(a), g, mac.dim);
    }
    u
}

/// Departure point of the characteristic through `g` over one step (midpoint rule):
/// `g - s u(g - s/2 u(g))`; with `s < 0` the arrival point of the forward trace.
#[inline(always)]
pub fn trace(mac: &Mac, vel: &[&[f32]; 3], g: [f32; 3], s: f32) -> [f32; 3] {
    let u0 = velocity(mac, vel, g, s);
    let mut m = g;
    for a in 0..mac.dim {
        m[a] = g[a] - 0.5 * u0[a];
    }
    let u1 = velocity(mac, vel, m, s);
    let mut d = g;
    for a in 0..mac.dim {
        d[a] = g[a] - u1[a];
    }
    d
}

/// Grid position of sample `idx` of an array with dims `n` and offsets `off`.
#[inline(always)]
pub fn position(n: [usize; 3], off: [f32; 3], idx: usize) -> [f32; 3] {
    let i = idx % n[0];
    let j = (idx / n[0]) % n[1];
    let k = idx / (n[0] * n[1]);
    [i as f32 + off[0], j as f32 + off[1], k as f32 + off[2]]
}

/// Semi-Lagrangian advection of `q` (dims `n`, offsets `off`) by `vel` over a step with
/// `s = dt / h`: `out(g) = q(trace(g))`.
pub fn advect_sl(
    mac: &Mac,
    vel: &[&[f32]; 3],
    s: f32,
    q: &[f32],
    n: [usize; 3],
    off: [f32; 3],
    out: &mut [f32],
) {
    out.par_iter_mut()
        .with_min_len(1024)
        .enumerate()
        .for_each(|(idx, o)| {
            let g = position(n, off, idx);
            let d = trace(mac, vel, g, s);
            *o = sample(q, n, off, d, mac.dim);
        });
}

/// [`advect_sl`] that also records, per sample, the range `[min, max]` of the values of `q`
/// it interpolated (the clamp of [`advect_maccormack`], which so need not trace the
/// departure point again).
#[allow(clippy::too_many_arguments)]
pub fn advect_sl_ranged(
    mac: &Mac,
    vel: &[&[f32]; 3],
    s: f32,
    q: &[f32],
    n: [usize; 3],
    off: [f32; 3],
    out: &mut [f32],
    range: &mut [[f32; 2]],
) {
    out.par_iter_mut()
        .zip(range.par_iter_mut())
        .with_min_len(1024)
        .enumerate()
        .for_each(|(idx, (o, r))| {
            let g = position(n, off, idx);
            let d = trace(mac, vel, g, s);
            *o = sample(q, n, off, d, mac.dim);
            let (lo, hi) = sample_range(q, n, off, d, mac.dim);
            *r = [lo, hi];
        });
}

/// The MacCormack correction (Selle et al. 2008) of a semi-Lagrangian result `fwd`:
/// `out = fwd + (q - back) / 2` with `back(g) = fwd(forward trace of g)`, clamped to
/// `range`, the range of the samples of `q` around the departure point
/// ([`advect_sl_ranged`]; where the correction would create a new extremum, the result is
/// the clamped value).
#[allow(clippy::too_many_arguments)]
pub fn advect_maccormack(
    mac: &Mac,
    vel: &[&[f32]; 3],
    s: f32,
    q: &[f32],
    fwd: &[f32],
    range: &[[f32; 2]],
    n: [usize; 3],
    off: [f32; 3],
    out: &mut [f32],
) {
    out.par_iter_mut()
        .with_min_len(1024)
        .enumerate()
        .for_each(|(idx, o)| {
            let g = position(n, off, idx);
            let a = trace(mac, vel, g, -s);
            let back = sample(fwd, n, off, a, mac.dim);
            let v = fwd[idx] + 0.5 * (q[idx] - back);
            let [lo, hi] = range[idx];
            *o = v.max(lo).min(hi);
        });
}

/// One explicit viscosity sub-step on the faces of axis `a`:
/// `out_f = u_f + lambda sum_nb (u_nb - u_f)` over the same-axis neighbours inside the
/// array (a missing neighbour at the domain boundary counts as `u_f`: no flux), only on open
/// faces (`open_f > 0`); `lambda = nu dt / h^2`.
pub fn diffuse(mac: &Mac, a: usize, open: &[f32], u: &[f32], lambda: f32, out: &mut [f32]) {
    let n = mac.face_dims(a);
    let st = [1, n[0], n[0] * n[1]];
    out.par_iter_mut()
        .with_min_len(1024)
        .enumerate()
        .for_each(|(f, o)| {
            let uf = u[f];
            if open[f] <= 0.0 {
                *o = uf;
                return;
            }
            let ijk = [f % n[0], (f / n[0]) % n[1], f / (n[0] * n[1])];
            let mut acc = 0.0f32;
            for b in 0..mac.dim {
                if ijk[b] > 0 {
                    acc += u[f - st[b]] - uf;
                }
                if ijk[b] + 1 < n[b] {
                    acc += u[f + st[b]] - uf;
                }
            }
            *o = uf + lambda * acc;
        });
}

/// What a domain side prescribes for the faces on it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SideKind {
    /// Free-slip wall: zero normal velocity.
    Wall,
    /// Prescribed normal velocity (the component along the side's axis).
    Inflow(f32),
    /// Open boundary with `p = 0`: the normal velocity is left to advection and projection.
    Outflow,
}

/// Body forces and boundary values on the faces of axis `a`, in place:
/// buoyancy `u += dt beta smoke` on the axis `up` (smoke averaged from the two cells beside
/// the face, zero outside the domain), then the side conditions on the two boundary layers,
/// then `u = 0` on closed faces (`open = 0`: solid velocity).
#[allow(clippy::too_many_arguments)]
pub fn forces_and_boundaries(
    mac: &Mac,
    a: usize,
    open: &[f32],
    smoke: &[f32],
    buoyancy_dt: f32,
    up: usize,
    sides: [SideKind; 6],
    u: &mut [f32],
) {
    let n = mac.face_dims(a);
    let cd = mac.dims;
    u.par_iter_mut()
        .with_min_len(1024)
        .enumerate()
        .for_each(|(f, uv)| {
            let ijk = [f % n[0], (f / n[0]) % n[1], f / (n[0] * n[1])];
            let mut v = *uv;
            if a == up && buoyancy_dt != 0.0 {
                let c = ijk[0] + cd[0] * (ijk[1] + cd[1] * ijk[2]);
                let st = [1, cd[0], cd[0] * cd[1]][a];
                let hi = if ijk[a] < cd[a] { smoke[c] } else { 0.0 };
                let lo = if ijk[a] > 0 { smoke[c - st] } else { 0.0 };
                v += buoyancy_dt * 0.5 * (lo + hi);
            }
            let side = if ijk[a] == 0 {
                Some(sides[2 * a])
            } else if ijk[a] == cd[a] {
                Some(sides[2 * a + 1])
            } else {
                None
            };
            match side {
                Some(SideKind::Wall) => v = 0.0,
                Some(SideKind::Inflow(w)) => v = w,
                _ => {}
            }
            if open[f] <= 0.0 {
                v = 0.0;
            }
            *uv = v;
        });
}

/// Set `smoke` to `value[c]` where `mask[c] > 0` (smoke sources), and to zero in cells
/// without fluid (`fluid[c] == 0`).
pub fn sources(smoke: &mut [f32], source: &[f32], fluid: &[f32]) {
    smoke
        .par_iter_mut()
        .with_min_len(4096)
        .enumerate()
        .for_each(|(c, s)| {
            if source[c] > 0.0 {
                *s = source[c];
            }
            if fluid[c] <= 0.0 {
                *s = 0.0;
            }
        });
}

/// Net outflow per cell in face-fraction units: `sum_a open u` over the high minus the low
/// face of each axis (`h^(d-1)` times this is the flux of Eq. 6.3's right-hand side).
#[inline(always)]
pub fn net_outflow(mac: &Mac, open: &[&[f32]; 3], vel: &[&[f32]; 3], c: usize) -> f32 {
    let [nx, ny, _] = mac.dims;
    let (i, j, k) = (c % nx, (c / nx) % ny, c / (nx * ny));
    let mut s = 0.0f32;
    for a in 0..mac.dim {
        let n = mac.face_dims(a);
        let lo = i + n[0] * (j + n[1] * k);
        let st = [1, n[0], n[0] * n[1]][a];
        s += open[a][lo + st] * vel[a][lo + st] - open[a][lo] * vel[a][lo];
    }
    s
}

/// Right-hand side of the projection, `b_c = -(net outflow of c)` (see [`crate::fluid`]).
pub fn projection_rhs(mac: &Mac, open: &[&[f32]; 3], vel: &[&[f32]; 3], b: &mut [f32]) {
    b.par_iter_mut()
        .with_min_len(4096)
        .enumerate()
        .for_each(|(c, bv)| *bv = -net_outflow(mac, open, vel, c));
}

/// Velocity update of the faces of axis `a` from the solved `psi`: interior open faces
/// `u -= psi_hi - psi_lo`, open faces on an outflow side (`p = 0` half a cell out)
/// `u -= 2 (0 - psi)` on the high side and `u -= 2 (psi - 0)` on the low side.
pub fn project_faces(
    mac: &Mac,
    a: usize,
    open: &[f32],
    psi: &[f32],
    outflow: [bool; 2],
    u: &mut [f32],
) {
    let n = mac.face_dims(a);
    let cd = mac.dims;
    let st = [1, cd[0], cd[0] * cd[1]][a];
    u.par_iter_mut()
        .with_min_len(1024)
        .enumerate()
        .for_each(|(f, uv)| {
            if open[f] <= 0.0 {
                return;
            }
            let ijk = [f % n[0], (f / n[0]) % n[1], f / (n[0] * n[1])];
            let c = ijk[0] + cd[0] * (ijk[1] + cd[1] * ijk[2]);
            if ijk[a] == 0 {
                if outflow[0] {
                    *uv -= 2.0 * psi[c];
                }
            } else if ijk[a] == cd[a] {
                if outflow[1] {
                    *uv += 2.0 * psi[c - st];
                }
            } else {
                *uv -= psi[c] - psi[c - st];
            }
        });
}

/// Cell-centred output: the mean of the two face values of axis `a` around each cell.
pub fn face_to_cell(mac: &Mac, a: usize, u: &[f32], out: &mut [f32]) {
    let n = mac.face_dims(a);
    let [nx, ny, _] = mac.dims;
    let st = [1, n[0], n[0] * n[1]][a];
    out.par_iter_mut()
        .with_min_len(4096)
        .enumerate()
        .for_each(|(c, o)| {
            let (i, j, k) = (c % nx, (c / nx) % ny, c / (nx * ny));
            let f = i + n[0] * (j + n[1] * k);
            *o = 0.5 * (u[f] + u[f + st]);
        });
}

/// Largest `|u|` over all faces of all axes.
pub fn max_speed(vel: &[&[f32]]) -> f32 {
    vel.iter()
        .map(|v| {
            v.par_iter()
                .with_min_len(4096)
                .map(|x| x.abs())
                .reduce(|| 0.0f32, f32::max)
        })
        .fold(0.0f32, f32::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clamp range recorded by the semi-Lagrangian pass is, bit for bit, the range the
    /// MacCormack pass would get by tracing the departure point again.
    #[test]
    fn recorded_clamp_range_equals_retracing() {
        let mac = Mac {
            dims: [37, 29, 1],
            dim: 2,
        };
        let mut seed = 3u64;
        let mut rnd = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let vel: Vec<Vec<f32>> = (0..2)
            .map(|a| (0..mac.faces(a)).map(|_| 3.0 * rnd()).collect())
            .collect();
        let q: Vec<f32> = (0..mac.cells()).map(|_| rnd()).collect();
        let empty: &[f32] = &[];
        let vref = [vel[0].as_slice(), vel[1].as_slice(), empty];
        let (n, s) = (mac.dims, 0.8f32);
        let mut fwd = vec![0.0; q.len()];
        let mut range = vec![[0.0; 2]; q.len()];
        advect_sl_ranged(&mac, &vref, s, &q, n, CELL, &mut fwd, &mut range);
        let mut plain = vec![0.0; q.len()];
        advect_sl(&mac, &vref, s, &q, n, CELL, &mut plain);
        assert_eq!(fwd, plain);
        for (idx, r) in range.iter().enumerate() {
            let d = trace(&mac, &vref, position(n, CELL, idx), s);
            let (lo, hi) = sample_range(&q, n, CELL, d, 2);
            assert_eq!(*r, [lo, hi], "sample {idx}");
        }
        let mut out = vec![0.0; q.len()];
        advect_maccormack(&mac, &vref, s, &q, &fwd, &range, n, CELL, &mut out);
        // the correction stays inside the clamp and moves some values
        assert!(out
            .iter()
            .zip(&range)
            .all(|(v, r)| *v >= r[0] && *v <= r[1]));
        assert!(out.iter().zip(&fwd).any(|(a, b)| a != b));
    }
}
