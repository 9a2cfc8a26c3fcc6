//! Small generated surfaces for tests and examples: a cube of quads, icospheres, a planar grid
//! (open), a torus. All faces counter-clockwise seen from outside (from +z for the grid).

use super::subdivide::midpoint_refine;
use super::{MeshMatrix, PolygonMesh};
use crate::Point;

/// The cube `[-1, 1]^3` as 6 quads (8 vertices).
pub fn cube() -> PolygonMesh {
    let mut p = Vec::new();
    for i in 0..8 {
        p.push([
            if i & 1 != 0 { 1.0 } else { -1.0 },
            if i & 2 != 0 { 1.0 } else { -1.0 },
            if i & 4 != 0 { 1.0 } else { -1.0 },
        ]);
    }
    let quads = vec![
        0, 2, 3, 1, // z = -1 (outward -z)
        4, 5, 7, 6, // z = +1
        0, 1, 5, 4, // y = -1
        2, 6, 7, 3, // y = +1
        0, 4, 6, 2, // x = -1
        1, 3, 7, 5, // x = +1
    ];
    let m = MeshMatrix::from_uniform(8, 4, quads).expect("cube");
    PolygonMesh::from_matrix(p, m).expect("cube")
}

/// An icosahedron refined `level` times by midpoint subdivision, projected to the unit sphere
/// (`20 · 4^level` triangles).
pub fn icosphere(level: usize) -> PolygonMesh {
    let t = (1.0 + 5f64.sqrt()) / 2.0;
    let raw: [Point; 12] = [
        [-1.0, t, 0.0],
        [1.0, t, 0.0],
        [-1.0, -t, 0.0],
        [1.0, -t, 0.0],
        [0.0, -1.0, t],
        [0.0, 1.0, t],
        [0.0, -1.0, -t],
        [0.0, 1.0, -t],
        [t, 0.0, -1.0],
        [t, 0.0, 1.0],
        [-t, 0.0, -1.0],
        [-t, 0.0, 1.0],
    ];
    let faces: Vec<u32> = vec![
        0, 11, 5, 0, 5, 1, 0, 1, 7, 0, 7, 10, 0, 10, 11, 1, 5, 9, 5, 11, 4, 11, 10, 2, 10, 7, 6, 7,
        1, 8, 3, 9, 4, 3, 4, 2, 3, 2, 6, 3, 6, 8, 3, 8, 9, 4, 9, 5, 2, 4, 11, 6, 2, 10, 8, 6, 7, 9,
        8, 1,
    ];
    let mut mesh = PolygonMesh::from_matrix(
        raw.iter().map(|&p| unit(p)).collect(),
        MeshMatrix::from_uniform(12, 3, faces).expect("icosahedron"),
    )
    .expect("icosahedron");
    for _ in 0..level {
        mesh = midpoint_refine(&mesh).expect("closed manifold");
        for p in &mut mesh.positions {
            *p = unit(*p);
        }
    }
    mesh
}

fn unit(p: Point) -> Point {
    let l = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
    [p[0] / l, p[1] / l, p[2] / l]
}

/// A planar grid of `nx × ny` unit squares in `z = 0` (open surface), as quads or as
/// triangles (each square split along the diagonal from `(i, j)` to `(i+1, j+1)`).
pub fn grid(nx: usize, ny: usize, triangles: bool) -> PolygonMesh {
    let id = |i: usize, j: usize| (j * (nx + 1) + i) as u32;
    let mut p = Vec::with_capacity((nx + 1) * (ny + 1));
    for j in 0..=ny {
        for i in 0..=nx {
            p.push([i as f64, j as f64, 0.0]);
        }
    }
    let mut f = Vec::new();
    for j in 0..ny {
        for i in 0..nx {
            let (a, b, c, d) = (id(i, j), id(i + 1, j), id(i + 1, j + 1), id(i, j + 1));
            if triangles {
                f.extend_from_slice(&[a, b, c, a, c, d]);
            } else {
                f.extend_from_slice(&[a, b, c, d]);
            }
        }
    }
    let n = p.len();
    let m = MeshMatrix::from_uniform(n, if triangles { 3 } else { 4 }, f).expect("grid");
    PolygonMesh::from_matrix(p, m).expect("grid")
}

/// A torus with `nu × nv` quads (major radius `r1` around z, minor radius `r2`), optionally
/// split into triangles.
pub fn torus(nu: usize, nv: usize, r1: f64, r2: f64, triangles: bool) -> PolygonMesh {
    let id = |i: usize, j: usize| ((j % nv) * nu + (i % nu)) as u32;
    let mut p = Vec::with_capacity(nu * nv);
    for j in 0..nv {
        let b = 2.0 * std::f64::consts::PI * j as f64 / nv as f64;
        for i in 0..nu {
            let a = 2.0 * std::f64::consts::PI * i as f64 / nu as f64;
            let r = r1 + r2 * b.cos();
            p.push([r * a.cos(), r * a.sin(), r2 * b.sin()]);
        }
    }
    let mut f = Vec::new();
    for j in 0..nv {
        for i in 0..nu {
            let (a, b, c, d) = (id(i, j), id(i + 1, j), id(i + 1, j + 1), id(i, j + 1));
            if triangles {
                f.extend_from_slice(&[a, b, c, a, c, d]);
            } else {
                f.extend_from_slice(&[a, b, c, d]);
            }
        }
    }
    let n = p.len();
    let m = MeshMatrix::from_uniform(n, if triangles { 3 } else { 4 }, f).expect("torus");
    PolygonMesh::from_matrix(p, m).expect("torus")
}
