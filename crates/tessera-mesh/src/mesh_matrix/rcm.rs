//! Reverse Cuthill-McKee ordering (George and Liu 1981; seed 004 §9: "the reverse Cuthill-McKee
//! (RCM) ordering method, which attempts to reduce matrix bandwidth. It can be regarded as an
//! iterative variant of the basic breadth first search").
//!
//! On the vertex adjacency `M̄ M̄ᵀ` (off the diagonal): every connected component is traversed
//! breadth-first from a pseudo-peripheral vertex (repeated BFS from the farthest vertex of least
//! degree, George-Liu), neighbours visited by increasing degree (ties by index), and the whole
//! order is reversed. Deterministic.

use super::spgemm::generalized_adjacency;
use super::{Csr, PolygonMesh};
use crate::MeshError;

/// BFS from `root` over vertices not yet stamped: `(order, last level, number of levels)`.
fn bfs(
    adj: &Csr,
    deg: &[u32],
    root: u32,
    mark: &mut [u32],
    stamp: u32,
) -> (Vec<u32>, Vec<u32>, usize) {
    let mut order = vec![root];
    mark[root as usize] = stamp;
    let mut level_start = 0;
    let mut last = vec![root];
    let mut levels = 1;
    let mut nb: Vec<u32> = Vec::new();
    while level_start < order.len() {
        let level_end = order.len();
        for k in level_start..level_end {
            let v = order[k] as usize;
            let (cols, _) = adj.row(v);
            nb.clear();
            nb.extend(
                cols.iter()
                    .copied()
                    .filter(|&w| w as usize != v && mark[w as usize] != stamp),
            );
            nb.sort_by_key(|&w| (deg[w as usize], w));
            for &w in &nb {
                if mark[w as usize] != stamp {
                    mark[w as usize] = stamp;
                    order.push(w);
                }
            }
        }
        if order.len() > level_end {
            last = order[level_end..].to_vec();
            levels += 1;
        }
        level_start = level_end;
    }
    (order, last, levels)
}

/// The RCM order of the graph `adj` (symmetric pattern; the diagonal is ignored): `order[k]` is
/// the old index of the vertex numbered `k`.
pub fn rcm_order(adj: &Csr) -> Vec<u32> {
    let n = adj.nrows;
    let deg: Vec<u32> = (0..n)
        .map(|i| {
            let (c, _) = adj.row(i);
            c.iter().filter(|&&j| j as usize != i).count() as u32
        })
        .collect();
    let mut visited = vec![false; n];
    let mut mark = vec![0u32; n];
    let mut stamp = 0u32;
    let mut out = Vec::with_capacity(n);
    for s in 0..n {
        if visited[s] {
            continue;
        }
        // pseudo-peripheral root (George-Liu): move to a least-degree vertex of the last BFS
        // level while that increases the number of levels
        let mut root = s as u32;
        stamp += 1;
        let (mut order, mut last, mut levels) = bfs(adj, &deg, root, &mut mark, stamp);
        for _ in 0..16 {
            let cand = *last
                .iter()
                .min_by_key(|&&w| (deg[w as usize], w))
                .expect("a BFS level is never empty");
            stamp += 1;
            let (o2, l2, lev2) = bfs(adj, &deg, cand, &mut mark, stamp);
            if lev2 <= levels {
                break;
            }
            (root, order, last, levels) = (cand, o2, l2, lev2);
        }
        let _ = root;
        for &v in &order {
            visited[v as usize] = true;
        }
        out.extend(order);
    }
    out.reverse();
    out
}

/// Renumber a mesh's vertices in RCM order of its vertex adjacency, and its faces by their
/// smallest new vertex (stable): returns the mesh and `new_of_old`.
pub fn reorder_rcm(mesh: &PolygonMesh) -> Result<(PolygonMesh, Vec<u32>), MeshError> {
    let adj = generalized_adjacency(&mesh.matrix)?;
    let order = rcm_order(&adj);
    let mut new_of_old = vec![0u32; order.len()];
    for (k, &old) in order.iter().enumerate() {
        new_of_old[old as usize] = k as u32;
    }
    let renumbered = mesh.renumber_vertices(&new_of_old)?;
    let m = &renumbered.matrix;
    let mut faces: Vec<u32> = (0..m.num_faces() as u32).collect();
    faces.sort_by_key(|&f| *m.face(f as usize).iter().min().unwrap());
    let matrix = m.permute_faces(&faces)?;
    Ok((
        PolygonMesh {
            positions: renumbered.positions,
            matrix,
        },
        new_of_old,
    ))
}

/// The bandwidth of a mesh's vertex adjacency (`max |i - j|` over vertices sharing a face).
pub fn adjacency_bandwidth(mesh: &PolygonMesh) -> Result<usize, MeshError> {
    Ok(generalized_adjacency(&mesh.matrix)?.bandwidth())
}
