//! Solid obstacles as signed distance functions and the cut-cell quantities of Eq. 6.3
//! (dissertation §6.3.2, Fig. 6.6): the open area fraction of every face and the fluid
//! volume fraction of every cell of a regular grid.
//!
//! The signed distance `phi` is negative inside a solid and positive in the fluid; a union of
//! solids is the minimum of their distances. Fractions are those of the piecewise-linear
//! interpolant of `phi` on a subdivision of each element into simplices, which is exact for
//! planar boundaries and second-order accurate for smooth curved ones:
//!
//! | element | samples of `phi` | simplices |
//! |---|---|---|
//! | 2D face (segment) | 2 ends + midpoint | 2 segments |
//! | 2D cell (square) | 4 corners + centre | 4 triangles |
//! | 3D face (square) | 4 corners + centre | 4 triangles |
//! | 3D cell (cube) | 8 corners + 6 face centres + centre | 24 tetrahedra of equal volume |
//!
//! The fraction of a simplex where a linear function is positive has a closed form (sorted
//! vertex values: one vertex on its own side cuts off a corner simplex whose share is the
//! product of the edge ratios).

use std::sync::Arc;

use rayon::prelude::*;

use crate::surface::LatticeSdf;
use crate::FlowError;

/// A solid obstacle.
#[derive(Clone, Debug)]
pub enum Shape {
    /// A ball (a disc in 2D, where points have `z = 0`).
    Sphere { center: [f64; 3], radius: f64 },
    /// An axis-aligned box `[min, max]` (use large z extents in 2D).
    Box { min: [f64; 3], max: [f64; 3] },
    /// A capped cylinder around the segment `a`-`b`.
    Cylinder {
        a: [f64; 3],
        b: [f64; 3],
        radius: f64,
    },
    /// The half-space `normal . x < offset` (`normal` of unit length).
    HalfSpace { normal: [f64; 3], offset: f64 },
    /// A closed triangle surface sampled on a lattice ([`crate::surface`]).
    Mesh(Arc<LatticeSdf>),
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn dot3(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn norm(a: [f64; 3]) -> f64 {
    dot3(a, a).sqrt()
}

impl Shape {
    /// A disc of radius `r` at `(x, y)` (2D).
    pub fn circle(x: f64, y: f64, r: f64) -> Shape {
        Shape::Sphere {
            center: [x, y, 0.0],
            radius: r,
        }
    }
    /// A 2D rectangle.
    pub fn rect(min: [f64; 2], max: [f64; 2]) -> Shape {
        Shape::Box {
            min: [min[0], min[1], -1e30],
            max: [max[0], max[1], 1e30],
        }
    }

    /// Signed distance (negative inside the solid).
    pub fn distance(&self, p: [f64; 3]) -> f64 {
        match self {
            Shape::Sphere { center, radius } => norm(sub(p, *center)) - radius,
            Shape::Box { min, max } => {
                let mut q = [0.0; 3];
                for a in 0..3 {
                    let c = 0.5 * (min[a] + max[a]);
                    let e = 0.5 * (max[a] - min[a]);
                    q[a] = (p[a] - c).abs() - e;
                }
                let outside = norm([q[0].max(0.0), q[1].max(0.0), q[2].max(0.0)]);
                let inside = q[0].max(q[1]).max(q[2]).min(0.0);
                outside + inside
            }
            Shape::Cylinder { a, b, radius } => {
                let ba = sub(*b, *a);
                let len = norm(ba);
                let axis = [ba[0] / len, ba[1] / len, ba[2] / len];
                let c = [
                    0.5 * (a[0] + b[0]),
                    0.5 * (a[1] + b[1]),
                    0.5 * (a[2] + b[2]),
                ];
                let pc = sub(p, c);
                let t = dot3(pc, axis);
                let radial = sub(pc, [axis[0] * t, axis[1] * t, axis[2] * t]);
                let dr = norm(radial) - radius;
                let dz = t.abs() - 0.5 * len;
                let outside = (dr.max(0.0).powi(2) + dz.max(0.0).powi(2)).sqrt();
                outside + dr.max(dz).min(0.0)
            }
            Shape::HalfSpace { normal, offset } => dot3(*normal, p) - offset,
            Shape::Mesh(m) => m.distance(p),
        }
    }

    /// Check parameters (positive radii and extents, finite values).
    pub fn validate(&self) -> Result<(), FlowError> {
        let finite = |v: &[f64]| v.iter().all(|x| x.is_finite());
        let ok = match self {
            Shape::Sphere { center, radius } => finite(center) && *radius > 0.0,
            Shape::Box { min, max } => (0..3).all(|a| max[a] > min[a]) && !min[0].is_nan(),
            Shape::Cylinder { a, b, radius } => {
                finite(a) && finite(b) && *radius > 0.0 && norm(sub(*b, *a)) > 0.0
            }
            Shape::HalfSpace { normal, offset } => {
                finite(normal) && offset.is_finite() && (norm(*normal) - 1.0).abs() < 1e-9
            }
            Shape::Mesh(_) => true,
        };
        if ok {
            Ok(())
        } else {
            Err(FlowError::Invalid(format!("invalid obstacle {self:?}")))
        }
    }
}

/// A union of solid obstacles.
#[derive(Clone, Debug, Default)]
pub struct Obstacles {
    pub shapes: Vec<Shape>,
}

impl Obstacles {
    pub fn new(shapes: Vec<Shape>) -> Self {
        Obstacles { shapes }
    }
    /// Signed distance to the union (`+inf` without obstacles).
    pub fn distance(&self, p: [f64; 3]) -> f64 {
        self.shapes
            .iter()
            .map(|s| s.distance(p))
            .fold(f64::INFINITY, f64::min)
    }
}

/// Fraction of the segment where the linear function with end values `a`, `b` is positive.
pub fn segment_fraction(a: f64, b: f64) -> f64 {
    match (a > 0.0, b > 0.0) {
        (true, true) => 1.0,
        (false, false) => 0.0,
        (true, false) => a / (a - b),
        (false, true) => b / (b - a),
    }
}

fn sort3(mut v: [f64; 3]) -> [f64; 3] {
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

/// Fraction of a triangle where the linear function with vertex values `v` is positive.
pub fn triangle_fraction(v: [f64; 3]) -> f64 {
    let [a, b, c] = sort3(v);
    if a > 0.0 {
        1.0
    } else if c <= 0.0 {
        0.0
    } else if b <= 0.0 {
        // only c positive: corner triangle at c
        (c / (c - a)) * (c / (c - b))
    } else {
        // only a non-positive: corner triangle at a is negative
        1.0 - (a / (a - b)) * (a / (a - c))
    }
}

/// Fraction of a tetrahedron where the linear function with vertex values `v` is positive.
pub fn tetrahedron_fraction(v: [f64; 4]) -> f64 {
    let mut s = v;
    s.sort_by(|a, b| a.total_cmp(b));
    let [a, b, c, d] = s;
    if a > 0.0 {
        1.0
    } else if d <= 0.0 {
        0.0
    } else if c <= 0.0 {
        // one positive vertex d
        (d / (d - a)) * (d / (d - b)) * (d / (d - c))
    } else if b > 0.0 {
        // one non-positive vertex a
        1.0 - (a / (a - b)) * (a / (a - c)) * (a / (a - d))
    } else {
        // two and two: a, b <= 0 < c, d
        let neg = prism_share(a / (a - c), a / (a - d), b / (b - c), b / (b - d));
        1.0 - neg
    }
}

/// Volume share of `{phi <= 0}` in a tetrahedron `a, b, c, d` with `a, b <= 0 < c, d`,
/// given the zero points on the edges as fractions from the negative end:
/// `P_ac = a + t_ac (c - a)` etc. The region is the polyhedron with vertices
/// `a, b, P_ac, P_ad, P_bc, P_bd`; it splits into the tetrahedra
/// `(a, b, P_ac, P_ad)`, `(b, P_ac, P_ad, P_bd)` and `(b, P_ac, P_bc, P_bd)`, whose shares
/// are determinants in barycentric coordinates.
fn prism_share(t_ac: f64, t_ad: f64, t_bc: f64, t_bd: f64) -> f64 {
    // barycentric coordinates over (a, b, c, d)
    let a = [1.0, 0.0, 0.0, 0.0];
    let b = [0.0, 1.0, 0.0, 0.0];
    let pac = [1.0 - t_ac, 0.0, t_ac, 0.0];
    let pad = [1.0 - t_ad, 0.0, 0.0, t_ad];
    let pbc = [0.0, 1.0 - t_bc, t_bc, 0.0];
    let pbd = [0.0, 1.0 - t_bd, 0.0, t_bd];
    det4(a, b, pac, pad).abs() + det4(b, pac, pad, pbd).abs() + det4(b, pac, pbc, pbd).abs()
}

fn det4(r0: [f64; 4], r1: [f64; 4], r2: [f64; 4], r3: [f64; 4]) -> f64 {
    let m = [r0, r1, r2, r3];
    let det3 = |c: [usize; 3], r: [usize; 3]| -> f64 {
        m[r[0]][c[0]] * (m[r[1]][c[1]] * m[r[2]][c[2]] - m[r[1]][c[2]] * m[r[2]][c[1]])
            - m[r[0]][c[1]] * (m[r[1]][c[0]] * m[r[2]][c[2]] - m[r[1]][c[2]] * m[r[2]][c[0]])
            + m[r[0]][c[2]] * (m[r[1]][c[0]] * m[r[2]][c[1]] - m[r[1]][c[1]] * m[r[2]][c[0]])
    };
    let mut d = 0.0;
    for col in 0..4 {
        let cols: Vec<usize> = (0..4).filter(|&c| c != col).collect();
        let minor = det3([cols[0], cols[1], cols[2]], [1, 2, 3]);
        let sign = if col % 2 == 0 { 1.0 } else { -1.0 };
        d += sign * m[0][col] * minor;
    }
    d
}

/// Open face fractions and fluid volume fractions of a regular grid (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct CutCells {
    /// Cells per axis (`dims[2] == 1` in 2D).
    pub dims: [usize; 3],
    /// 2 or 3.
    pub dim: usize,
    /// Cell size.
    pub h: f64,
    /// World position of the grid's lower corner.
    pub origin: [f64; 3],
    /// Per axis `a`, the open fraction of each face normal to `a`; face `(i, j, k)` (the low
    /// face of cell `(i, j, k)`, with one more layer along `a`) is at
    /// `i + fx * (j + fy * k)`, `[fx, fy, fz] = dims + e_a`.
    pub open: Vec<Vec<f64>>,
    /// Fluid volume fraction per cell.
    pub fluid: Vec<f64>,
}

impl CutCells {
    /// Face dimensions of axis `a`.
    pub fn face_dims(dims: [usize; 3], a: usize) -> [usize; 3] {
        let mut d = dims;
        d[a] += 1;
        d
    }

    /// Measure `obstacles` on the grid (`dims`, `h`, `origin`; `dim` = 2 or 3).
    pub fn measure(
        dims: [usize; 3],
        dim: usize,
        h: f64,
        origin: [f64; 3],
        obstacles: &Obstacles,
    ) -> CutCells {
        let [nx, ny, nz] = dims;
        let node = |i: usize, j: usize, k: usize| -> [f64; 3] {
            [
                origin[0] + i as f64 * h,
                origin[1] + j as f64 * h,
                if dim == 3 {
                    origin[2] + k as f64 * h
                } else {
                    0.0
                },
            ]
        };
        // signed distance at the nodes (cell corners)
        let nn = [nx + 1, ny + 1, if dim == 3 { nz + 1 } else { 1 }];
        let nodes: Vec<f64> = (0..nn[0] * nn[1] * nn[2])
            .into_par_iter()
            .with_min_len(1024)
            .map(|q| {
                let (i, j, k) = (q % nn[0], (q / nn[0]) % nn[1], q / (nn[0] * nn[1]));
                obstacles.distance(node(i, j, k))
            })
            .collect();
        let nd = |i: usize, j: usize, k: usize| nodes[i + nn[0] * (j + nn[1] * k)];
        let at = |x: f64, y: f64, z: f64| {
            obstacles.distance([
                origin[0] + x * h,
                origin[1] + y * h,
                if dim == 3 { origin[2] + z * h } else { 0.0 },
            ])
        };
        let mut open = Vec::with_capacity(dim);
        for a in 0..dim {
            let fd = Self::face_dims(dims, a);
            let f: Vec<f64> = (0..fd[0] * fd[1] * fd[2])
                .into_par_iter()
                .with_min_len(1024)
                .map(|q| {
                    let (i, j, k) = (q % fd[0], (q / fd[0]) % fd[1], q / (fd[0] * fd[1]));
                    if dim == 2 {
                        // segment along the other axis
                        let (c0, c1, m) = if a == 0 {
                            (
                                nd(i, j, 0),
                                nd(i, j + 1, 0),
                                at(i as f64, j as f64 + 0.5, 0.0),
                            )
                        } else {
                            (
                                nd(i, j, 0),
                                nd(i + 1, j, 0),
                                at(i as f64 + 0.5, j as f64, 0.0),
                            )
                        };
                        0.5 * (segment_fraction(c0, m) + segment_fraction(m, c1))
                    } else {
                        // square spanned by the two other axes, corners in cyclic order
                        let (u, v) = match a {
                            0 => (1, 2),
                            1 => (0, 2),
                            _ => (0, 1),
                        };
                        let mut corner = [[i, j, k]; 4];
                        corner[1][u] += 1;
                        corner[2][u] += 1;
                        corner[2][v] += 1;
                        corner[3][v] += 1;
                        let cv: Vec<f64> = corner.iter().map(|c| nd(c[0], c[1], c[2])).collect();
                        let mut mc = [i as f64, j as f64, k as f64];
                        mc[u] += 0.5;
                        mc[v] += 0.5;
                        let m = at(mc[0], mc[1], mc[2]);
                        (0..4)
                            .map(|e| triangle_fraction([cv[e], cv[(e + 1) % 4], m]))
                            .sum::<f64>()
                            * 0.25
                    }
                })
                .collect();
            open.push(f);
        }
        let fluid: Vec<f64> = (0..nx * ny * nz)
            .into_par_iter()
            .with_min_len(256)
            .map(|q| {
                let (i, j, k) = (q % nx, (q / nx) % ny, q / (nx * ny));
                let (fi, fj, fk) = (i as f64, j as f64, k as f64);
                if dim == 2 {
                    let cv = [
                        nd(i, j, 0),
                        nd(i + 1, j, 0),
                        nd(i + 1, j + 1, 0),
                        nd(i, j + 1, 0),
                    ];
                    let m = at(fi + 0.5, fj + 0.5, 0.0);
                    (0..4)
                        .map(|e| triangle_fraction([cv[e], cv[(e + 1) % 4], m]))
                        .sum::<f64>()
                        * 0.25
                } else {
                    let mcell = at(fi + 0.5, fj + 0.5, fk + 0.5);
                    let mut sum = 0.0;
                    for a in 0..3 {
                        let (u, v) = match a {
                            0 => (1, 2),
                            1 => (0, 2),
                            _ => (0, 1),
                        };
                        for side in 0..2 {
                            let mut base = [i, j, k];
                            base[a] += side;
                            let mut corner = [base; 4];
                            corner[1][u] += 1;
                            corner[2][u] += 1;
                            corner[2][v] += 1;
                            corner[3][v] += 1;
                            let cv: Vec<f64> =
                                corner.iter().map(|c| nd(c[0], c[1], c[2])).collect();
                            let mut mc = [fi, fj, fk];
                            mc[a] += side as f64;
                            mc[u] += 0.5;
                            mc[v] += 0.5;
                            let mf = at(mc[0], mc[1], mc[2]);
                            for e in 0..4 {
                                sum += tetrahedron_fraction([cv[e], cv[(e + 1) % 4], mf, mcell]);
                            }
                        }
                    }
                    sum / 24.0
                }
            })
            .collect();
        CutCells {
            dims,
            dim,
            h,
            origin,
            open,
            fluid,
        }
    }

    /// Index of face `(i, j, k)` of axis `a`.
    pub fn face_index(&self, a: usize, i: usize, j: usize, k: usize) -> usize {
        let fd = Self::face_dims(self.dims, a);
        i + fd[0] * (j + fd[1] * k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simplex_fractions_match_brute_force() {
        // a plane through random tetrahedra: compare with point sampling
        let mut seed = 12345u64;
        let mut rnd = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        };
        for _ in 0..200 {
            let v = [rnd(), rnd(), rnd(), rnd()];
            let exact = tetrahedron_fraction(v);
            // sample the unit simplex on a lattice of barycentric coordinates
            let m = 40;
            let (mut pos, mut tot) = (0usize, 0usize);
            for i in 0..m {
                for j in 0..m - i {
                    for k in 0..m - i - j {
                        let l = m - 1 - i - j - k;
                        let b = [
                            (i as f64 + 0.25) / m as f64,
                            (j as f64 + 0.25) / m as f64,
                            (k as f64 + 0.25) / m as f64,
                            (l as f64 + 0.25) / m as f64,
                        ];
                        let f: f64 = (0..4).map(|q| b[q] * v[q]).sum();
                        tot += 1;
                        if f > 0.0 {
                            pos += 1;
                        }
                    }
                }
            }
            let est = pos as f64 / tot as f64;
            assert!(
                (est - exact).abs() < 0.06,
                "{v:?}: {exact} vs sampled {est}"
            );
            let t = [v[0], v[1], v[2]];
            let et = triangle_fraction(t);
            let (mut p2, mut t2) = (0usize, 0usize);
            for i in 0..200 {
                for j in 0..200 - i {
                    let b = [
                        (i as f64 + 0.33) / 200.0,
                        (j as f64 + 0.33) / 200.0,
                        (199 - i - j) as f64 / 200.0 + 0.34 / 200.0,
                    ];
                    t2 += 1;
                    if b[0] * t[0] + b[1] * t[1] + b[2] * t[2] > 0.0 {
                        p2 += 1;
                    }
                }
            }
            assert!((p2 as f64 / t2 as f64 - et).abs() < 0.02, "{t:?}");
        }
        // complementarity: f(v) + f(-v) = 1
        for _ in 0..100 {
            let v = [rnd(), rnd(), rnd(), rnd()];
            let s = tetrahedron_fraction(v) + tetrahedron_fraction(v.map(|x| -x));
            assert!((s - 1.0).abs() < 1e-12, "{v:?} {s}");
        }
    }

    #[test]
    fn half_plane_fractions_are_exact() {
        // solid below the line through (0, 0.3) with slope 0.2, unit square grid 8 x 8
        let n = [-0.2f64, 1.0, 0.0];
        let l = (n[0] * n[0] + n[1] * n[1]).sqrt();
        let normal = [n[0] / l, n[1] / l, 0.0];
        let obs = Obstacles::new(vec![Shape::HalfSpace {
            normal,
            offset: 0.3 / l,
        }]);
        let h = 1.0 / 8.0;
        let cc = CutCells::measure([8, 8, 1], 2, h, [0.0; 3], &obs);
        // x-face at x = i h, y in [j h, (j+1) h]: fluid where y > 0.3 + 0.2 x
        for i in 0..=8 {
            for j in 0..8 {
                let y0 = 0.3 + 0.2 * i as f64 * h;
                let exact = (((j + 1) as f64 * h - y0.max(j as f64 * h)) / h).clamp(0.0, 1.0);
                let got = cc.open[0][cc.face_index(0, i, j, 0)];
                assert!(
                    (got - exact).abs() < 1e-12,
                    "face {i},{j}: {got} vs {exact}"
                );
            }
        }
        // total fluid area = 1 - integral of (0.3 + 0.2 x) = 1 - 0.4
        let area: f64 = cc.fluid.iter().sum::<f64>() * h * h;
        assert!((area - 0.6).abs() < 1e-12, "{area}");
    }

    #[test]
    fn sphere_volume_fraction_converges() {
        let obs = Obstacles::new(vec![Shape::Sphere {
            center: [0.5, 0.5, 0.5],
            radius: 0.3,
        }]);
        let n = 24;
        let h = 1.0 / n as f64;
        let cc = CutCells::measure([n, n, n], 3, h, [0.0; 3], &obs);
        let solid: f64 = cc.fluid.iter().map(|f| 1.0 - f).sum::<f64>() * h * h * h;
        let exact = 4.0 / 3.0 * std::f64::consts::PI * 0.027;
        assert!((solid - exact).abs() / exact < 5e-3, "{solid} vs {exact}");
        // the open area of the faces normal to x through the sphere's centre plane
        let i = n / 2;
        let open: f64 = (0..n)
            .flat_map(|k| (0..n).map(move |j| (j, k)))
            .map(|(j, k)| 1.0 - cc.open[0][cc.face_index(0, i, j, k)])
            .sum::<f64>()
            * h
            * h;
        let disc = std::f64::consts::PI * 0.09;
        assert!((open - disc).abs() / disc < 5e-3, "{open} vs {disc}");
    }
}
