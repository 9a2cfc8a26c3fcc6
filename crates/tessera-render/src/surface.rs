//! Triangle surfaces with one physical value per vertex: what the server rasterizes
//! (dissertation §6.3.5: "the results of the simulation, potentially mapped using a user
//! query, can be used for initial server-side rasterization").
//!
//! A value of `NaN` marks a vertex without a value (for example dry terrain under a flood);
//! pixels of triangles touching such a vertex are sent with the rixel "no value" code.

use crate::RenderError;

/// An indexed triangle surface with a scalar per vertex.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Surface {
    /// Vertex positions (world space).
    pub positions: Vec<[f32; 3]>,
    /// Triangles as vertex indices (either winding; both sides are drawn).
    pub triangles: Vec<[u32; 3]>,
    /// One value per vertex (`NaN`: no value).
    pub values: Vec<f32>,
}

/// The largest surface the renderers accept (indices and ids are 32-bit, and the packed
/// depth test reserves one id).
pub const MAX_TRIANGLES: usize = (u32::MAX - 1) as usize;

impl Surface {
    /// Number of triangles.
    pub fn num_triangles(&self) -> usize {
        self.triangles.len()
    }

    /// Checks lengths, index ranges and finite positions; the error names the first
    /// offending vertex or triangle.
    pub fn validate(&self) -> Result<(), RenderError> {
        let nv = self.positions.len();
        if self.values.len() != nv {
            return Err(RenderError::Surface(format!(
                "{} values for {nv} vertices",
                self.values.len()
            )));
        }
        if nv > u32::MAX as usize || self.triangles.len() > MAX_TRIANGLES {
            return Err(RenderError::Surface(format!(
                "{nv} vertices / {} triangles exceed the 32-bit index range",
                self.triangles.len()
            )));
        }
        if let Some(i) = self
            .positions
            .iter()
            .position(|p| !p.iter().all(|c| c.is_finite()))
        {
            return Err(RenderError::Surface(format!(
                "vertex {i} has a non-finite position {:?}",
                self.positions[i]
            )));
        }
        if let Some(t) = self
            .triangles
            .iter()
            .position(|t| t.iter().any(|&v| v as usize >= nv))
        {
            return Err(RenderError::Surface(format!(
                "triangle {t} {:?} refers to a vertex beyond the {nv} vertices",
                self.triangles[t]
            )));
        }
        Ok(())
    }

    /// Axis-aligned bounds `(min, max)` of the vertices (zeros for an empty surface).
    pub fn bounds(&self) -> ([f64; 3], [f64; 3]) {
        if self.positions.is_empty() {
            return ([0.0; 3], [0.0; 3]);
        }
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for p in &self.positions {
            for k in 0..3 {
                lo[k] = lo[k].min(p[k] as f64);
                hi[k] = hi[k].max(p[k] as f64);
            }
        }
        (lo, hi)
    }

    /// Centre and radius of the bounding box's circumscribed sphere.
    pub fn bounding_sphere(&self) -> ([f64; 3], f64) {
        let (lo, hi) = self.bounds();
        let c = [
            (lo[0] + hi[0]) / 2.0,
            (lo[1] + hi[1]) / 2.0,
            (lo[2] + hi[2]) / 2.0,
        ];
        let r = ((hi[0] - lo[0]).powi(2) + (hi[1] - lo[1]).powi(2) + (hi[2] - lo[2]).powi(2))
            .sqrt()
            / 2.0;
        (c, r)
    }

    /// Replaces every vertex value by `f(position)`.
    pub fn set_values(&mut self, f: impl Fn([f32; 3]) -> f32) {
        self.values = self.positions.iter().map(|&p| f(p)).collect();
    }

    /// Finite `(min, max)` of the vertex values, `None` when no value is finite.
    pub fn value_range(&self) -> Option<(f32, f32)> {
        let mut r: Option<(f32, f32)> = None;
        for &v in self.values.iter().filter(|v| v.is_finite()) {
            r = Some(match r {
                None => (v, v),
                Some((a, b)) => (a.min(v), b.max(v)),
            });
        }
        r
    }

    /// A UV sphere of `rings` latitude bands and `segments` longitude segments
    /// (`2 * segments * (rings - 1)` triangles), values = height above the centre.
    pub fn sphere(
        center: [f32; 3],
        radius: f32,
        rings: u32,
        segments: u32,
    ) -> Result<Surface, RenderError> {
        if rings < 2 || segments < 3 {
            return Err(RenderError::Invalid(format!(
                "sphere: need at least 2 rings and 3 segments (got {rings}, {segments})"
            )));
        }
        let tris = 2u64 * segments as u64 * (rings as u64 - 1);
        if tris > MAX_TRIANGLES as u64 {
            return Err(RenderError::Invalid(format!(
                "sphere: {tris} triangles exceed the 32-bit range"
            )));
        }
        let mut positions = vec![[center[0], center[1], center[2] + radius]];
        for r in 1..rings {
            let th = std::f64::consts::PI * r as f64 / rings as f64;
            for s in 0..segments {
                let ph = 2.0 * std::f64::consts::PI * s as f64 / segments as f64;
                positions.push([
                    center[0] + (radius as f64 * th.sin() * ph.cos()) as f32,
                    center[1] + (radius as f64 * th.sin() * ph.sin()) as f32,
                    center[2] + (radius as f64 * th.cos()) as f32,
                ]);
            }
        }
        positions.push([center[0], center[1], center[2] - radius]);
        let south = positions.len() as u32 - 1;
        let ring = |r: u32, s: u32| 1 + (r - 1) * segments + s % segments;
        let mut triangles = Vec::with_capacity(tris as usize);
        for s in 0..segments {
            triangles.push([0, ring(1, s), ring(1, s + 1)]);
        }
        for r in 1..rings - 1 {
            for s in 0..segments {
                let (a, b, c, d) = (
                    ring(r, s),
                    ring(r, s + 1),
                    ring(r + 1, s),
                    ring(r + 1, s + 1),
                );
                triangles.push([a, c, d]);
                triangles.push([a, d, b]);
            }
        }
        for s in 0..segments {
            triangles.push([south, ring(rings - 1, s + 1), ring(rings - 1, s)]);
        }
        let values = positions.iter().map(|p| p[2] - center[2]).collect();
        Ok(Surface {
            positions,
            triangles,
            values,
        })
    }

    /// The parallelogram `origin + a u + b v`, `a, b` in `[0, 1]`, as `nu x nv` quads
    /// (two triangles each); values = `a`.
    pub fn plane(
        origin: [f32; 3],
        u: [f32; 3],
        v: [f32; 3],
        nu: u32,
        nv: u32,
    ) -> Result<Surface, RenderError> {
        if nu == 0 || nv == 0 {
            return Err(RenderError::Invalid(
                "plane: need at least 1x1 quads".into(),
            ));
        }
        let mut positions = Vec::with_capacity(((nu + 1) * (nv + 1)) as usize);
        let mut values = Vec::with_capacity(positions.capacity());
        for j in 0..=nv {
            for i in 0..=nu {
                let (a, b) = (i as f32 / nu as f32, j as f32 / nv as f32);
                positions.push([
                    origin[0] + a * u[0] + b * v[0],
                    origin[1] + a * u[1] + b * v[1],
                    origin[2] + a * u[2] + b * v[2],
                ]);
                values.push(a);
            }
        }
        Ok(Surface {
            positions,
            triangles: grid_triangles(nu + 1, nv + 1),
            values,
        })
    }

    /// A height field over an `nx x ny` grid of points `(x0 + i h, y0 + j h, z[i + nx j])`
    /// with `values[i + nx j]`, two triangles per grid cell (see [`grid_triangles`]).
    pub fn heightfield(
        nx: usize,
        ny: usize,
        spacing: f64,
        origin: [f64; 2],
        z: &[f32],
        values: &[f32],
    ) -> Result<Surface, RenderError> {
        if nx < 2 || ny < 2 || z.len() != nx * ny || values.len() != nx * ny {
            return Err(RenderError::Invalid(format!(
                "height field {nx}x{ny}: need at least 2x2 points and {} heights and values (got {}, {})",
                nx * ny,
                z.len(),
                values.len()
            )));
        }
        if nx > u32::MAX as usize / ny {
            return Err(RenderError::Invalid(format!(
                "height field {nx}x{ny} exceeds the 32-bit index range"
            )));
        }
        let mut positions = Vec::with_capacity(nx * ny);
        for j in 0..ny {
            for i in 0..nx {
                positions.push([
                    (origin[0] + i as f64 * spacing) as f32,
                    (origin[1] + j as f64 * spacing) as f32,
                    z[i + nx * j],
                ]);
            }
        }
        Ok(Surface {
            positions,
            triangles: grid_triangles(nx as u32, ny as u32),
            values: values.to_vec(),
        })
    }

    /// Appends `other` (indices shifted).
    pub fn append(&mut self, other: &Surface) {
        let off = self.positions.len() as u32;
        self.positions.extend_from_slice(&other.positions);
        self.values.extend_from_slice(&other.values);
        self.triangles
            .extend(other.triangles.iter().map(|t| t.map(|v| v + off)));
    }
}

/// Triangles of an `nx x ny` grid of points (x fastest): cell `(i, j)` gives
/// `[p00, p10, p11]` and `[p00, p11, p01]` (counter-clockwise seen from `+z`), cell by cell.
pub fn grid_triangles(nx: u32, ny: u32) -> Vec<[u32; 3]> {
    let mut t = Vec::with_capacity(2 * (nx as usize - 1) * (ny as usize - 1));
    for j in 0..ny - 1 {
        for i in 0..nx - 1 {
            let p00 = i + nx * j;
            let (p10, p01, p11) = (p00 + 1, p00 + nx, p00 + nx + 1);
            t.push([p00, p10, p11]);
            t.push([p00, p11, p01]);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_surfaces_are_valid() {
        let s = Surface::sphere([0.0; 3], 1.0, 8, 12).unwrap();
        s.validate().unwrap();
        assert_eq!(s.num_triangles(), 2 * 12 * 7);
        for p in &s.positions {
            let r = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
            assert!((r - 1.0).abs() < 1e-6);
        }
        let p = Surface::plane([0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], 3, 2).unwrap();
        p.validate().unwrap();
        assert_eq!((p.positions.len(), p.num_triangles()), (12, 12));
        let z = vec![0.0f32; 6];
        let h = Surface::heightfield(3, 2, 0.5, [1.0, 2.0], &z, &z).unwrap();
        h.validate().unwrap();
        assert_eq!(h.positions[5], [2.0, 2.5, 0.0]);
    }

    #[test]
    fn invalid_surfaces_name_the_element() {
        let mut s = Surface::sphere([0.0; 3], 1.0, 4, 4).unwrap();
        s.triangles[3][1] = 999;
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("triangle 3"), "{e}");
        let mut s = Surface::sphere([0.0; 3], 1.0, 4, 4).unwrap();
        s.positions[2][0] = f32::NAN;
        assert!(s.validate().unwrap_err().to_string().contains("vertex 2"));
        s.values.pop();
        assert!(s.validate().is_err());
        assert!(Surface::sphere([0.0; 3], 1.0, 1, 4).is_err());
        assert!(Surface::heightfield(3, 3, 1.0, [0.0; 2], &[0.0; 8], &[0.0; 9]).is_err());
    }
}
