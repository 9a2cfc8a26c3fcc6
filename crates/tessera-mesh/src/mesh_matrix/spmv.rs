//! Action-mapped sparse matrix-vector products (seed 004 §5.1, Algorithm 1):
//!
//! ```text
//! M v :  for j in faces, for k in column j:  y[rowind[k]] += Q(values[k]) · x[j]
//! Mᵀ v:  for j in faces, for k in column j:  y[j]         += Q(values[k]) · x[rowind[k]]
//! ```
//!
//! `x` and `y` hold `width` values per row (row-major: `width = 3` multiplies the `n × 3`
//! array of positions `P`, "the multiplication by an array instead of a vector follows
//! naturally by means of an extra loop"). Both run in parallel with the result of the serial
//! Algorithm 1: `Mᵀ v` is parallel over columns; `M v` gathers over the cached transpose
//! ([`super::MeshMatrix::transpose`]), whose rows list a vertex's faces in increasing order,
//! so every `y[i]` is summed in the order of the serial loop.

use super::{ActionMap, MeshMatrix};
use crate::MeshError;
use rayon::prelude::*;

fn check(
    m: &MeshMatrix,
    map: &ActionMap,
    x: &[f64],
    width: usize,
    xrows: usize,
) -> Result<(), MeshError> {
    if width == 0 {
        return Err(MeshError::Unsupported("a width of 0 values per row".into()));
    }
    if x.len() != xrows * width {
        return Err(MeshError::InvalidTopology(format!(
            "mapped SpMV: x has {} values, the product needs {xrows} x {width}",
            x.len()
        )));
    }
    map.check(m.nnz(), m.num_faces())
}

/// `y = Mᵀ_Q x`: one row of `width` values per face; `x` has `width` values per vertex.
pub fn mtv(
    m: &MeshMatrix,
    map: &ActionMap,
    x: &[f64],
    width: usize,
) -> Result<Vec<f64>, MeshError> {
    check(m, map, x, width, m.num_vertices())?;
    let mut y = vec![0.0; m.num_faces() * width];
    let rowind = m.rowind();
    y.par_chunks_mut(width)
        .with_min_len(1024)
        .enumerate()
        .for_each(|(j, yj)| {
            let r = m.face_range(j);
            for (k, e) in r.clone().enumerate() {
                let q = map.value(e, k + 1, j);
                let xr = &x[rowind[e] as usize * width..][..width];
                for (o, &xi) in yj.iter_mut().zip(xr) {
                    *o += q * xi;
                }
            }
        });
    Ok(y)
}

/// `y = M_Q x`: one row of `width` values per vertex; `x` has `width` values per face.
pub fn mv(m: &MeshMatrix, map: &ActionMap, x: &[f64], width: usize) -> Result<Vec<f64>, MeshError> {
    check(m, map, x, width, m.num_faces())?;
    let t = m.transpose();
    let mut y = vec![0.0; m.num_vertices() * width];
    y.par_chunks_mut(width)
        .with_min_len(1024)
        .enumerate()
        .for_each(|(v, yv)| {
            for &c in t.row(v) {
                let c = c as usize;
                let j = m.corner_face(c);
                let k = c - m.face_range(j).start + 1;
                let q = map.value(c, k, j);
                let xr = &x[j * width..][..width];
                for (o, &xi) in yv.iter_mut().zip(xr) {
                    *o += q * xi;
                }
            }
        });
    Ok(y)
}

/// The serial Algorithm 1 for `M v` exactly as written (scatter in face order); the
/// reference the parallel [`mv`] is tested against.
pub fn mv_serial(
    m: &MeshMatrix,
    map: &ActionMap,
    x: &[f64],
    width: usize,
) -> Result<Vec<f64>, MeshError> {
    check(m, map, x, width, m.num_faces())?;
    let mut y = vec![0.0; m.num_vertices() * width];
    let rowind = m.rowind();
    for j in 0..m.num_faces() {
        for (k, e) in m.face_range(j).enumerate() {
            let q = map.value(e, k + 1, j);
            let row = rowind[e] as usize;
            for w in 0..width {
                y[row * width + w] += q * x[j * width + w];
            }
        }
    }
    Ok(y)
}
