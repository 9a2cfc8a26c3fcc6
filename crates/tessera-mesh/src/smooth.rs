//! Laplacian smoothing of inner vertices (dissertation §3.4.2).
//!
//! "Laplacian smoothing of inner vertices also requires the set of boundary vertices, as
//! these should remain unaffected. This mask is computed once, then smoothing is performed
//! iteratively. Each smoothing iteration sets a vertex's position to the average of the
//! positions of its neighbors. [...] separate input and output arrays of positions are used
//! that are swapped between iterations. The set of neighbors is determined by iterating
//! over the corresponding entries in δ1 and ∂1 [...]. Which entry of ∂1 has to be read is
//! determined by the sign of the entry in δ1."
//!
//! One iteration (Jacobi): for every inner vertex `v` with neighbours `N(v)` over edges,
//! `p'(v) = (1/|N(v)|) Σ_{u ∈ N(v)} p(u)`, summed in δ1 row order (edges ascending), so the
//! sequential and the rayon path give bit-identical positions. Boundary vertices (from
//! [`crate::boundary::extract_boundary`]) and vertices without edges keep their position.

use crate::boundary::extract_boundary;
use crate::{Point, PolyMesh};
use rayon::prelude::*;
use tessera_core::Par;
use tessera_sparse::tcsr::decode;

/// Smooth the inner vertices of `mesh` with `iterations` Laplacian (Jacobi) steps, using
/// double-buffered positions and `mesh.par()` (dissertation §3.4.2). Topology and its
/// caches are unchanged.
pub fn laplacian_smooth(mesh: &mut PolyMesh, iterations: usize) {
    if iterations == 0 {
        return;
    }
    let out = smoothed_positions(mesh, iterations);
    *mesh.positions_mut() = out;
}

/// The positions after `iterations` smoothing steps, leaving `mesh` unchanged (see
/// [`laplacian_smooth`]).
pub fn smoothed_positions(mesh: &PolyMesh, iterations: usize) -> Vec<Point> {
    let par = mesh.par();
    let fixed = extract_boundary(mesh).vertex_mask(mesh.num_vertices());
    let ve = mesh.vertex_edges();
    let ev = mesh.edge_vertices();
    let mut cur = mesh.positions().to_vec();
    if iterations == 0 {
        return cur;
    }
    let mut next = cur.clone();
    for _ in 0..iterations {
        let src = &cur;
        let step = |(v, out): (usize, &mut Point)| {
            let row = ve.row(v);
            if fixed[v] || row.is_empty() {
                *out = src[v];
                return;
            }
            let mut s = [0.0f64; 3];
            for &e in row {
                let (e, sign) = decode(e);
                // +1: the edge ends at v, so the neighbour is its start (and vice versa)
                let u = ev[e as usize][(sign < 0) as usize];
                let p = src[u as usize];
                s[0] += p[0];
                s[1] += p[1];
                s[2] += p[2];
            }
            let n = row.len() as f64;
            *out = [s[0] / n, s[1] / n, s[2] / n];
        };
        match par {
            Par::Seq => next.iter_mut().enumerate().for_each(step),
            Par::Rayon => next
                .par_iter_mut()
                .with_min_len(4096)
                .enumerate()
                .for_each(step),
        }
        std::mem::swap(&mut cur, &mut next);
    }
    cur
}
