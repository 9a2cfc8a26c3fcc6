//! Obstacles from meshes: a closed triangle surface (the boundary of a tetrahedral mesh, or
//! a triangle mesh file) voxelized into a signed distance lattice, so that it enters the
//! cut-cell fractions like any other [`crate::geometry::Shape`].
//!
//! - Sign: parity of the crossings of a ray along +x through every lattice line (the ray is
//!   shifted by a tiny irrational offset so that it never runs through an edge or a vertex
//!   of a mesh that lies on the lattice, such as a voxel mesh).
//! - Magnitude: the exact distance to the nearest triangle within a band of two lattice
//!   spacings around the surface, clamped to the band outside it (the fractions only need
//!   the zero crossings, which lie inside the band).
//!
//! A surface must be closed and consistently oriented: every edge is used by exactly two
//! triangles, once in each direction. Anything else is an error naming the edge.

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;

use crate::FlowError;

/// A triangle surface.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TriangleSurface {
    pub positions: Vec<[f64; 3]>,
    pub triangles: Vec<[u32; 3]>,
}

impl TriangleSurface {
    /// The boundary of a volumetric mesh (dissertation §3.4.2), polygons split into fans.
    pub fn from_poly_mesh(mesh: &tessera_mesh::PolyMesh) -> Result<Self, FlowError> {
        let b = tessera_mesh::boundary::extract_boundary(mesh);
        let s = b.surface(mesh);
        let mut triangles = Vec::new();
        for p in 0..s.polygon_offsets.len().saturating_sub(1) {
            let v = &s.polygon_vertices
                [s.polygon_offsets[p] as usize..s.polygon_offsets[p + 1] as usize];
            for q in 1..v.len().saturating_sub(1) {
                triangles.push([v[0], v[q], v[q + 1]]);
            }
        }
        Ok(TriangleSurface {
            positions: s.positions,
            triangles,
        })
    }

    /// Read a surface: `.obj` and `.stl` (ASCII or binary) as triangles, any volumetric
    /// format of [`tessera_mesh::io::read_mesh`] (`.msh`, `.mesh`, ...) by its boundary.
    pub fn read(path: &Path) -> Result<Self, FlowError> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let name = name.strip_suffix(".gz").unwrap_or(&name).to_string();
        if name.ends_with(".obj") || name.ends_with(".stl") {
            let data = tessera_mesh::io::read_bytes(path)
                .map_err(|e| FlowError::Invalid(e.to_string()))?;
            if name.ends_with(".obj") {
                read_obj(path, &data)
            } else {
                read_stl(path, &data)
            }
        } else {
            let f =
                tessera_mesh::io::read_mesh(path).map_err(|e| FlowError::Invalid(e.to_string()))?;
            if f.mesh.num_cells() == 0 {
                return Err(FlowError::Invalid(format!(
                    "{}: the mesh has no cells, so it encloses no solid",
                    path.display()
                )));
            }
            Self::from_poly_mesh(&f.mesh)
        }
    }

    /// Error unless every edge is used exactly twice, in opposite directions.
    pub fn check_closed(&self) -> Result<(), FlowError> {
        if self.triangles.is_empty() {
            return Err(FlowError::Invalid("the surface has no triangles".into()));
        }
        let mut edges: Vec<(u32, u32, i8)> = Vec::with_capacity(3 * self.triangles.len());
        for t in &self.triangles {
            for e in 0..3 {
                let (a, b) = (t[e], t[(e + 1) % 3]);
                if a == b {
                    return Err(FlowError::Invalid(format!(
                        "degenerate triangle {t:?} (a repeated vertex)"
                    )));
                }
                edges.push((a.min(b), a.max(b), if a < b { 1 } else { -1 }));
            }
        }
        edges.sort_unstable();
        let mut i = 0;
        while i < edges.len() {
            let mut j = i;
            let mut sum = 0i32;
            while j < edges.len() && edges[j].0 == edges[i].0 && edges[j].1 == edges[i].1 {
                sum += edges[j].2 as i32;
                j += 1;
            }
            let count = j - i;
            if count != 2 || sum != 0 {
                let (a, b) = (edges[i].0, edges[i].1);
                let pa = self.positions[a as usize];
                return Err(FlowError::Invalid(if count != 2 {
                    format!(
                        "the surface is not closed: the edge between vertices {a} and {b} (at {:.4?}) belongs to {count} triangle(s), not 2",
                        pa
                    )
                } else {
                    format!(
                        "the surface is not consistently oriented at the edge between vertices {a} and {b} (at {:.4?})",
                        pa
                    )
                }));
            }
            i = j;
        }
        Ok(())
    }

    /// Axis-aligned bounds `(min, max)`.
    pub fn bounds(&self) -> ([f64; 3], [f64; 3]) {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for p in &self.positions {
            for a in 0..3 {
                lo[a] = lo[a].min(p[a]);
                hi[a] = hi[a].max(p[a]);
            }
        }
        (lo, hi)
    }

    /// `p -> scale * p + offset` for every vertex.
    pub fn transformed(&self, scale: f64, offset: [f64; 3]) -> Self {
        TriangleSurface {
            positions: self
                .positions
                .iter()
                .map(|p| std::array::from_fn(|a| scale * p[a] + offset[a]))
                .collect(),
            triangles: self.triangles.clone(),
        }
    }
}

fn read_obj(path: &Path, data: &[u8]) -> Result<TriangleSurface, FlowError> {
    let text = std::str::from_utf8(data)
        .map_err(|e| FlowError::Invalid(format!("{}: not UTF-8 text ({e})", path.display())))?;
    let mut s = TriangleSurface::default();
    let max_items = data.len() / 2 + 1;
    for (ln, line) in text.lines().enumerate() {
        let err = |m: &str| FlowError::Invalid(format!("{}:{}: {m}", path.display(), ln + 1));
        let mut tok = line.split_whitespace();
        match tok.next() {
            Some("v") => {
                let mut p = [0.0; 3];
                for v in p.iter_mut() {
                    *v = tok
                        .next()
                        .and_then(|t| t.parse::<f64>().ok())
                        .filter(|x| x.is_finite())
                        .ok_or_else(|| err("expected three finite coordinates after `v`"))?;
                }
                if s.positions.len() >= max_items {
                    return Err(err("more vertices than the file can hold"));
                }
                s.positions.push(p);
            }
            Some("f") => {
                let mut idx = Vec::new();
                for t in tok {
                    let first = t.split('/').next().unwrap_or("");
                    let v: i64 = first
                        .parse()
                        .map_err(|_| err(&format!("bad vertex reference `{t}`")))?;
                    let n = s.positions.len() as i64;
                    let i = if v < 0 { n + v } else { v - 1 };
                    if i < 0 || i >= n {
                        return Err(err(&format!(
                            "vertex reference {v} outside 1..={n} (vertices defined so far)"
                        )));
                    }
                    idx.push(i as u32);
                }
                if idx.len() < 3 {
                    return Err(err("a face needs at least three vertices"));
                }
                for q in 1..idx.len() - 1 {
                    s.triangles.push([idx[0], idx[q], idx[q + 1]]);
                }
            }
            _ => {}
        }
    }
    Ok(s)
}

fn read_stl(path: &Path, data: &[u8]) -> Result<TriangleSurface, FlowError> {
    let is_ascii = data.starts_with(b"solid")
        && std::str::from_utf8(&data[..data.len().min(512)])
            .map(|t| t.contains("facet") || t.contains("endsolid"))
            .unwrap_or(false);
    let mut soup: Vec<[f64; 3]> = Vec::new();
    if is_ascii {
        let text = std::str::from_utf8(data)
            .map_err(|e| FlowError::Invalid(format!("{}: not UTF-8 text ({e})", path.display())))?;
        for (ln, line) in text.lines().enumerate() {
            let mut tok = line.split_whitespace();
            if tok.next() == Some("vertex") {
                let mut p = [0.0; 3];
                for v in p.iter_mut() {
                    *v = tok
                        .next()
                        .and_then(|t| t.parse::<f64>().ok())
                        .filter(|x| x.is_finite())
                        .ok_or_else(|| {
                            FlowError::Invalid(format!(
                                "{}:{}: expected three finite coordinates after `vertex`",
                                path.display(),
                                ln + 1
                            ))
                        })?;
                }
                soup.push(p);
            }
        }
        if !soup.len().is_multiple_of(3) {
            return Err(FlowError::Invalid(format!(
                "{}: {} vertices is not a whole number of triangles",
                path.display(),
                soup.len()
            )));
        }
    } else {
        if data.len() < 84 {
            return Err(FlowError::Invalid(format!(
                "{}: binary STL shorter than its 84-byte header",
                path.display()
            )));
        }
        let n = u32::from_le_bytes([data[80], data[81], data[82], data[83]]) as usize;
        // the header count must be backed by the file's bytes
        if (data.len() - 84) / 50 < n {
            return Err(FlowError::Invalid(format!(
                "{}: the header announces {n} triangles but the file holds {}",
                path.display(),
                (data.len() - 84) / 50
            )));
        }
        soup.reserve(3 * n);
        for t in 0..n {
            let base = 84 + 50 * t + 12;
            for v in 0..3 {
                let mut p = [0.0; 3];
                for (a, pa) in p.iter_mut().enumerate() {
                    let o = base + 12 * v + 4 * a;
                    let x = f32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
                    if !x.is_finite() {
                        return Err(FlowError::Invalid(format!(
                            "{}: triangle {t} has a non-finite coordinate",
                            path.display()
                        )));
                    }
                    *pa = x as f64;
                }
                soup.push(p);
            }
        }
    }
    // weld identical positions
    let mut map: HashMap<[u64; 3], u32> = HashMap::new();
    let mut s = TriangleSurface::default();
    let mut idx = Vec::with_capacity(soup.len());
    for p in soup {
        let key = p.map(|x| (x + 0.0).to_bits());
        let id = *map.entry(key).or_insert_with(|| {
            s.positions.push(p);
            (s.positions.len() - 1) as u32
        });
        idx.push(id);
    }
    s.triangles = idx.chunks(3).map(|c| [c[0], c[1], c[2]]).collect();
    Ok(s)
}

/// A signed distance sampled on the nodes of a regular lattice, trilinearly interpolated
/// (positive outside the solid, clamped to `±band`).
#[derive(Clone, Debug, PartialEq)]
pub struct LatticeSdf {
    pub origin: [f64; 3],
    pub h: f64,
    /// Nodes per axis.
    pub dims: [usize; 3],
    pub values: Vec<f32>,
    pub band: f64,
}

fn closest_on_triangle(p: [f64; 3], a: [f64; 3], b: [f64; 3], c: [f64; 3]) -> [f64; 3] {
    let sub = |x: [f64; 3], y: [f64; 3]| [x[0] - y[0], x[1] - y[1], x[2] - y[2]];
    let dot = |x: [f64; 3], y: [f64; 3]| x[0] * y[0] + x[1] * y[1] + x[2] * y[2];
    let add_s =
        |x: [f64; 3], y: [f64; 3], s: f64| [x[0] + s * y[0], x[1] + s * y[1], x[2] + s * y[2]];
    let ab = sub(b, a);
    let ac = sub(c, a);
    let ap = sub(p, a);
    let d1 = dot(ab, ap);
    let d2 = dot(ac, ap);
    if d1 <= 0.0 && d2 <= 0.0 {
        return a;
    }
    let bp = sub(p, b);
    let d3 = dot(ab, bp);
    let d4 = dot(ac, bp);
    if d3 >= 0.0 && d4 <= d3 {
        return b;
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        return add_s(a, ab, d1 / (d1 - d3));
    }
    let cp = sub(p, c);
    let d5 = dot(ab, cp);
    let d6 = dot(ac, cp);
    if d6 >= 0.0 && d5 <= d6 {
        return c;
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        return add_s(a, ac, d2 / (d2 - d6));
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0 {
        return add_s(b, sub(c, b), (d4 - d3) / ((d4 - d3) + (d5 - d6)));
    }
    let denom = 1.0 / (va + vb + vc);
    let v = vb * denom;
    let w = vc * denom;
    [
        a[0] + ab[0] * v + ac[0] * w,
        a[1] + ab[1] * v + ac[1] * w,
        a[2] + ab[2] * v + ac[2] * w,
    ]
}

impl LatticeSdf {
    /// Voxelize a closed `surface` on the lattice of `dims` nodes at `origin + (i, j, k) h`.
    pub fn from_surface(
        surface: &TriangleSurface,
        origin: [f64; 3],
        h: f64,
        dims: [usize; 3],
    ) -> Result<Self, FlowError> {
        surface.check_closed()?;
        let band = 2.0 * h;
        let [nx, ny, nz] = dims;
        let pos = &surface.positions;
        // ray offsets (fractions of h, irrational-looking, tiny)
        let (oy, oz) = (0.000_123_456_789 * h, 0.000_098_765_432_1 * h);
        // crossings per lattice line (j, k): bucket triangles by line
        let mut hits: Vec<Vec<f64>> = vec![Vec::new(); ny * nz];
        for t in &surface.triangles {
            let [a, b, c] = t.map(|v| pos[v as usize]);
            let ymin = a[1].min(b[1]).min(c[1]);
            let ymax = a[1].max(b[1]).max(c[1]);
            let zmin = a[2].min(b[2]).min(c[2]);
            let zmax = a[2].max(b[2]).max(c[2]);
            let j0 = (((ymin - oy - origin[1]) / h).ceil().max(0.0)) as usize;
            let j1 = (((ymax - oy - origin[1]) / h).floor()).min(ny as f64 - 1.0);
            let k0 = (((zmin - oz - origin[2]) / h).ceil().max(0.0)) as usize;
            let k1 = (((zmax - oz - origin[2]) / h).floor()).min(nz as f64 - 1.0);
            if j1 < 0.0 || k1 < 0.0 {
                continue;
            }
            for k in k0..=k1 as usize {
                for j in j0..=j1 as usize {
                    let y = origin[1] + j as f64 * h + oy;
                    let z = origin[2] + k as f64 * h + oz;
                    // 2D barycentric coordinates of (y, z) in the projected triangle
                    let d = (b[1] - a[1]) * (c[2] - a[2]) - (c[1] - a[1]) * (b[2] - a[2]);
                    if d == 0.0 {
                        continue;
                    }
                    let u = ((y - a[1]) * (c[2] - a[2]) - (c[1] - a[1]) * (z - a[2])) / d;
                    let v = ((b[1] - a[1]) * (z - a[2]) - (y - a[1]) * (b[2] - a[2])) / d;
                    if u < 0.0 || v < 0.0 || u + v > 1.0 {
                        continue;
                    }
                    let x = a[0] + u * (b[0] - a[0]) + v * (c[0] - a[0]);
                    hits[j + ny * k].push(x);
                }
            }
        }
        // per z-slab: triangles whose banded bounds reach it
        let mut slab_tris: Vec<Vec<u32>> = vec![Vec::new(); nz];
        for (ti, t) in surface.triangles.iter().enumerate() {
            let zs = t.map(|v| pos[v as usize][2]);
            let zmin = zs[0].min(zs[1]).min(zs[2]) - band;
            let zmax = zs[0].max(zs[1]).max(zs[2]) + band;
            let k0 = ((zmin - origin[2]) / h).ceil().max(0.0) as usize;
            let k1 = ((zmax - origin[2]) / h).floor();
            if k1 < 0.0 {
                continue;
            }
            for s in slab_tris
                .iter_mut()
                .take((k1 as usize + 1).min(nz))
                .skip(k0)
            {
                s.push(ti as u32);
            }
        }
        let mut values = vec![0.0f32; nx * ny * nz];
        values
            .par_chunks_mut(nx * ny)
            .enumerate()
            .for_each(|(k, slab)| {
                let mut dist = vec![band; nx * ny];
                let z = origin[2] + k as f64 * h;
                for &ti in &slab_tris[k] {
                    let [a, b, c] = surface.triangles[ti as usize].map(|v| pos[v as usize]);
                    let lo = |q: usize| a[q].min(b[q]).min(c[q]) - band;
                    let hi = |q: usize| a[q].max(b[q]).max(c[q]) + band;
                    let i0 = ((lo(0) - origin[0]) / h).ceil().max(0.0) as usize;
                    let i1 = ((hi(0) - origin[0]) / h).floor().min(nx as f64 - 1.0);
                    let j0 = ((lo(1) - origin[1]) / h).ceil().max(0.0) as usize;
                    let j1 = ((hi(1) - origin[1]) / h).floor().min(ny as f64 - 1.0);
                    if i1 < 0.0 || j1 < 0.0 {
                        continue;
                    }
                    for j in j0..=j1 as usize {
                        for i in i0..=i1 as usize {
                            let p = [origin[0] + i as f64 * h, origin[1] + j as f64 * h, z];
                            let q = closest_on_triangle(p, a, b, c);
                            let d = ((p[0] - q[0]).powi(2)
                                + (p[1] - q[1]).powi(2)
                                + (p[2] - q[2]).powi(2))
                            .sqrt();
                            let e = &mut dist[i + nx * j];
                            if d < *e {
                                *e = d;
                            }
                        }
                    }
                }
                for j in 0..ny {
                    let mut xs = hits[j + ny * k].clone();
                    xs.sort_by(|a, b| a.total_cmp(b));
                    let mut c = 0usize;
                    for i in 0..nx {
                        let x = origin[0] + i as f64 * h;
                        while c < xs.len() && xs[c] < x {
                            c += 1;
                        }
                        let inside = c % 2 == 1;
                        let d = dist[i + nx * j];
                        slab[i + nx * j] = if inside { -d } else { d } as f32;
                    }
                }
            });
        Ok(LatticeSdf {
            origin,
            h,
            dims,
            values,
            band,
        })
    }

    /// Trilinear interpolation (`+band` outside the lattice).
    pub fn distance(&self, p: [f64; 3]) -> f64 {
        let mut base = [0usize; 3];
        let mut t = [0.0f64; 3];
        for a in 0..3 {
            let x = (p[a] - self.origin[a]) / self.h;
            let n = self.dims[a];
            if !(x >= 0.0 && x <= (n - 1) as f64) {
                return self.band;
            }
            let i = (x.floor() as usize).min(n.saturating_sub(2));
            base[a] = i;
            t[a] = if n > 1 { x - i as f64 } else { 0.0 };
        }
        let [nx, ny, _] = self.dims;
        let at = |i: usize, j: usize, k: usize| -> f64 {
            let ii = (base[0] + i).min(self.dims[0] - 1);
            let jj = (base[1] + j).min(self.dims[1] - 1);
            let kk = (base[2] + k).min(self.dims[2] - 1);
            self.values[ii + nx * (jj + ny * kk)] as f64
        };
        let lerp = |a: f64, b: f64, s: f64| a + (b - a) * s;
        let c00 = lerp(at(0, 0, 0), at(1, 0, 0), t[0]);
        let c10 = lerp(at(0, 1, 0), at(1, 1, 0), t[0]);
        let c01 = lerp(at(0, 0, 1), at(1, 0, 1), t[0]);
        let c11 = lerp(at(0, 1, 1), at(1, 1, 1), t[0]);
        lerp(lerp(c00, c10, t[1]), lerp(c01, c11, t[1]), t[2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cube() -> TriangleSurface {
        // unit cube [0.2, 0.8]^3, outward triangles
        let (a, b) = (0.2, 0.8);
        let positions = (0..8)
            .map(|q| {
                [
                    if q & 1 != 0 { b } else { a },
                    if q & 2 != 0 { b } else { a },
                    if q & 4 != 0 { b } else { a },
                ]
            })
            .collect();
        let quads = [
            [0, 2, 3, 1],
            [4, 5, 7, 6],
            [0, 1, 5, 4],
            [2, 6, 7, 3],
            [0, 4, 6, 2],
            [1, 3, 7, 5],
        ];
        let triangles = quads
            .iter()
            .flat_map(|q| [[q[0], q[1], q[2]], [q[0], q[2], q[3]]])
            .collect();
        TriangleSurface {
            positions,
            triangles,
        }
    }

    #[test]
    fn cube_voxelizes_to_its_signed_distance() {
        let s = cube();
        s.check_closed().unwrap();
        let n = 21;
        let h = 1.0 / (n - 1) as f64;
        let sdf = LatticeSdf::from_surface(&s, [0.0; 3], h, [n, n, n]).unwrap();
        let exact = crate::geometry::Shape::Box {
            min: [0.2; 3],
            max: [0.8; 3],
        };
        for q in 0..n * n * n {
            let p = [
                (q % n) as f64 * h,
                ((q / n) % n) as f64 * h,
                (q / (n * n)) as f64 * h,
            ];
            let e = exact.distance(p).clamp(-2.0 * h, 2.0 * h);
            let g = sdf.values[q] as f64;
            assert!((g - e).abs() < 1e-6, "{p:?}: {g} vs {e}");
        }
    }

    #[test]
    fn open_surfaces_and_bad_files_are_errors() {
        let mut s = cube();
        s.triangles.pop();
        let e = s.check_closed().unwrap_err().to_string();
        assert!(e.contains("not closed") && e.contains("1 triangle"), "{e}");
        let mut s = cube();
        s.triangles[0].swap(1, 2);
        assert!(s.check_closed().is_err());
        let p = Path::new("x.obj");
        let e = read_obj(p, b"v 0 0 0\nv 1 0 0\nf 1 2 7\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.obj:3:"), "{e}");
        let e = read_stl(Path::new("y.stl"), &[0u8; 90]).unwrap();
        assert!(e.triangles.is_empty());
        let mut bin = vec![0u8; 84];
        bin[80] = 200;
        let e = read_stl(Path::new("y.stl"), &bin).unwrap_err().to_string();
        assert!(e.contains("announces 200"), "{e}");
    }

    #[test]
    fn stl_ascii_round_trip_welds_vertices() {
        let s = cube();
        let mut t = String::from("solid cube\n");
        for tri in &s.triangles {
            t.push_str("facet normal 0 0 0\nouter loop\n");
            for &v in tri {
                let p = s.positions[v as usize];
                t.push_str(&format!("vertex {} {} {}\n", p[0], p[1], p[2]));
            }
            t.push_str("endloop\nendfacet\n");
        }
        t.push_str("endsolid cube\n");
        let r = read_stl(Path::new("c.stl"), t.as_bytes()).unwrap();
        assert_eq!(r.positions.len(), 8);
        r.check_closed().unwrap();
    }
}
