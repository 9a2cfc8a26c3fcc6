//! 3x3-block matrices of linear elasticity on tetrahedral meshes (the "fem/*" matrices of
//! dissertation §5.4.3). The matrices of the dissertation were assembled with the method of
//! Chapter 4; until Tessera's FEM assembly is plugged in, [`elasticity_blocks`] assembles the
//! linear (P1) elasticity stiffness matrix itself. The function boundary is
//! `(positions, tetrahedra) -> block CSR with 9-scalar row-major 3x3 entries`, so any assembly
//! producing that can replace it.

use crate::error::{Result, SpmvError};
use crate::layout::CsrMatrix;
use crate::matrices::csr_from_triplets;

/// A tetrahedral mesh: vertex positions and tetrahedra (4 vertex indices each).
#[derive(Clone, Debug, Default)]
pub struct TetMesh {
    pub positions: Vec<[f64; 3]>,
    pub tets: Vec<[u32; 4]>,
}

impl TetMesh {
    /// A structured grid of `nx x ny x nz` cubes, each split into 6 tetrahedra around its main
    /// diagonal (Kuhn triangulation), with vertices jittered by up to `jitter` (deterministic,
    /// seed `seed`) to make entries vary. Vertex order is lexicographic (x fastest).
    pub fn grid(nx: usize, ny: usize, nz: usize, jitter: f64, seed: u64) -> Self {
        let id = |i: usize, j: usize, k: usize| ((k * (ny + 1) + j) * (nx + 1) + i) as u32;
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut rnd = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let mut positions = Vec::with_capacity((nx + 1) * (ny + 1) * (nz + 1));
        for k in 0..=nz {
            for j in 0..=ny {
                for i in 0..=nx {
                    positions.push([
                        i as f64 + jitter * rnd(),
                        j as f64 + jitter * rnd(),
                        k as f64 + jitter * rnd(),
                    ]);
                }
            }
        }
        // the 6 monotone paths from corner 0 to corner 7 of a cube
        const PERMS: [[usize; 3]; 6] = [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ];
        let mut tets = Vec::with_capacity(6 * nx * ny * nz);
        for k in 0..nz {
            for j in 0..ny {
                for i in 0..nx {
                    for perm in PERMS {
                        let mut c = [i, j, k];
                        let mut t = [id(c[0], c[1], c[2]); 4];
                        for (s, &axis) in perm.iter().enumerate() {
                            c[axis] += 1;
                            t[s + 1] = id(c[0], c[1], c[2]);
                        }
                        tets.push(t);
                    }
                }
            }
        }
        TetMesh { positions, tets }
    }
}

/// Assembles the P1 linear elasticity stiffness matrix (Young's modulus `e`, Poisson ratio
/// `nu`) as a block CSR matrix with 3x3 entries (row-major `m00..m22`). For vertices a, b of a
/// tetrahedron with volume V and barycentric gradients g_a, g_b:
/// `K_ab[i][j] = V (lambda g_a[i] g_b[j] + mu g_a[j] g_b[i] + mu delta_ij g_a . g_b)`.
pub fn elasticity_blocks(mesh: &TetMesh, e: f64, nu: f64) -> Result<CsrMatrix<f64>> {
    let lambda = e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu));
    let mu = e / (2.0 * (1.0 + nu));
    let n = mesh.positions.len();
    let nt = mesh.tets.len();
    let (mut r, mut c, mut v) = (
        Vec::with_capacity(16 * nt),
        Vec::with_capacity(16 * nt),
        Vec::with_capacity(144 * nt),
    );
    for (t, tet) in mesh.tets.iter().enumerate() {
        if tet.iter().any(|&i| i as usize >= n) {
            return Err(SpmvError::BadMesh(format!(
                "tetrahedron {t} references a vertex >= {n}"
            )));
        }
        let p = tet.map(|i| mesh.positions[i as usize]);
        let d = |a: usize| [p[a][0] - p[0][0], p[a][1] - p[0][1], p[a][2] - p[0][2]];
        let (e1, e2, e3) = (d(1), d(2), d(3));
        // J = [e1 e2 e3] (columns); gradients of barycentrics 1..3 are the rows of J^-1
        let det = e1[0] * (e2[1] * e3[2] - e2[2] * e3[1]) - e2[0] * (e1[1] * e3[2] - e1[2] * e3[1])
            + e3[0] * (e1[1] * e2[2] - e1[2] * e2[1]);
        if det.abs() < 1e-14 {
            return Err(SpmvError::BadMesh(format!("tetrahedron {t} is degenerate")));
        }
        let cr = |a: [f64; 3], b: [f64; 3]| {
            [
                a[1] * b[2] - a[2] * b[1],
                a[2] * b[0] - a[0] * b[2],
                a[0] * b[1] - a[1] * b[0],
            ]
        };
        let g1 = cr(e2, e3).map(|x| x / det);
        let g2 = cr(e3, e1).map(|x| x / det);
        let g3 = cr(e1, e2).map(|x| x / det);
        let g0 = [
            -(g1[0] + g2[0] + g3[0]),
            -(g1[1] + g2[1] + g3[1]),
            -(g1[2] + g2[2] + g3[2]),
        ];
        let g = [g0, g1, g2, g3];
        let vol = det.abs() / 6.0;
        for a in 0..4 {
            for b in 0..4 {
                let dot = g[a][0] * g[b][0] + g[a][1] * g[b][1] + g[a][2] * g[b][2];
                r.push(tet[a]);
                c.push(tet[b]);
                for i in 0..3 {
                    for j in 0..3 {
                        let delta = if i == j { mu * dot } else { 0.0 };
                        v.push(vol * (lambda * g[a][i] * g[b][j] + mu * g[a][j] * g[b][i] + delta));
                    }
                }
            }
        }
    }
    csr_from_triplets(n, n, 9, &r, &c, &v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::EntrySpec;
    use tessera_core::Par;

    #[test]
    fn rigid_translations_are_in_the_kernel() {
        let m = TetMesh::grid(3, 2, 2, 0.2, 7);
        assert_eq!(m.tets.len(), 6 * 12);
        let k = elasticity_blocks(&m, 1.0, 0.3).unwrap();
        k.validate().unwrap();
        let spec = EntrySpec::builtin("block3").unwrap();
        // K * (constant translation) = 0
        let x: Vec<f64> = (0..k.n_rows).flat_map(|_| [0.3, -1.0, 2.0]).collect();
        let y = k.spmv(&spec, &x, Par::Seq);
        let scale = k.values.iter().map(|v| v.abs()).fold(0.0, f64::max);
        assert!(
            y.iter().all(|v| v.abs() < 1e-12 * scale * 30.0),
            "{:?}",
            &y[..6]
        );
        // symmetric blocks: K_ba = K_ab^T
        for i in 0..k.n_rows {
            for p in k.row_ptr[i] as usize..k.row_ptr[i + 1] as usize {
                let j = k.col_idx[p] as usize;
                let q = (k.row_ptr[j] as usize..k.row_ptr[j + 1] as usize)
                    .find(|&q| k.col_idx[q] as usize == i)
                    .unwrap();
                for a in 0..3 {
                    for b in 0..3 {
                        assert!(
                            (k.values[9 * p + 3 * a + b] - k.values[9 * q + 3 * b + a]).abs()
                                < 1e-12
                        );
                    }
                }
            }
        }
    }
}
