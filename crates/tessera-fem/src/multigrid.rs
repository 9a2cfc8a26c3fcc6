//! What the multigrid preconditioners of `tessera-solve` need from the discretization
//! (dissertation §4.3): the control-point positions (the rigid-body modes are exact there,
//! BB coefficients reproduce linear fields) and the Bernstein degree elevation from order 1
//! to order `p` (the transfer of p-multigrid).

use rayon::prelude::*;
use tessera_solve::BlockCsr;

use crate::error::FemError;
use crate::multi_index::multi_indices;
use crate::nodes::HoMesh;

/// The degree elevation `P` from the order-1 space on the mesh vertices to the order-`p` BB
/// space: the node with multi-index `α` over its cell's vertices `v₀..v_d` gets
/// `Σ_k (α_k / p) u(v_k)`, so `P` reproduces every order-1 field exactly. Rows are the
/// order-`p` nodes (vertex nodes first, so `P` is the identity on them), columns the
/// vertices; blocks `w I₃` (3D elasticity, `e = 3`).
pub fn degree_elevation(ho: &HoMesh) -> Result<BlockCsr, FemError> {
    let d = ho.dim();
    let p = ho.order();
    if d != 3 {
        return Err(FemError::UnsupportedDimension(d));
    }
    let n = ho.num_nodes();
    let nv = ho.mesh().num_vertices();
    let alphas = multi_indices(d, p);
    let m = ho.nodes_per_cell();
    let cv = ho.mesh().cell_vertices();
    // the first cell of every node supplies its row (every cell gives the same weights)
    let mut first = vec![u32::MAX; n];
    let mut nodes = vec![0u32; m];
    for c in 0..ho.num_cells() {
        ho.cell_nodes(c, &mut nodes);
        for (l, &g) in nodes.iter().enumerate() {
            if first[g as usize] == u32::MAX {
                first[g as usize] = (c * m + l) as u32;
            }
        }
    }
    let rows: Vec<Vec<(u32, f64)>> = first
        .par_iter()
        .with_min_len(4096)
        .map(|&code| {
            if code == u32::MAX {
                return Vec::new();
            }
            let (c, l) = (code as usize / m, code as usize % m);
            let mut r: Vec<(u32, f64)> = (0..=d)
                .filter(|&k| alphas[l][k] > 0)
                .map(|k| (cv[c * (d + 1) + k], alphas[l][k] as f64 / p as f64))
                .collect();
            r.sort_unstable_by_key(|e| e.0);
            r
        })
        .collect();
    let mut row_ptr = vec![0u32];
    let mut cols = Vec::new();
    let mut vals = Vec::new();
    for r in rows {
        for (v, w) in r {
            cols.push(v);
            vals.extend_from_slice(&[w, 0.0, 0.0, 0.0, w, 0.0, 0.0, 0.0, w]);
        }
        row_ptr.push(u32::try_from(cols.len()).map_err(|_| {
            FemError::TooLarge("degree elevation needs more than 32-bit offsets".into())
        })?);
    }
    Ok(BlockCsr {
        nrows: n,
        ncols: nv,
        row_ptr,
        cols,
        vals,
    })
}
