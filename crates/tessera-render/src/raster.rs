//! The reference rasterizer: per-pixel visibility, depth, value and triangle id of a
//! [`Surface`] seen by a [`Camera`] (dissertation §6.3.5: "point visibility is handled on the
//! server by rendering"). The CUDA rasterizer (`cuda/raster.cu`) implements exactly these
//! rules with the same floating-point operations in the same order, so both produce the same
//! bits.
//!
//! Rules (OpenGL conventions):
//! 1. *Vertex stage*: `c = (P V) p` in `f32` ([`Mat4::transform_point`]).
//! 2. *Clipping*: a triangle with all vertices outside one plane is culled. Triangles with a
//!    vertex outside the near/far planes (`-w <= z <= w`) or outside the guard band
//!    `|x|, |y| <= 8 w` are clipped in homogeneous space (Sutherland-Hodgman, the
//!    intersection always interpolated from the inside vertex) and fanned into triangles.
//! 3. *Snapping*: window coordinates `x_w = (x / w + 1) (W / 2)` are snapped to 1/256 pixel;
//!    window depth is `d = (z / w) / 2 + 1 / 2`.
//! 4. *Coverage*: pixel `(x, y)` is sampled at its centre `(x + 1/2, y + 1/2)` (rows counted
//!    from the bottom); exact 64-bit edge functions; a sample on an edge belongs to the
//!    triangle only if the edge is a top or left edge (top-left rule), so triangles sharing
//!    an edge cover each pixel once. Both windings are drawn; degenerate triangles none.
//! 5. *Depth*: `d` interpolated linearly in window space,
//!    `((e0 d0 + e1 d1) + e2 d2) / area` in `f32`, clamped to `[0, 1]`; the nearest sample
//!    wins, ties to the lower triangle id (a 64-bit key `depth_bits << 32 | id`, minimised).
//! 6. *Resolve*: the winner's value is interpolated perspective-correctly with the
//!    triangle's homogeneous barycentrics at the pixel centre: with `p = ` Eq. 6.5's
//!    `(x_ndc, y_ndc)`, `r1_i = x_i - p_x w_i`, `r2_i = y_i - p_y w_i`, `b = r1 x r2`,
//!    `beta = b / sum(b)` clamped to `>= 0` and renormalised. A `NaN` vertex value makes the
//!    pixel's value `NaN` ("no value", always the bits `0x7fc00000`).

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::camera::{Camera, Mat4};
use crate::{RenderError, Surface};

/// Sub-pixel precision of snapped window coordinates (bits).
pub const SUBPIXEL_BITS: u32 = 8;
/// Guard band: clip space `|x|, |y| <= GUARD w` is rasterized without x/y clipping.
pub const GUARD: f32 = 8.0;
/// Largest viewport side (keeps snapped coordinates below 2^26 and edge functions in i64).
pub const MAX_SIDE: u32 = 16384;
/// Triangle id of pixels that show no surface.
pub const NO_TRIANGLE: u32 = u32::MAX;
/// Packed depth-test key of an empty pixel.
pub const EMPTY_KEY: u64 = u64::MAX;

/// Per-pixel result of rasterization; pixel `(x, y)` is at index `x + width * y`, row 0 at
/// the bottom (OpenGL window coordinates).
#[derive(Clone, Debug, PartialEq)]
pub struct Raster {
    pub width: u32,
    pub height: u32,
    /// Window depth in `[0, 1]` (1 where empty).
    pub depth: Vec<f32>,
    /// Interpolated value (`NaN` where empty or without a value).
    pub value: Vec<f32>,
    /// Id of the visible triangle, [`NO_TRIANGLE`] where empty.
    pub triangle: Vec<u32>,
}

impl Raster {
    /// Number of pixels that show a surface.
    pub fn visible(&self) -> usize {
        self.triangle.iter().filter(|&&t| t != NO_TRIANGLE).count()
    }
    /// Visible fraction of the viewport.
    pub fn coverage(&self) -> f64 {
        self.visible() as f64 / (self.width as f64 * self.height as f64)
    }
    /// Bitwise equality (`NaN` values compare equal to themselves).
    pub fn bitwise_eq(&self, other: &Raster) -> bool {
        self.width == other.width
            && self.height == other.height
            && self.triangle == other.triangle
            && self
                .depth
                .iter()
                .zip(&other.depth)
                .all(|(a, b)| a.to_bits() == b.to_bits())
            && self
                .value
                .iter()
                .zip(&other.value)
                .all(|(a, b)| a.to_bits() == b.to_bits())
    }
}

/// Checks a viewport size.
pub fn check_viewport(width: u32, height: u32) -> Result<(), RenderError> {
    if width == 0 || height == 0 || width > MAX_SIDE || height > MAX_SIDE {
        return Err(RenderError::Invalid(format!(
            "viewport {width}x{height}: each side must be in 1..={MAX_SIDE}"
        )));
    }
    Ok(())
}

/// Clip-space position (x, y, z, w).
pub type Clip = [f32; 4];

/// Outcode bits of a clip-space vertex: near, far, left, right, bottom, top.
#[inline]
pub fn outcode(c: &Clip) -> u32 {
    let gw = GUARD * c[3];
    ((c[2] + c[3] < 0.0) as u32)
        | (((c[3] - c[2]) < 0.0) as u32) << 1
        | (((c[0] + gw) < 0.0) as u32) << 2
        | (((gw - c[0]) < 0.0) as u32) << 3
        | (((c[1] + gw) < 0.0) as u32) << 4
        | (((gw - c[1]) < 0.0) as u32) << 5
}

#[inline]
fn plane_dist(c: &Clip, plane: u32) -> f32 {
    let gw = GUARD * c[3];
    match plane {
        0 => c[2] + c[3],
        1 => c[3] - c[2],
        2 => c[0] + gw,
        3 => gw - c[0],
        4 => c[1] + gw,
        _ => gw - c[1],
    }
}

/// Sutherland-Hodgman clipping of a triangle against the planes in `mask`; returns the
/// polygon length (at most 9 vertices).
pub fn clip_polygon(tri: [Clip; 3], mask: u32, out: &mut [Clip; 9]) -> usize {
    let mut a = [[0.0f32; 4]; 9];
    let mut n = 3usize;
    a[..3].copy_from_slice(&tri);
    let mut b = [[0.0f32; 4]; 9];
    for plane in 0..6 {
        if mask & (1 << plane) == 0 {
            continue;
        }
        let mut m = 0usize;
        for i in 0..n {
            let cur = a[i];
            let nxt = a[if i + 1 == n { 0 } else { i + 1 }];
            let dc = plane_dist(&cur, plane);
            let dn = plane_dist(&nxt, plane);
            let (ic, inn) = (dc >= 0.0, dn >= 0.0);
            if ic {
                b[m] = cur;
                m += 1;
            }
            if ic != inn {
                // interpolate from the inside vertex, so both triangles sharing the edge
                // compute the same point
                let (p, q, dp, dq) = if ic {
                    (cur, nxt, dc, dn)
                } else {
                    (nxt, cur, dn, dc)
                };
                let t = dp / (dp - dq);
                let mut r = [0.0f32; 4];
                for k in 0..4 {
                    r[k] = p[k] + t * (q[k] - p[k]);
                }
                b[m] = r;
                m += 1;
            }
        }
        n = m;
        a = b;
        if n < 3 {
            return 0;
        }
    }
    out[..n].copy_from_slice(&a[..n]);
    n
}

/// A triangle in window space: snapped coordinates (1/256 pixel) and window depths.
#[derive(Clone, Copy, Debug)]
pub struct Snapped {
    pub x: [i64; 3],
    pub y: [i64; 3],
    pub z: [f32; 3],
}

/// Window coordinates of a clip-space vertex (rule 3): snapped `(x, y)` and depth.
#[inline]
pub fn to_window(c: &Clip, half_w: f32, half_h: f32) -> (i64, i64, f32) {
    let sx = (c[0] / c[3] + 1.0) * half_w;
    let sy = (c[1] / c[3] + 1.0) * half_h;
    let sz = (c[2] / c[3]) * 0.5 + 0.5;
    (
        (sx * 256.0).round_ties_even() as i64,
        (sy * 256.0).round_ties_even() as i64,
        sz,
    )
}

/// Snaps a clip-space triangle; `None` for a degenerate one. The result is counter-clockwise
/// (positive area).
pub fn snap(tri: &[Clip; 3], half_w: f32, half_h: f32) -> Option<(Snapped, i64)> {
    let mut s = Snapped {
        x: [0; 3],
        y: [0; 3],
        z: [0.0; 3],
    };
    for k in 0..3 {
        let (x, y, z) = to_window(&tri[k], half_w, half_h);
        s.x[k] = x;
        s.y[k] = y;
        s.z[k] = z;
    }
    let mut area = (s.x[1] - s.x[0]) * (s.y[2] - s.y[0]) - (s.y[1] - s.y[0]) * (s.x[2] - s.x[0]);
    if area == 0 {
        return None;
    }
    if area < 0 {
        s.x.swap(1, 2);
        s.y.swap(1, 2);
        s.z.swap(1, 2);
        area = -area;
    }
    Some((s, area))
}

#[inline]
fn top_left(dx: i64, dy: i64) -> bool {
    dy < 0 || (dy == 0 && dx < 0)
}

/// Pixel bounds `(x0, x1, y0, y1)` (inclusive) of the samples a snapped triangle may
/// cover, clipped to the viewport; `None` when empty.
#[inline]
pub fn pixel_bounds(s: &Snapped, width: u32, height: u32) -> Option<(i64, i64, i64, i64)> {
    let minx = s.x[0].min(s.x[1]).min(s.x[2]);
    let maxx = s.x[0].max(s.x[1]).max(s.x[2]);
    let miny = s.y[0].min(s.y[1]).min(s.y[2]);
    let maxy = s.y[0].max(s.y[1]).max(s.y[2]);
    let x0 = ((minx + 127) >> 8).max(0);
    let x1 = ((maxx - 128) >> 8).min(width as i64 - 1);
    let y0 = ((miny + 127) >> 8).max(0);
    let y1 = ((maxy - 128) >> 8).min(height as i64 - 1);
    (x0 <= x1 && y0 <= y1).then_some((x0, x1, y0, y1))
}

/// The depth of the sample at pixel `(px, py)` if the snapped triangle covers it (rules 4-5).
#[inline]
pub fn sample(s: &Snapped, area: i64, px: i64, py: i64) -> Option<f32> {
    let cx = px * 256 + 128;
    let cy = py * 256 + 128;
    let e =
        |a: usize, b: usize| (s.x[b] - s.x[a]) * (cy - s.y[a]) - (s.y[b] - s.y[a]) * (cx - s.x[a]);
    let w0 = e(1, 2);
    let w1 = e(2, 0);
    let w2 = e(0, 1);
    let ins = |w: i64, a: usize, b: usize| {
        w > 0 || (w == 0 && top_left(s.x[b] - s.x[a], s.y[b] - s.y[a]))
    };
    if !(ins(w0, 1, 2) && ins(w1, 2, 0) && ins(w2, 0, 1)) {
        return None;
    }
    let d = ((w0 as f32 * s.z[0] + w1 as f32 * s.z[1]) + w2 as f32 * s.z[2]) / area as f32;
    Some(clamp_depth(d))
}

#[inline]
fn clamp_depth(d: f32) -> f32 {
    if !(d > 0.0) {
        0.0
    } else if d > 1.0 {
        1.0
    } else {
        d
    }
}

/// Packed depth-test key (rule 5).
#[inline]
pub fn pack_key(depth: f32, id: u32) -> u64 {
    ((depth.to_bits() as u64) << 32) | id as u64
}

/// Calls `emit(snapped, area)` for each window-space triangle that clip-space triangle `tri`
/// rasterizes as (none when culled, one when inside the guard band, a fan when clipped).
pub fn for_each_subtriangle(
    tri: [Clip; 3],
    half_w: f32,
    half_h: f32,
    mut emit: impl FnMut(&Snapped, i64),
) {
    if !tri.iter().all(|c| c.iter().all(|v| v.is_finite())) {
        return;
    }
    let (o0, o1, o2) = (outcode(&tri[0]), outcode(&tri[1]), outcode(&tri[2]));
    if o0 & o1 & o2 != 0 {
        return;
    }
    let any = o0 | o1 | o2;
    if any == 0 {
        if !(tri[0][3] > 0.0 && tri[1][3] > 0.0 && tri[2][3] > 0.0) {
            return;
        }
        if let Some((s, area)) = snap(&tri, half_w, half_h) {
            emit(&s, area);
        }
        return;
    }
    let mut poly = [[0.0f32; 4]; 9];
    let n = clip_polygon(tri, any, &mut poly);
    for k in 1..n.saturating_sub(1) {
        let sub = [poly[0], poly[k], poly[k + 1]];
        if !(sub[0][3] > 0.0 && sub[1][3] > 0.0 && sub[2][3] > 0.0) {
            continue;
        }
        if let Some((s, area)) = snap(&sub, half_w, half_h) {
            emit(&s, area);
        }
    }
}

/// Rule 6: the perspective-correct value of triangle `(c, v)` at pixel `(x, y)`.
#[inline]
pub fn resolve_value(c: &[Clip; 3], v: [f32; 3], x: u32, y: u32, width: u32, height: u32) -> f32 {
    let px = (2 * x + 1) as f32 / width as f32 - 1.0;
    let py = (2 * y + 1) as f32 / height as f32 - 1.0;
    let r1 = [
        c[0][0] - px * c[0][3],
        c[1][0] - px * c[1][3],
        c[2][0] - px * c[2][3],
    ];
    let r2 = [
        c[0][1] - py * c[0][3],
        c[1][1] - py * c[1][3],
        c[2][1] - py * c[2][3],
    ];
    let b0 = r1[1] * r2[2] - r1[2] * r2[1];
    let b1 = r1[2] * r2[0] - r1[0] * r2[2];
    let b2 = r1[0] * r2[1] - r1[1] * r2[0];
    let s = (b0 + b1) + b2;
    let pos = |b: f32| {
        let q = b / s;
        if q > 0.0 {
            q
        } else {
            0.0
        }
    };
    let (q0, q1, q2) = (pos(b0), pos(b1), pos(b2));
    let t = (q0 + q1) + q2;
    let r = if t > 0.0 {
        ((q0 * v[0] + q1 * v[1]) + q2 * v[2]) / t
    } else {
        v[0]
    };
    // one NaN bit pattern on every back end (NaN payloads propagate differently)
    if r.is_nan() {
        f32::from_bits(CANONICAL_NAN)
    } else {
        r
    }
}

/// The bits of the `NaN` the rasterizers write ("no value").
pub const CANONICAL_NAN: u32 = 0x7fc0_0000;

/// Rasterizes `surface` seen by `camera` into a `width x height` viewport on the CPU
/// (rayon over triangles; the packed-key minimum makes the result independent of order).
pub fn rasterize_cpu(
    surface: &Surface,
    camera: &Camera,
    width: u32,
    height: u32,
) -> Result<Raster, RenderError> {
    check_viewport(width, height)?;
    surface.validate()?;
    camera.validate()?;
    let mvp = camera.view_proj();
    let clip = transform_vertices(&mvp, &surface.positions);
    let n = width as usize * height as usize;
    let keys: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(EMPTY_KEY)).collect();
    let (half_w, half_h) = (0.5 * width as f32, 0.5 * height as f32);
    surface
        .triangles
        .par_iter()
        .enumerate()
        .with_min_len(1024)
        .for_each(|(t, tri)| {
            let c = [
                clip[tri[0] as usize],
                clip[tri[1] as usize],
                clip[tri[2] as usize],
            ];
            for_each_subtriangle(c, half_w, half_h, |s, area| {
                let Some((x0, x1, y0, y1)) = pixel_bounds(s, width, height) else {
                    return;
                };
                for py in y0..=y1 {
                    for px in x0..=x1 {
                        if let Some(d) = sample(s, area, px, py) {
                            keys[(px + py * width as i64) as usize]
                                .fetch_min(pack_key(d, t as u32), Ordering::Relaxed);
                        }
                    }
                }
            });
        });
    let mut r = Raster {
        width,
        height,
        depth: vec![1.0; n],
        value: vec![f32::NAN; n],
        triangle: vec![NO_TRIANGLE; n],
    };
    r.depth
        .par_iter_mut()
        .zip(r.value.par_iter_mut())
        .zip(r.triangle.par_iter_mut())
        .enumerate()
        .for_each(|(p, ((d, v), id))| {
            let key = keys[p].load(Ordering::Relaxed);
            if key == EMPTY_KEY {
                return;
            }
            let t = key as u32;
            *id = t;
            *d = f32::from_bits((key >> 32) as u32);
            let tri = surface.triangles[t as usize];
            let c = tri.map(|i| clip[i as usize]);
            let vals = tri.map(|i| surface.values[i as usize]);
            *v = resolve_value(&c, vals, p as u32 % width, p as u32 / width, width, height);
        });
    Ok(r)
}

/// The vertex stage on the CPU.
pub fn transform_vertices(mvp: &Mat4, positions: &[[f32; 3]]) -> Vec<Clip> {
    positions
        .par_iter()
        .with_min_len(4096)
        .map(|&p| mvp.transform_point(p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::camera::{orthographic, Camera, Mat4};

    fn ortho_unit() -> Camera {
        // world [0, W] x [0, H] maps onto the viewport one unit per pixel
        Camera {
            view: Mat4::IDENTITY,
            proj: orthographic(0.0, 8.0, 0.0, 8.0, -1.0, 1.0).unwrap(),
        }
    }

    #[test]
    fn two_triangles_sharing_an_edge_cover_each_pixel_once() {
        // a square split along its diagonal, corners on pixel centres' lattice offsets
        let s = Surface {
            positions: vec![
                [1.0, 1.0, 0.0],
                [7.0, 1.0, 0.0],
                [7.0, 7.0, 0.0],
                [1.0, 7.0, 0.0],
            ],
            triangles: vec![[0, 1, 2], [0, 2, 3]],
            values: vec![0.0, 1.0, 2.0, 3.0],
        };
        let r = rasterize_cpu(&s, &ortho_unit(), 8, 8).unwrap();
        // the square spans pixel centres 1.5 ..= 6.5 -> 6 x 6 pixels, diagonal ones to one side
        assert_eq!(r.visible(), 36);
        // pixels on the diagonal (centre exactly on the shared edge) belong to one triangle
        for k in 1..7u32 {
            let t = r.triangle[(k + 8 * k) as usize];
            assert!(t == 0 || t == 1);
        }
        // area split: 15 strictly below + 15 strictly above + 6 on the diagonal
        let n0 = r.triangle.iter().filter(|&&t| t == 0).count();
        let n1 = r.triangle.iter().filter(|&&t| t == 1).count();
        assert_eq!(n0 + n1, 36);
        assert!(n0 == 21 || n1 == 21, "{n0} {n1}");
    }

    #[test]
    fn top_left_rule_on_pixel_centre_edges() {
        // triangle whose left edge passes exactly through pixel centres x = 2.5
        let s = Surface {
            positions: vec![[2.5, 0.0, 0.0], [6.0, 0.0, 0.0], [2.5, 8.0, 0.0]],
            triangles: vec![[0, 1, 2]],
            values: vec![1.0; 3],
        };
        let r = rasterize_cpu(&s, &ortho_unit(), 8, 8).unwrap();
        // the vertical edge from (2.5, 8) down to (2.5, 0) is a left edge: centres on it count
        assert_ne!(r.triangle[2], NO_TRIANGLE);
        assert_eq!(r.triangle[1], NO_TRIANGLE);
        // the bottom edge at y = 0 has no sample on it; the horizontal top case:
        let s2 = Surface {
            positions: vec![[0.0, 2.5, 0.0], [8.0, 2.5, 0.0], [0.0, 0.0, 0.0]],
            triangles: vec![[0, 1, 2]],
            values: vec![1.0; 3],
        };
        let r2 = rasterize_cpu(&s2, &ortho_unit(), 8, 8).unwrap();
        // y = 2.5 is the triangle's top edge: row 2's centres on it are covered
        assert_ne!(r2.triangle[8 * 2], NO_TRIANGLE);
        // a triangle sharing that edge from above must not cover row 2
        let s3 = Surface {
            positions: vec![[0.0, 2.5, 0.0], [8.0, 2.5, 0.0], [0.0, 5.0, 0.0]],
            triangles: vec![[0, 1, 2]],
            values: vec![1.0; 3],
        };
        let r3 = rasterize_cpu(&s3, &ortho_unit(), 8, 8).unwrap();
        assert_eq!(r3.triangle[8 * 2], NO_TRIANGLE);
        assert_ne!(r3.triangle[8 * 3], NO_TRIANGLE);
    }

    #[test]
    fn nearer_triangle_wins_and_values_interpolate() {
        // two overlapping quads at different depths (ortho: depth = (-z_eye... ) ; view = identity)
        let mut near =
            Surface::plane([0.0, 0.0, 0.5], [8.0, 0.0, 0.0], [0.0, 8.0, 0.0], 1, 1).unwrap();
        near.values = vec![10.0, 10.0, 10.0, 10.0];
        let mut far =
            Surface::plane([0.0, 0.0, -0.5], [8.0, 0.0, 0.0], [0.0, 4.0, 0.0], 1, 1).unwrap();
        far.values = vec![0.0, 8.0, 0.0, 8.0];
        let mut both = far.clone();
        both.append(&near);
        let r = rasterize_cpu(&both, &ortho_unit(), 8, 8).unwrap();
        // eye looks down -z: z = 0.5 is nearer (ndc z = -0.5, depth 0.25)
        assert!(r.triangle.iter().all(|&t| t >= 2));
        assert!((r.depth[0] - 0.25).abs() < 1e-7);
        let r_far = rasterize_cpu(&far, &ortho_unit(), 8, 8).unwrap();
        // value = x along the far quad's u axis: pixel centre x + 0.5
        for x in 0..8u32 {
            let v = r_far.value[x as usize];
            assert!((v - (x as f32 + 0.5)).abs() < 1e-5, "{x}: {v}");
        }
        assert_eq!(r_far.visible(), 32);
    }

    #[test]
    fn clipping_at_the_near_plane_keeps_the_visible_part() {
        // a long ground plane crossing the near plane, seen in perspective
        let cam = Camera::orbit(
            &crate::camera::Orbit {
                target: [0.0, 0.0, 0.0],
                distance: 1.0,
                yaw: 0.0,
                pitch: 10.0,
                fovy: 60.0,
                near: 0.1,
                far: 100.0,
                ortho_height: None,
            },
            1.0,
        )
        .unwrap();
        let s = Surface::plane(
            [-50.0, -50.0, 0.0],
            [100.0, 0.0, 0.0],
            [0.0, 100.0, 0.0],
            1,
            1,
        )
        .unwrap();
        let r = rasterize_cpu(&s, &cam, 64, 64).unwrap();
        // the plane fills the lower part of the view up to the horizon (about half the rows)
        let c = r.coverage();
        assert!(c > 0.4 && c < 0.8, "coverage {c}");
        // bottom row covered, top row not
        assert!((0..64).all(|x| r.triangle[x] != NO_TRIANGLE));
        assert!((0..64).all(|x| r.triangle[x + 64 * 63] == NO_TRIANGLE));
        // the same plane split into many quads covers the same pixels (watertight)
        let s2 = Surface::plane(
            [-50.0, -50.0, 0.0],
            [100.0, 0.0, 0.0],
            [0.0, 100.0, 0.0],
            37,
            41,
        )
        .unwrap();
        let r2 = rasterize_cpu(&s2, &cam, 64, 64).unwrap();
        let cov1: Vec<bool> = r.triangle.iter().map(|&t| t != NO_TRIANGLE).collect();
        let cov2: Vec<bool> = r2.triangle.iter().map(|&t| t != NO_TRIANGLE).collect();
        let diff = cov1.iter().zip(&cov2).filter(|(a, b)| a != b).count();
        assert!(diff <= 64, "{diff} pixels differ");
    }

    #[test]
    fn bad_viewport_is_an_error() {
        let s = Surface::sphere([0.0; 3], 1.0, 4, 4).unwrap();
        assert!(rasterize_cpu(&s, &ortho_unit(), 0, 8).is_err());
        assert!(rasterize_cpu(&s, &ortho_unit(), MAX_SIDE + 1, 8).is_err());
    }
}
