//! Boundary faces, selections and load vectors in the Bernstein-Bézier basis (dissertation
//! §4.1, §4.3).
//!
//! **The DOFs are Bernstein-Bézier coefficients** (the basis of [`crate::element`]): the
//! displacement on a cell is `u = Σ_α c_α B_α` with `B_α = (p!/α!) ξ^α`. A coefficient is the
//! value at its node only at the vertices; elsewhere [`crate::results`] converts to nodal
//! (Lagrange) values.
//!
//! Exact integration for order `p` follows from the integral rule `∫_S B_γ = |S| / C(n+k, k)`
//! for every degree-`n` Bernstein polynomial on a `k`-simplex `S`:
//!
//! - **traction / pressure** (constant per face): the face restriction of a cell basis
//!   function whose multi-index vanishes at the opposite vertex is a degree-`p` Bernstein
//!   polynomial of the face, so `f_α += t |F| / C(p+2, 2)`; the others vanish on `F`;
//! - **gravity** (constant body force `ρ a`): `f_α += ρ a |T| / C(p+3, 3)` for every node of
//!   every cell, exactly the consistent load `M · a` (the mass matrix rows sum to
//!   `ρ |T| / C(p+3,3)` by the partition of unity);
//! - a **general body force** `b(x)` (manufactured solutions) is integrated with a
//!   Grundmann-Möller rule ([`crate::quadrature`]) of a chosen degree.

use crate::element::CellGeometry;
use crate::multi_index::{binomial, multi_indices};
use crate::nodes::HoMesh;
use crate::quadrature::{grundmann_moeller, index_for_degree};
use tessera_mesh::simplex::TET_FACES;
use tessera_mesh::Point;
use tessera_sparse::tcsr::col;

/// A boundary face of a tetrahedral mesh (a face with exactly one incident cell).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoundaryFace {
    /// Face index in [`tessera_mesh::simplex::SimplexMesh::faces`].
    pub face: u32,
    /// The incident cell and the face's local index in it ([`TET_FACES`] order).
    pub cell: u32,
    pub local: u8,
    /// Sorted vertex indices.
    pub vertices: [u32; 3],
    /// Area `|F|`.
    pub area: f64,
    /// Unit outward normal.
    pub normal: [f64; 3],
}

fn sub(a: Point, b: Point) -> [f64; 3] {
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

/// All boundary faces of a tetrahedral mesh, in face order (dissertation §3.4.2: faces with
/// one incident cell).
pub fn boundary_faces(ho: &HoMesh) -> Vec<BoundaryFace> {
    let m = ho.mesh();
    assert_eq!(m.dim(), 3, "boundary_faces needs a tetrahedral mesh");
    let fc = m.facet_cells();
    let faces = m.faces();
    let pos = m.positions();
    let mut out = Vec::new();
    for (f, verts) in faces.iter().enumerate() {
        let row = fc.row(f);
        if row.len() != 1 {
            continue;
        }
        let cell = col(row[0]) as usize;
        let local = m
            .cell_faces(cell)
            .iter()
            .position(|&x| x as usize == f)
            .expect("face of its cell");
        let cv = m.cell(cell);
        let opp = cv[3 - local];
        let (a, b, c) = (
            pos[verts[0] as usize],
            pos[verts[1] as usize],
            pos[verts[2] as usize],
        );
        let mut n = cross(sub(b, a), sub(c, a));
        let len = dot(n, n).sqrt();
        if dot(n, sub(pos[opp as usize], a)) > 0.0 {
            n = [-n[0], -n[1], -n[2]];
        }
        out.push(BoundaryFace {
            face: f as u32,
            cell: cell as u32,
            local: local as u8,
            vertices: *verts,
            area: 0.5 * len,
            normal: if len > 0.0 {
                [n[0] / len, n[1] / len, n[2] / len]
            } else {
                [0.0; 3]
            },
        });
    }
    out
}

/// The global nodes on a boundary face: the local nodes of its cell whose multi-index
/// vanishes at the opposite vertex, `C(p+2, 2)` of them.
pub fn face_nodes(ho: &HoMesh, bf: &BoundaryFace, out: &mut Vec<u32>) {
    let alphas = multi_indices(3, ho.order());
    let mut cn = vec![0u32; ho.nodes_per_cell()];
    ho.cell_nodes(bf.cell as usize, &mut cn);
    let opp = 3 - bf.local as usize;
    debug_assert!(TET_FACES[bf.local as usize].iter().all(|&v| v != opp));
    out.clear();
    out.extend(
        alphas
            .iter()
            .zip(&cn)
            .filter(|(a, _)| a[opp] == 0)
            .map(|(_, &n)| n),
    );
}

/// Add a constant traction `t` on each of `faces` to the load vector `f` (node-major, 3 per
/// node): `f_α += t |F| / C(p+2, 2)` (exact for order p).
pub fn add_traction(
    ho: &HoMesh,
    faces: &[BoundaryFace],
    traction: impl Fn(&BoundaryFace) -> [f64; 3],
    f: &mut [f64],
) {
    let w = 1.0 / binomial(ho.order() + 2, 2) as f64;
    let mut nodes = Vec::new();
    for bf in faces {
        let t = traction(bf);
        face_nodes(ho, bf, &mut nodes);
        for &n in &nodes {
            for k in 0..3 {
                f[n as usize * 3 + k] += t[k] * bf.area * w;
            }
        }
    }
}

/// Add a constant body force `b` (force per volume, e.g. `ρ a`) to `f`:
/// `f_α += b |T| / C(p+3, 3)` for every cell node (exact).
pub fn add_body_force(
    ho: &HoMesh,
    b: [f64; 3],
    f: &mut [f64],
) -> Result<(), crate::error::FemError> {
    let w = 1.0 / binomial(ho.order() + 3, 3) as f64;
    let mut cn = vec![0u32; ho.nodes_per_cell()];
    let m = ho.mesh();
    for c in 0..ho.num_cells() {
        let g = cell_geometry(ho, c)?;
        ho.cell_nodes(c, &mut cn);
        for &n in &cn {
            for k in 0..3 {
                f[n as usize * 3 + k] += b[k] * g.volume * w;
            }
        }
        let _ = m;
    }
    Ok(())
}

/// Add `∫ b(x) · B_α` for a general body force, by a Grundmann-Möller rule exact for
/// polynomials of degree `degree` (choose `degree >= p + deg b`; for smooth `b` the error
/// decays with `degree`).
pub fn add_body_force_fn(
    ho: &HoMesh,
    b: impl Fn(Point) -> [f64; 3],
    degree: usize,
    f: &mut [f64],
) -> Result<(), crate::error::FemError> {
    let p = ho.order();
    let basis = Bernstein::new(3, p);
    let rule = grundmann_moeller(3, index_for_degree(degree));
    let mut cn = vec![0u32; ho.nodes_per_cell()];
    let mut vals = vec![0.0; basis.len()];
    let pos = ho.mesh().positions();
    for c in 0..ho.num_cells() {
        let g = cell_geometry(ho, c)?;
        ho.cell_nodes(c, &mut cn);
        let cv = ho.mesh().cell(c);
        for q in &rule {
            let mut x = [0.0; 3];
            for i in 0..4 {
                let v = pos[cv[i] as usize];
                for k in 0..3 {
                    x[k] += q.bary[i] * v[k];
                }
            }
            let bx = b(x);
            basis.values(&q.bary, &mut vals);
            for (a, &n) in cn.iter().enumerate() {
                let w = q.weight * g.volume * vals[a];
                for k in 0..3 {
                    f[n as usize * 3 + k] += w * bx[k];
                }
            }
        }
    }
    Ok(())
}

/// Geometry of cell `c` of `ho`.
pub fn cell_geometry(ho: &HoMesh, c: usize) -> Result<CellGeometry, crate::error::FemError> {
    let m = ho.mesh();
    let d = m.dim();
    let pos = m.positions();
    let cv = m.cell(c);
    let mut verts = [[0.0; 3]; 4];
    for i in 0..=d {
        verts[i] = pos[cv[i] as usize];
    }
    CellGeometry::new(d, &verts[..=d], c)
}

/// The Bernstein-Bézier basis of order `p` on a `d`-simplex in local node order: values
/// `B_α(ξ) = (p!/α!) ξ^α` and barycentric derivatives `∂B_α/∂ξ_i = p B^{p-1}_{α-e_i}`
/// (dissertation §4.3; the rules of [`crate::element`]).
#[derive(Clone, Debug)]
pub struct Bernstein {
    d: usize,
    p: usize,
    alphas: Vec<[u8; 4]>,
    coef: Vec<f64>,
}

fn fact(n: usize) -> f64 {
    (1..=n).map(|k| k as f64).product()
}

impl Bernstein {
    pub fn new(d: usize, p: usize) -> Self {
        let alphas = multi_indices(d, p);
        let coef = alphas
            .iter()
            .map(|a| fact(p) / a.iter().map(|&x| fact(x as usize)).product::<f64>())
            .collect();
        Bernstein { d, p, alphas, coef }
    }
    /// Number of basis functions.
    pub fn len(&self) -> usize {
        self.alphas.len()
    }
    /// Always false (a basis has at least one function).
    pub fn is_empty(&self) -> bool {
        self.alphas.is_empty()
    }
    /// Multi-indices in local node order.
    pub fn multi_indices(&self) -> &[[u8; 4]] {
        &self.alphas
    }
    /// `out[a] = B_α(ξ)`.
    pub fn values(&self, xi: &[f64; 4], out: &mut [f64]) {
        for (a, al) in self.alphas.iter().enumerate() {
            let mut v = self.coef[a];
            for i in 0..=self.d {
                v *= xi[i].powi(al[i] as i32);
            }
            out[a] = v;
        }
    }
    /// `out[a * 4 + i] = ∂B_α/∂ξ_i (ξ) = p B^{p-1}_{α - e_i}(ξ)` (0 where `α_i = 0`).
    pub fn dxi(&self, xi: &[f64; 4], out: &mut [f64]) {
        let p = self.p;
        for (a, al) in self.alphas.iter().enumerate() {
            for i in 0..4 {
                let mut v = 0.0;
                if i <= self.d && al[i] > 0 {
                    let mut b = *al;
                    b[i] -= 1;
                    v = p as f64 * fact(p - 1)
                        / b.iter().map(|&x| fact(x as usize)).product::<f64>();
                    for j in 0..=self.d {
                        v *= xi[j].powi(b[j] as i32);
                    }
                }
                out[a * 4 + i] = v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_mesh::generate::{box_mesh, BoxKind};
    use tessera_mesh::simplex::SimplexMesh;

    fn unit_box(n: usize, p: usize) -> HoMesh {
        let sm = SimplexMesh::from_poly(&box_mesh(BoxKind::Tet, [n; 3], [1.0; 3])).unwrap();
        HoMesh::new(sm, p).unwrap()
    }

    #[test]
    fn boundary_faces_cover_the_surface_with_outward_normals() {
        let ho = unit_box(2, 1);
        let bf = boundary_faces(&ho);
        assert_eq!(bf.len(), 6 * 2 * 4); // 6 sides, 4 squares each, 2 triangles per square
        let area: f64 = bf.iter().map(|f| f.area).sum();
        assert!((area - 6.0).abs() < 1e-12);
        for f in &bf {
            let pos = ho.mesh().positions();
            let c: Vec<f64> = (0..3)
                .map(|k| f.vertices.iter().map(|&v| pos[v as usize][k]).sum::<f64>() / 3.0)
                .collect();
            // outward: pointing away from the box centre
            let s: f64 = (0..3).map(|k| (c[k] - 0.5) * f.normal[k]).sum();
            assert!(s > 0.0);
        }
    }

    #[test]
    fn traction_and_gravity_loads_sum_to_the_resultant() {
        for p in 1..=3 {
            let ho = unit_box(2, p);
            let bf = boundary_faces(&ho);
            let mut f = vec![0.0; ho.num_nodes() * 3];
            add_traction(&ho, &bf, |_| [1.0, 2.0, 3.0], &mut f);
            for k in 0..3 {
                let s: f64 = f.iter().skip(k).step_by(3).sum();
                assert!((s - 6.0 * (k + 1) as f64).abs() < 1e-12, "p = {p}: {s}");
            }
            let mut g = vec![0.0; ho.num_nodes() * 3];
            add_body_force(&ho, [0.0, 0.0, -2.0], &mut g).unwrap();
            let s: f64 = g.iter().skip(2).step_by(3).sum();
            assert!((s + 2.0).abs() < 1e-12);
            let mut h = vec![0.0; ho.num_nodes() * 3];
            add_body_force_fn(&ho, |_| [0.0, 0.0, -2.0], p, &mut h).unwrap();
            for (a, b) in g.iter().zip(&h) {
                assert!((a - b).abs() < 1e-13, "quadrature equals the exact rule");
            }
        }
    }

    #[test]
    fn bernstein_partition_of_unity_and_derivatives() {
        for p in 1..=4 {
            let b = Bernstein::new(3, p);
            let xi = [0.1, 0.2, 0.3, 0.4];
            let mut v = vec![0.0; b.len()];
            b.values(&xi, &mut v);
            assert!((v.iter().sum::<f64>() - 1.0).abs() < 1e-14);
            let mut d = vec![0.0; b.len() * 4];
            b.dxi(&xi, &mut d);
            // finite differences along ξ_0
            let h = 1e-6;
            let mut vp = vec![0.0; b.len()];
            b.values(&[0.1 + h, 0.2, 0.3, 0.4], &mut vp);
            for a in 0..b.len() {
                assert!(((vp[a] - v[a]) / h - d[a * 4]).abs() < 1e-4);
            }
        }
    }
}
