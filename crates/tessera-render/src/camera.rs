//! Cameras as 4x4 view and projection matrices in OpenGL conventions (dissertation §6.3.5,
//! Eqs. 6.4-6.6).
//!
//! Matrices are column-major `[f32; 16]` (`m[col * 4 + row]`, as `glUniformMatrix4fv` takes
//! them). Eye space looks down `-z`; the projection maps the view frustum to clip space, the
//! perspective divide to normalized device coordinates in `[-1, 1]^3`, and the viewport to
//! window coordinates with pixel `(x, y)` centred at `(x + 0.5, y + 0.5)`, `y` up from the
//! bottom row, and depth `d = (z_ndc + 1) / 2` in `[0, 1]` (the default `glDepthRange`).
//!
//! Eq. 6.4, reprojection: `p_n = P_c V_c p_w`. Eq. 6.5, a pixel's normalized device
//! coordinates from its integer position and stored depth:
//! `p_o = ((2x + 1) / w - 1, (2y + 1) / h - 1, 2d - 1)`. Eq. 6.6, back to world space:
//! `p_w = V_o^-1 P_o^-1 p_o` (then divided by its homogeneous coordinate).
//! [`Camera::unproject`] evaluates Eqs. 6.5-6.6 in double precision.

use crate::RenderError;

/// A column-major 4x4 matrix of `f32` (OpenGL layout).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mat4(pub [f32; 16]);

impl Mat4 {
    pub const IDENTITY: Mat4 = Mat4([
        1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0,
    ]);

    /// Element at `row`, `col`.
    pub fn at(&self, row: usize, col: usize) -> f32 {
        self.0[col * 4 + row]
    }

    /// `self * rhs` in `f32`, each element summed in the fixed order k = 0, 1, 2, 3 (the GPU
    /// receives this product, so CPU and GPU rasterizers start from the same bits).
    pub fn mul(&self, rhs: &Mat4) -> Mat4 {
        let mut m = [0.0f32; 16];
        for c in 0..4 {
            for r in 0..4 {
                let mut s = self.at(r, 0) * rhs.at(0, c);
                s += self.at(r, 1) * rhs.at(1, c);
                s += self.at(r, 2) * rhs.at(2, c);
                s += self.at(r, 3) * rhs.at(3, c);
                m[c * 4 + r] = s;
            }
        }
        Mat4(m)
    }

    /// `self * (x, y, z, 1)` in `f32` with the operation order of the GPU vertex stage:
    /// `((m[r] x + m[4+r] y) + m[8+r] z) + m[12+r]`, no fused multiply-adds.
    #[inline]
    pub fn transform_point(&self, p: [f32; 3]) -> [f32; 4] {
        let m = &self.0;
        let mut out = [0.0f32; 4];
        for (r, o) in out.iter_mut().enumerate() {
            *o = ((m[r] * p[0] + m[4 + r] * p[1]) + m[8 + r] * p[2]) + m[12 + r];
        }
        out
    }

    /// The matrix in `f64`.
    pub fn to_f64(&self) -> [f64; 16] {
        self.0.map(|v| v as f64)
    }

    /// The inverse in `f64` (Gauss-Jordan with partial pivoting), `None` when singular.
    pub fn inverse_f64(&self) -> Option<[f64; 16]> {
        invert4(&self.to_f64())
    }

    /// `true` when every element is finite.
    pub fn is_finite(&self) -> bool {
        self.0.iter().all(|v| v.is_finite())
    }
}

/// Column-major 4x4 product in `f64`.
pub fn mul4_f64(a: &[f64; 16], b: &[f64; 16]) -> [f64; 16] {
    let mut m = [0.0; 16];
    for c in 0..4 {
        for r in 0..4 {
            m[c * 4 + r] = (0..4).map(|k| a[k * 4 + r] * b[c * 4 + k]).sum();
        }
    }
    m
}

/// Inverse of a column-major 4x4 matrix in `f64`, `None` when (numerically) singular.
pub fn invert4(m: &[f64; 16]) -> Option<[f64; 16]> {
    // rows of [A | I], A[r][c] = m[c*4+r]
    let mut a = [[0.0f64; 8]; 4];
    for (r, row) in a.iter_mut().enumerate() {
        for c in 0..4 {
            row[c] = m[c * 4 + r];
        }
        row[4 + r] = 1.0;
    }
    let scale = m.iter().fold(0.0f64, |s, v| s.max(v.abs()));
    if !(scale.is_finite() && scale > 0.0) {
        return None;
    }
    for col in 0..4 {
        let piv = (col..4).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() <= scale * 1e-14 {
            return None;
        }
        a.swap(col, piv);
        let p = a[col][col];
        for v in a[col].iter_mut() {
            *v /= p;
        }
        for r in 0..4 {
            if r != col {
                let f = a[r][col];
                if f != 0.0 {
                    for c in 0..8 {
                        a[r][c] -= f * a[col][c];
                    }
                }
            }
        }
    }
    let mut out = [0.0; 16];
    for (r, row) in a.iter().enumerate() {
        for c in 0..4 {
            out[c * 4 + r] = row[4 + c];
        }
    }
    Some(out)
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn normalize(a: [f64; 3]) -> Option<[f64; 3]> {
    let l = dot(a, a).sqrt();
    (l > 0.0 && l.is_finite()).then(|| [a[0] / l, a[1] / l, a[2] / l])
}

/// The view matrix of `gluLookAt(eye, target, up)`.
pub fn look_at(eye: [f64; 3], target: [f64; 3], up: [f64; 3]) -> Result<Mat4, RenderError> {
    let f = normalize(sub(target, eye))
        .ok_or_else(|| RenderError::Invalid("camera: eye and target coincide".into()))?;
    let s = normalize(cross(f, up))
        .ok_or_else(|| RenderError::Invalid("camera: view direction parallel to up".into()))?;
    let u = cross(s, f);
    let m = [
        s[0],
        u[0],
        -f[0],
        0.0,
        s[1],
        u[1],
        -f[1],
        0.0,
        s[2],
        u[2],
        -f[2],
        0.0,
        -dot(s, eye),
        -dot(u, eye),
        dot(f, eye),
        1.0,
    ];
    Ok(Mat4(m.map(|v| v as f32)))
}

/// `gluPerspective(fovy, aspect, near, far)`; `fovy` in degrees.
pub fn perspective(fovy_deg: f64, aspect: f64, near: f64, far: f64) -> Result<Mat4, RenderError> {
    if !(fovy_deg > 0.0 && fovy_deg < 180.0) {
        return Err(RenderError::Invalid(format!(
            "camera: field of view {fovy_deg} degrees is not in (0, 180)"
        )));
    }
    if !(near > 0.0 && far > near && aspect > 0.0 && far.is_finite()) {
        return Err(RenderError::Invalid(format!(
            "camera: need 0 < near < far and aspect > 0 (near {near}, far {far}, aspect {aspect})"
        )));
    }
    let f = 1.0 / (fovy_deg.to_radians() / 2.0).tan();
    let mut m = [0.0f64; 16];
    m[0] = f / aspect;
    m[5] = f;
    m[10] = (far + near) / (near - far);
    m[11] = -1.0;
    m[14] = 2.0 * far * near / (near - far);
    Ok(Mat4(m.map(|v| v as f32)))
}

/// `glOrtho(left, right, bottom, top, near, far)`.
pub fn orthographic(
    left: f64,
    right: f64,
    bottom: f64,
    top: f64,
    near: f64,
    far: f64,
) -> Result<Mat4, RenderError> {
    if !(right > left && top > bottom && far > near) {
        return Err(RenderError::Invalid(format!(
            "camera: empty orthographic box [{left}, {right}] x [{bottom}, {top}] x [{near}, {far}]"
        )));
    }
    let mut m = [0.0f64; 16];
    m[0] = 2.0 / (right - left);
    m[5] = 2.0 / (top - bottom);
    m[10] = -2.0 / (far - near);
    m[12] = -(right + left) / (right - left);
    m[13] = -(top + bottom) / (top - bottom);
    m[14] = -(far + near) / (far - near);
    m[15] = 1.0;
    Ok(Mat4(m.map(|v| v as f32)))
}

/// A view and a projection (the `V` and `P` of Eqs. 6.4-6.6).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    pub view: Mat4,
    pub proj: Mat4,
}

impl Camera {
    /// `P * V` in `f32` (the matrix the rasterizers apply to every vertex).
    pub fn view_proj(&self) -> Mat4 {
        self.proj.mul(&self.view)
    }

    /// Checks that both matrices are finite and `P V` is invertible.
    pub fn validate(&self) -> Result<(), RenderError> {
        if !(self.view.is_finite() && self.proj.is_finite()) {
            return Err(RenderError::Invalid("camera: non-finite matrix".into()));
        }
        if self.unprojector().is_none() {
            return Err(RenderError::Invalid(
                "camera: the view-projection matrix is singular".into(),
            ));
        }
        Ok(())
    }

    /// `(P V)^-1` in `f64` from the `f64` matrices (Eq. 6.6), `None` when singular.
    pub fn unprojector(&self) -> Option<[f64; 16]> {
        invert4(&mul4_f64(&self.proj.to_f64(), &self.view.to_f64()))
    }

    /// Eqs. 6.5-6.6: the world position of pixel `(x, y)` of a `w x h` frame whose stored
    /// window depth is `d`, given `inv = (P V)^-1` from [`Camera::unprojector`].
    pub fn unproject(inv: &[f64; 16], x: u32, y: u32, w: u32, h: u32, d: f64) -> [f64; 3] {
        let p = [
            (2.0 * x as f64 + 1.0) / w as f64 - 1.0,
            (2.0 * y as f64 + 1.0) / h as f64 - 1.0,
            2.0 * d - 1.0,
            1.0,
        ];
        let mut q = [0.0f64; 4];
        for (r, o) in q.iter_mut().enumerate() {
            *o = (0..4).map(|k| inv[k * 4 + r] * p[k]).sum();
        }
        [q[0] / q[3], q[1] / q[3], q[2] / q[3]]
    }

    /// An orbit camera around `target` with `z` up: `yaw` around `z` from the `+x` axis,
    /// `pitch` above the `xy` plane (degrees), at `distance`.
    pub fn orbit(orbit: &Orbit, aspect: f64) -> Result<Camera, RenderError> {
        if !(orbit.distance > 0.0 && orbit.distance.is_finite()) {
            return Err(RenderError::Invalid(format!(
                "camera: distance {} must be positive",
                orbit.distance
            )));
        }
        if !(orbit.pitch > -90.0 && orbit.pitch < 90.0) {
            return Err(RenderError::Invalid(format!(
                "camera: pitch {} must be in (-90, 90) degrees",
                orbit.pitch
            )));
        }
        let (y, p) = (orbit.yaw.to_radians(), orbit.pitch.to_radians());
        let t = orbit.target;
        let eye = [
            t[0] + orbit.distance * p.cos() * y.cos(),
            t[1] + orbit.distance * p.cos() * y.sin(),
            t[2] + orbit.distance * p.sin(),
        ];
        let view = look_at(eye, t, [0.0, 0.0, 1.0])?;
        let proj = match orbit.ortho_height {
            None => perspective(orbit.fovy, aspect, orbit.near, orbit.far)?,
            Some(hgt) => {
                let hh = hgt / 2.0;
                orthographic(-hh * aspect, hh * aspect, -hh, hh, orbit.near, orbit.far)?
            }
        };
        Ok(Camera { view, proj })
    }
}

/// Parameters of an orbit camera (the CLI's `--camera` and the browser's navigation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Orbit {
    pub target: [f64; 3],
    pub distance: f64,
    /// Degrees around `+z`, from `+x`.
    pub yaw: f64,
    /// Degrees above the `xy` plane.
    pub pitch: f64,
    /// Vertical field of view in degrees (perspective).
    pub fovy: f64,
    pub near: f64,
    pub far: f64,
    /// `Some(height)`: an orthographic camera showing `height` world units vertically.
    pub ortho_height: Option<f64>,
}

impl Orbit {
    /// A camera that frames the bounding sphere `(center, radius)` from `yaw`/`pitch`.
    pub fn framing(center: [f64; 3], radius: f64, yaw: f64, pitch: f64) -> Orbit {
        let r = if radius > 0.0 && radius.is_finite() {
            radius
        } else {
            1.0
        };
        let fovy = 40.0f64;
        let distance = r / (fovy.to_radians() / 2.0).sin() * 1.05;
        Orbit {
            target: center,
            distance,
            yaw,
            pitch,
            fovy,
            near: (distance - 1.5 * r).max(distance * 0.01),
            far: distance + 1.5 * r,
            ortho_height: None,
        }
    }

    /// Applies a `--camera` specification: comma-separated `key=value` items among
    /// `yaw`, `pitch`, `dist`, `fov`, `near`, `far`, `target=x:y:z`, `ortho[=height]`
    /// (degrees and world units). Unnamed keys keep the framing defaults; changing `dist`
    /// moves `near`/`far` with it unless they are given.
    pub fn apply_spec(&mut self, spec: &str, radius: f64) -> Result<(), RenderError> {
        let (mut near, mut far) = (None, None);
        let mut dist_changed = false;
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item.split_once('=').unwrap_or((item, ""));
            let num = |v: &str| -> Result<f64, RenderError> {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| {
                        RenderError::Invalid(format!(
                            "--camera: `{item}`: `{v}` is not a finite number"
                        ))
                    })
            };
            match k {
                "yaw" => self.yaw = num(v)?,
                "pitch" => self.pitch = num(v)?,
                "dist" | "distance" => {
                    self.distance = num(v)?;
                    dist_changed = true;
                }
                "fov" | "fovy" => self.fovy = num(v)?,
                "near" => near = Some(num(v)?),
                "far" => far = Some(num(v)?),
                "target" => {
                    let p: Vec<&str> = v.split(':').collect();
                    if p.len() != 3 {
                        return Err(RenderError::Invalid(format!(
                            "--camera: `{item}`: target needs x:y:z"
                        )));
                    }
                    for (t, s) in self.target.iter_mut().zip(p) {
                        *t = num(s)?;
                    }
                }
                "ortho" => {
                    self.ortho_height = Some(if v.is_empty() {
                        2.2 * radius
                    } else {
                        num(v)?
                    })
                }
                _ => {
                    return Err(RenderError::Invalid(format!(
                        "--camera: unknown key `{k}` (yaw, pitch, dist, fov, near, far, target=x:y:z, ortho[=height])"
                    )))
                }
            }
        }
        if dist_changed {
            self.near = (self.distance - 1.5 * radius).max(self.distance * 0.01);
            self.far = self.distance + 1.5 * radius;
        }
        if let Some(n) = near {
            self.near = n;
        }
        if let Some(f) = far {
            self.far = f;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_times_matrix_is_identity() {
        let cam = Camera::orbit(&Orbit::framing([0.3, -0.2, 0.1], 1.0, 30.0, 20.0), 1.5).unwrap();
        let vp = mul4_f64(&cam.proj.to_f64(), &cam.view.to_f64());
        let inv = cam.unprojector().unwrap();
        let id = mul4_f64(&vp, &inv);
        for (i, v) in id.iter().enumerate() {
            let e = if i % 5 == 0 { 1.0 } else { 0.0 };
            assert!((v - e).abs() < 1e-9, "{i}: {v}");
        }
    }

    #[test]
    fn unproject_inverts_projection_at_pixel_centres() {
        // project a world point, find its pixel and depth, unproject the pixel centre
        let cam = Camera::orbit(&Orbit::framing([0.0; 3], 1.0, 10.0, 35.0), 1.0).unwrap();
        let (w, h) = (64u32, 64u32);
        let vp = mul4_f64(&cam.proj.to_f64(), &cam.view.to_f64());
        let inv = cam.unprojector().unwrap();
        let p = [0.2f64, -0.1, 0.3];
        let mut c = [0.0; 4];
        for (r, o) in c.iter_mut().enumerate() {
            *o = vp[r] * p[0] + vp[4 + r] * p[1] + vp[8 + r] * p[2] + vp[12 + r];
        }
        let (xn, yn, zn) = (c[0] / c[3], c[1] / c[3], c[2] / c[3]);
        let (xw, yw) = ((xn + 1.0) / 2.0 * w as f64, (yn + 1.0) / 2.0 * h as f64);
        let (x, y) = (xw.floor() as u32, yw.floor() as u32);
        let q = Camera::unproject(&inv, x, y, w, h, (zn + 1.0) / 2.0);
        // the unprojected pixel centre lies on the same depth plane within half a pixel
        let back = {
            let mut c2 = [0.0; 4];
            for (r, o) in c2.iter_mut().enumerate() {
                *o = vp[r] * q[0] + vp[4 + r] * q[1] + vp[8 + r] * q[2] + vp[12 + r];
            }
            [c2[0] / c2[3], c2[1] / c2[3], c2[2] / c2[3]]
        };
        assert!((back[2] - zn).abs() < 1e-9);
        assert!((back[0] - xn).abs() <= 1.0 / w as f64 + 1e-12);
        assert!((back[1] - yn).abs() <= 1.0 / h as f64 + 1e-12);
    }

    #[test]
    fn camera_spec_parses_and_rejects() {
        let mut o = Orbit::framing([0.0; 3], 1.0, 0.0, 0.0);
        o.apply_spec("yaw=45, pitch=30,dist=5,target=1:2:3,ortho=4", 1.0)
            .unwrap();
        assert_eq!((o.yaw, o.pitch, o.distance), (45.0, 30.0, 5.0));
        assert_eq!(o.target, [1.0, 2.0, 3.0]);
        assert_eq!(o.ortho_height, Some(4.0));
        assert!((o.near - 3.5).abs() < 1e-12 && (o.far - 6.5).abs() < 1e-12);
        let e = o.apply_spec("zoom=3", 1.0).unwrap_err().to_string();
        assert!(e.contains("zoom"), "{e}");
        assert!(o.apply_spec("yaw=abc", 1.0).is_err());
        assert!(o.apply_spec("target=1:2", 1.0).is_err());
        let bad = Orbit {
            pitch: 90.0,
            ..Orbit::framing([0.0; 3], 1.0, 0.0, 0.0)
        };
        assert!(Camera::orbit(&bad, 1.0).is_err());
    }
}
