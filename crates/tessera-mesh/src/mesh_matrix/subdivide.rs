//! One step of Catmull-Clark subdivision of a polygon surface on the mesh matrix (seed 004 §9,
//! Table 5; Catmull and Clark 1978), with the boundary rules of a smooth boundary curve (the
//! cubic B-spline rules, OpenSubdiv's "edge only" boundary interpolation).
//!
//! New vertices: the `V` old vertices (moved), one per edge (`V + e`, edges numbered as in
//! [`super::edges`]), one per face (`V + E + f`): `V' = V + E + F`. New faces: one quad per
//! corner, `(v_k, e_k, f, e_{k-1})` for corner `k` of face `f` (`e_k` the edge from corner `k` to
//! `k + 1`), in corner order: `F' = Σ_f n_f`, the number of nonzeros of `M`, and the result is a
//! quad mesh in the rowind-only form.
//!
//! | point | interior | boundary |
//! |---|---|---|
//! | face | `F = (1/n) Σ P_k` = `Mᵀ` with the weights `1/n_f` | |
//! | edge | `(P_a + P_b + F_1 + F_2) / 4` | `(P_a + P_b) / 2` |
//! | vertex of `n` faces | `((n-2)/n) S + (Σ F_j + Σ P_j) / n²` | `(3/4) S + (P_b1 + P_b2) / 8` |
//!
//! `Σ P_j` runs over the `n` neighbours that follow the vertex in its faces (the oriented
//! adjacency `M̄ Q_n M̄ᵀ P`), `Σ F_j` over its faces (`M̄ F`); `P_b1, P_b2` are its two neighbours
//! along the boundary. The input must be an oriented 2-manifold with boundary and every vertex a
//! single fan ([`super::edges::check_vertex_fans`]); a vertex used by no face keeps its place.

use super::edges::{check_vertex_fans, half_edges, HalfEdges};
use super::{spmv, ActionMap, MeshMatrix, PolygonMesh, NONE};
use crate::{MeshError, Point};
use rayon::prelude::*;

/// Counts of one subdivision step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepCounts {
    pub vertices: usize,
    pub edges: usize,
    pub faces: usize,
}

/// The face points `(1/n_f) Mᵀ P` (seed §5.1 with per-face weights).
pub fn face_points(m: &MeshMatrix, positions: &[Point]) -> Result<Vec<Point>, MeshError> {
    let w: Vec<f64> = (0..m.num_faces())
        .map(|f| 1.0 / m.face_range(f).len() as f64)
        .collect();
    let p = flat(positions);
    let y = spmv::mtv(m, &ActionMap::binary().with_face_weights(&w), p, 3)?;
    Ok(y.chunks(3).map(|c| [c[0], c[1], c[2]]).collect())
}

fn flat(p: &[Point]) -> &[f64] {
    // SAFETY: `[f64; 3]` is three consecutive f64 without padding.
    unsafe { std::slice::from_raw_parts(p.as_ptr() as *const f64, p.len() * 3) }
}

fn add(a: Point, b: Point) -> Point {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

/// One Catmull-Clark step (see the module docs).
pub fn catmull_clark(mesh: &PolygonMesh) -> Result<PolygonMesh, MeshError> {
    let m = &mesh.matrix;
    let he = half_edges(m)?;
    check_vertex_fans(m, &he)?;
    catmull_clark_with(mesh, &he)
}

/// One step with precomputed half-edges.
pub fn catmull_clark_with(mesh: &PolygonMesh, he: &HalfEdges) -> Result<PolygonMesh, MeshError> {
    let m = &mesh.matrix;
    let p = &mesh.positions;
    let (nv, ne, nf) = (mesh.num_vertices(), he.num_edges(), m.num_faces());
    let total = nv + ne + nf;
    if total >= u32::MAX as usize || 4 * m.nnz() >= u32::MAX as usize {
        return Err(MeshError::Unsupported(format!(
            "one subdivision step gives {total} vertices and {} quads, beyond 32-bit indices",
            m.nnz()
        )));
    }
    let fp = face_points(m, p)?;
    let rowind = m.rowind();
    let edge_points: Vec<Point> = he
        .edge_corner
        .par_iter()
        .with_min_len(4096)
        .map(|&c| {
            let c = c as usize;
            let (a, b) = (p[rowind[c] as usize], p[rowind[m.next(c)] as usize]);
            let t = he.twin[c];
            if t == NONE {
                let s = add(a, b);
                [s[0] * 0.5, s[1] * 0.5, s[2] * 0.5]
            } else {
                let (f1, f2) = (fp[m.corner_face(c)], fp[m.corner_face(t as usize)]);
                let s = add(add(a, b), add(f1, f2));
                [s[0] * 0.25, s[1] * 0.25, s[2] * 0.25]
            }
        })
        .collect();
    let t = m.transpose();
    let vertex_points: Vec<Point> = (0..nv)
        .into_par_iter()
        .with_min_len(2048)
        .map(|v| {
            let row = t.row(v);
            let s = p[v];
            if row.is_empty() {
                return s;
            }
            let mut bsum = [0.0; 3];
            let mut nb = 0;
            let mut sf = [0.0; 3];
            let mut sn = [0.0; 3];
            for &c in row {
                let c = c as usize;
                let next = p[rowind[m.next(c)] as usize];
                if he.twin[c] == NONE {
                    bsum = add(bsum, next);
                    nb += 1;
                }
                let pc = m.prev(c);
                if he.twin[pc] == NONE {
                    bsum = add(bsum, p[rowind[pc] as usize]);
                    nb += 1;
                }
                sf = add(sf, fp[m.corner_face(c)]);
                sn = add(sn, next);
            }
            if nb > 0 {
                // boundary vertex (exactly 2 boundary edges on a single fan)
                [
                    0.75 * s[0] + 0.125 * bsum[0],
                    0.75 * s[1] + 0.125 * bsum[1],
                    0.75 * s[2] + 0.125 * bsum[2],
                ]
            } else {
                let n = row.len() as f64;
                let inv = 1.0 / n;
                let (a, b) = ((n - 2.0) * inv, inv * inv);
                [
                    s[0] * a + (sf[0] + sn[0]) * b,
                    s[1] * a + (sf[1] + sn[1]) * b,
                    s[2] * a + (sf[2] + sn[2]) * b,
                ]
            }
        })
        .collect();
    let mut quads = vec![0u32; 4 * m.nnz()];
    let (e0, f0) = (nv as u32, (nv + ne) as u32);
    quads
        .par_chunks_mut(4)
        .with_min_len(4096)
        .enumerate()
        .for_each(|(c, q)| {
            q[0] = rowind[c];
            q[1] = e0 + he.edge_of_corner[c];
            q[2] = f0 + m.corner_face(c) as u32;
            q[3] = e0 + he.edge_of_corner[m.prev(c)];
        });
    let mut positions = vertex_points;
    positions.reserve(ne + nf);
    positions.extend(edge_points);
    positions.extend(fp);
    let matrix = MeshMatrix::from_uniform(total, 4, quads)?;
    Ok(PolygonMesh { positions, matrix })
}

/// The counts of one step: `V' = V + E + F`, `E' = 2E + Σ n_f`, `F' = Σ n_f`.
pub fn step_counts(mesh: &PolygonMesh, he: &HalfEdges) -> StepCounts {
    let (nv, ne, nf, nnz) = (
        mesh.num_vertices(),
        he.num_edges(),
        mesh.num_faces(),
        mesh.matrix.nnz(),
    );
    StepCounts {
        vertices: nv + ne + nf,
        edges: 2 * ne + nnz,
        faces: nnz,
    }
}

/// `levels` Catmull-Clark steps.
pub fn catmull_clark_levels(mesh: &PolygonMesh, levels: usize) -> Result<PolygonMesh, MeshError> {
    let mut m = mesh.clone();
    for _ in 0..levels {
        m = catmull_clark(&m)?;
    }
    Ok(m)
}

/// Midpoint refinement of a triangle mesh (each triangle into 4, new vertices at the edge
/// midpoints, numbered `V + e`): the benchmark's way to larger surfaces of the same shape.
pub fn midpoint_refine(mesh: &PolygonMesh) -> Result<PolygonMesh, MeshError> {
    let m = &mesh.matrix;
    if m.uniform_size() != Some(3) && m.num_faces() > 0 {
        return Err(MeshError::Unsupported(
            "midpoint refinement needs a triangle mesh".into(),
        ));
    }
    let he = half_edges(m)?;
    let nv = mesh.num_vertices();
    if nv + he.num_edges() >= u32::MAX as usize || 12 * m.num_faces() >= u32::MAX as usize {
        return Err(MeshError::Unsupported(
            "midpoint refinement beyond 32-bit indices".into(),
        ));
    }
    let rowind = m.rowind();
    let p = &mesh.positions;
    let mut positions = p.clone();
    positions.extend(he.edge_corner.iter().map(|&c| {
        let (a, b) = (
            p[rowind[c as usize] as usize],
            p[rowind[m.next(c as usize)] as usize],
        );
        [
            0.5 * (a[0] + b[0]),
            0.5 * (a[1] + b[1]),
            0.5 * (a[2] + b[2]),
        ]
    }));
    let mut tris = vec![0u32; 12 * m.num_faces()];
    tris.par_chunks_mut(12)
        .with_min_len(1024)
        .enumerate()
        .for_each(|(f, t)| {
            let c = 3 * f;
            let v = [rowind[c], rowind[c + 1], rowind[c + 2]];
            let e = [
                nv as u32 + he.edge_of_corner[c],
                nv as u32 + he.edge_of_corner[c + 1],
                nv as u32 + he.edge_of_corner[c + 2],
            ];
            t.copy_from_slice(&[
                v[0], e[0], e[2], v[1], e[1], e[0], v[2], e[2], e[1], e[0], e[1], e[2],
            ]);
        });
    let n = positions.len();
    PolygonMesh::from_matrix(positions, MeshMatrix::from_uniform(n, 3, tris)?)
}
