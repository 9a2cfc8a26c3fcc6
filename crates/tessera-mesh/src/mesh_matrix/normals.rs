//! Vertex normals by mapped products (seed 004 §5.1, Eqs. 2-3; §9 Table 3).
//!
//! The edge vectors of every face come from `Mᵀ` with the edge maps
//! `P1P2 = Mᵀ_(1,2,3)->(-1,1,0) P`, `P1P3 = Mᵀ_(1,2,3)->(-1,0,1) P` (Eq. 2), the face normal is
//! their row-wise cross product, and the vertex normals are `N_v = M_Q N_f` (Eq. 3) with the
//! map `Q` choosing the weighting:
//!
//! | weights | map on `N_f = P1P2 × P1P3` (twice the area vector) | |
//! |---|---|---|
//! | `area` | `M̄` | each face by its area |
//! | `angle` | per entry: the corner angle `θ` times the unit face normal | Thürmer-Wüthrich |
//! | `max` | per entry: `1 / (|e1|² |e2|²)` with `e1, e2` the corner's two edges | N. Max 1999 |
//!
//! For polygons with more than 3 vertices the face normal is the vector area (Newell), the
//! corner angle and Max weights use the corner's own two edges and, for `max`, the corner's
//! cross product `e1 × e2`. Normals are normalized; a vertex of no face, or whose weighted
//! sum vanishes, gets `[0, 0, 0]`.

use super::{spmv, ActionMap, MeshMatrix};
use crate::{MeshError, Point};
use rayon::prelude::*;

/// The weighting of face normals at a vertex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormalWeights {
    Area,
    Angle,
    /// N. Max, "Weights for computing vertex normals from facet normals" (1999).
    Max,
}

impl std::str::FromStr for NormalWeights {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "area" => Ok(Self::Area),
            "angle" => Ok(Self::Angle),
            "max" => Ok(Self::Max),
            _ => Err(format!("unknown weights `{s}` (area, angle or max)")),
        }
    }
}

impl NormalWeights {
    /// The GPU kernels' code for the weighting.
    pub fn code(self) -> u32 {
        match self {
            NormalWeights::Area => 0,
            NormalWeights::Angle => 1,
            NormalWeights::Max => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            NormalWeights::Area => "area",
            NormalWeights::Angle => "angle",
            NormalWeights::Max => "max",
        }
    }
}

fn sub(a: Point, b: Point) -> Point {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn dot(a: Point, b: Point) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn cross(a: Point, b: Point) -> Point {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn flat(p: &[Point]) -> &[f64] {
    // SAFETY: `[f64; 3]` has the layout of three consecutive f64 (no padding), so a slice of
    // `n` points is a slice of `3 n` f64 with the same lifetime and alignment.
    unsafe { std::slice::from_raw_parts(p.as_ptr() as *const f64, p.len() * 3) }
}

/// Face normals `N_f = P1P2 × P1P3` of a triangle mesh by the edge maps of seed Eq. 2 (twice the
/// area vector), or the doubled vector area of general polygons.
pub fn face_normals(m: &MeshMatrix, positions: &[Point]) -> Result<Vec<Point>, MeshError> {
    if positions.len() != m.num_vertices() {
        return Err(MeshError::InvalidTopology(format!(
            "{} positions for {} vertices",
            positions.len(),
            m.num_vertices()
        )));
    }
    if m.uniform_size() == Some(3) {
        let p = flat(positions);
        let e12 = spmv::mtv(m, &ActionMap::stencil(&[-1.0, 1.0, 0.0]), p, 3)?;
        let e13 = spmv::mtv(m, &ActionMap::stencil(&[-1.0, 0.0, 1.0]), p, 3)?;
        Ok(e12
            .par_chunks(3)
            .zip(e13.par_chunks(3))
            .map(|(a, b)| cross([a[0], a[1], a[2]], [b[0], b[1], b[2]]))
            .collect())
    } else {
        // Newell: 2 A n = Σ_k p_k × p_{k+1}, relative to the first vertex for accuracy
        Ok((0..m.num_faces())
            .into_par_iter()
            .with_min_len(1024)
            .map(|f| {
                let face = m.face(f);
                let o = positions[face[0] as usize];
                let mut s = [0.0; 3];
                for k in 1..face.len() - 1 {
                    let c = cross(
                        sub(positions[face[k] as usize], o),
                        sub(positions[face[k + 1] as usize], o),
                    );
                    for i in 0..3 {
                        s[i] += c[i];
                    }
                }
                s
            })
            .collect())
    }
}

/// Per-corner values of the `angle` and `max` maps (one per nonzero of `M`).
pub fn corner_weights(
    m: &MeshMatrix,
    positions: &[Point],
    weights: NormalWeights,
) -> Result<Vec<f64>, MeshError> {
    let rowind = m.rowind();
    Ok((0..m.nnz())
        .into_par_iter()
        .with_min_len(4096)
        .map(|c| {
            let p = positions[rowind[c] as usize];
            let e1 = sub(positions[rowind[m.next(c)] as usize], p);
            let e2 = sub(positions[rowind[m.prev(c)] as usize], p);
            let (l1, l2) = (dot(e1, e1), dot(e2, e2));
            match weights {
                NormalWeights::Area => 1.0,
                NormalWeights::Angle => {
                    let cr = cross(e1, e2);
                    dot(cr, cr).sqrt().atan2(dot(e1, e2))
                }
                NormalWeights::Max => {
                    if l1 == 0.0 || l2 == 0.0 {
                        0.0
                    } else {
                        1.0 / (l1 * l2)
                    }
                }
            }
        })
        .collect())
}

/// Unit vertex normals (see the module docs).
pub fn vertex_normals(
    m: &MeshMatrix,
    positions: &[Point],
    weights: NormalWeights,
) -> Result<Vec<Point>, MeshError> {
    let nf = face_normals(m, positions)?;
    let sums: Vec<f64> = match weights {
        NormalWeights::Area => spmv::mv(m, &ActionMap::binary(), flat(&nf), 3)?,
        NormalWeights::Angle => {
            let theta = corner_weights(m, positions, weights)?;
            let unit: Vec<Point> = nf.par_iter().map(|&n| normalized(n)).collect();
            spmv::mv(
                m,
                &ActionMap::binary().with_entry_values(&theta),
                flat(&unit),
                3,
            )?
        }
        NormalWeights::Max => {
            let w = corner_weights(m, positions, weights)?;
            if m.uniform_size() == Some(3) {
                // e1 × e2 is the same face normal at every corner of a triangle
                spmv::mv(m, &ActionMap::binary().with_entry_values(&w), flat(&nf), 3)?
            } else {
                // general polygons: each corner's own cross product, gathered per vertex
                let t = m.transpose();
                let rowind = m.rowind();
                let mut y = vec![0.0; 3 * m.num_vertices()];
                y.par_chunks_mut(3).enumerate().for_each(|(v, yv)| {
                    for &c in t.row(v) {
                        let c = c as usize;
                        let p = positions[v];
                        let e1 = sub(positions[rowind[m.next(c)] as usize], p);
                        let e2 = sub(positions[rowind[m.prev(c)] as usize], p);
                        let cr = cross(e1, e2);
                        for i in 0..3 {
                            yv[i] += w[c] * cr[i];
                        }
                    }
                });
                y
            }
        }
    };
    Ok(sums
        .par_chunks(3)
        .map(|s| normalized([s[0], s[1], s[2]]))
        .collect())
}

fn normalized(n: Point) -> Point {
    let l = dot(n, n).sqrt();
    if l > 0.0 && l.is_finite() {
        [n[0] / l, n[1] / l, n[2] / l]
    } else {
        [0.0; 3]
    }
}
