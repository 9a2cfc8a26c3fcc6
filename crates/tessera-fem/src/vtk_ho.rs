//! VTK XML (`.vtu`) output of order-`p` tetrahedral meshes with higher-order cells, so that
//! ParaView shows curved fields:
//!
//! | p | VTK cell | points per cell |
//! |---|---|---|
//! | 1 | `VTK_TETRA` (10) | 4 |
//! | 2 | `VTK_QUADRATIC_TETRA` (24) | 10: vertices, then edge midpoints (0,1) (1,2) (0,2) (0,3) (1,3) (2,3) |
//! | 3 | `VTK_LAGRANGE_TETRAHEDRON` (71) | 20: vertices; edges (0,1) (1,2) (2,0) (0,3) (1,3) (2,3), two points each running from the first vertex to the second; face centres of (0,1,3) (1,2,3) (0,2,3) (0,1,2) |
//!
//! Points are all global nodes of the [`HoMesh`] at their equispaced (Lagrange) positions;
//! point data must be nodal values (see [`crate::results`], which converts the BB
//! coefficients). Cells with negative VTK orientation are written with vertices 1 and 2
//! swapped. Files go through [`tessera_mesh::io::vtu`]: appended raw binary with zlib
//! compression by default (what ParaView writes), base64 or ASCII on request, written
//! atomically and privately ([`tessera_core::atomic`]); tensor components are named (`XX`,
//! `YY`, ...). Result files refuse NaN or infinite values, naming the array and the first
//! offending node or cell, instead of writing them.

use rayon::prelude::*;
use std::path::Path;
use tessera_mesh::io::{
    stage_vtu_grid, write_vtu_grid, DataArray, DataLocation, VtuEncoding, VtuGrid,
};
use tessera_mesh::MeshError;

use crate::multi_index::multi_indices;
use crate::nodes::HoMesh;

/// The VTK cell type for order `p` (1..=3).
pub fn vtk_cell_type(p: usize) -> Option<u8> {
    match p {
        1 => Some(10),
        2 => Some(24),
        3 => Some(71),
        _ => None,
    }
}

/// Multi-indices (over the cell's local vertices) of the VTK points of an order-`p` cell.
pub fn vtk_point_multi_indices(p: usize) -> Option<Vec<[u8; 4]>> {
    let v = |i: usize| {
        let mut a = [0u8; 4];
        a[i] = p as u8;
        a
    };
    let mut out: Vec<[u8; 4]> = (0..4).map(v).collect();
    let pair = |i: usize, j: usize, ai: u8, aj: u8| {
        let mut a = [0u8; 4];
        a[i] = ai;
        a[j] = aj;
        a
    };
    match p {
        1 => {}
        2 => {
            for [i, j] in [[0, 1], [1, 2], [0, 2], [0, 3], [1, 3], [2, 3]] {
                out.push(pair(i, j, 1, 1));
            }
        }
        3 => {
            for [i, j] in [[0, 1], [1, 2], [2, 0], [0, 3], [1, 3], [2, 3]] {
                out.push(pair(i, j, 2, 1));
                out.push(pair(i, j, 1, 2));
            }
            for f in [[0, 1, 3], [1, 2, 3], [0, 2, 3], [0, 1, 2]] {
                let mut a = [0u8; 4];
                for k in f {
                    a[k] = 1;
                }
                out.push(a);
            }
        }
        _ => return None,
    }
    Some(out)
}

/// The grid of `ho` with point and cell data (p = 1..=3): all global nodes as points at
/// their equispaced (Lagrange) positions, one VTK higher-order cell per tetrahedron.
pub fn ho_grid(ho: &HoMesh, data: &[DataArray]) -> Result<VtuGrid, MeshError> {
    let p = ho.order();
    let ty = vtk_cell_type(p).ok_or_else(|| {
        MeshError::Unsupported(format!("VTK output supports orders 1..=3, not p = {p}"))
    })?;
    let vtk = vtk_point_multi_indices(p).expect("p checked");
    let alphas = multi_indices(3, p);
    let local_of = |a: &[u8; 4]| alphas.iter().position(|x| x == a).expect("a local node");
    let swap = |a: &[u8; 4]| [a[0], a[2], a[1], a[3]];
    let map: Vec<usize> = vtk.iter().map(local_of).collect();
    let map_swapped: Vec<usize> = vtk.iter().map(|a| local_of(&swap(a))).collect();
    let nc = ho.num_cells();
    let vpos = ho.mesh().positions();
    let per = vtk.len();
    let mut connectivity = vec![0i64; nc * per];
    connectivity
        .par_chunks_mut(per)
        .enumerate()
        .with_min_len(1024)
        .for_each_init(
            || vec![0u32; ho.nodes_per_cell()],
            |cn, (c, out)| {
                ho.cell_nodes(c, cn);
                let cv = ho.mesh().cell(c);
                let d = |i: usize| {
                    let (a, b) = (vpos[cv[i] as usize], vpos[cv[0] as usize]);
                    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
                };
                let (a, b, e) = (d(1), d(2), d(3));
                let det = a[0] * (b[1] * e[2] - b[2] * e[1]) - a[1] * (b[0] * e[2] - b[2] * e[0])
                    + a[2] * (b[0] * e[1] - b[1] * e[0]);
                let m = if det >= 0.0 { &map } else { &map_swapped };
                for (o, &l) in out.iter_mut().zip(m) {
                    *o = cn[l] as i64;
                }
            },
        );
    let mut g = VtuGrid {
        points: ho.node_positions(),
        connectivity,
        offsets: (1..=nc).map(|c| (c * per) as i64).collect(),
        types: vec![ty; nc],
        ..Default::default()
    };
    for a in data {
        g.set_array(a.clone());
    }
    g.check().map_err(MeshError::Unsupported)?;
    Ok(g)
}

/// Write `ho` with point and cell data as a `.vtu` file (p = 1..=3) in `enc`.
pub fn write_vtu_ho(
    path: &Path,
    ho: &HoMesh,
    data: &[DataArray],
    enc: VtuEncoding,
) -> Result<(), MeshError> {
    let g = ho_grid(ho, data)
        .map_err(|e| MeshError::Unsupported(format!("{}: {e}", path.display())))?;
    write_vtu_grid(path, &g, enc)
}

/// The standard result arrays of [`crate::results::Results`], named as the dissertation's
/// query identifiers expect (§6.3.4: `DisplacementX`, `StressXX`, ...): point arrays
/// `Displacement` (X, Y, Z), `DisplacementMagnitude`, `Strain` and `Stress` (XX, YY, ZZ,
/// XY, YZ, XZ), `VonMises`; cell arrays `CellStrain`, `CellStress`, `CellVonMises`.
pub fn result_arrays(r: &crate::results::Results) -> Vec<DataArray> {
    let mag: Vec<f64> = r
        .displacement
        .iter()
        .map(|u| (u[0] * u[0] + u[1] * u[1] + u[2] * u[2]).sqrt())
        .collect();
    vec![
        DataArray::point_vectors("Displacement", &r.displacement),
        DataArray::point_scalars("DisplacementMagnitude", mag),
        DataArray::symmetric_tensors("Strain", DataLocation::Point, &r.strain),
        DataArray::symmetric_tensors("Stress", DataLocation::Point, &r.stress),
        DataArray::point_scalars("VonMises", r.von_mises.clone()),
        DataArray::symmetric_tensors("CellStrain", DataLocation::Cell, &r.cell_strain),
        DataArray::symmetric_tensors("CellStress", DataLocation::Cell, &r.cell_stress),
        DataArray::cell_scalars("CellVonMises", r.cell_von_mises.clone()),
    ]
}

/// Write the standard result arrays of [`crate::results::Results`] ([`result_arrays`]).
pub fn write_results_vtu(
    path: &Path,
    ho: &HoMesh,
    r: &crate::results::Results,
    enc: VtuEncoding,
) -> Result<(), MeshError> {
    let staged = stage_results_vtu(path, ho, r, enc, None)?;
    Ok(tessera_core::atomic::publish(vec![staged])?)
}

/// [`write_results_vtu`] into a temporary file that waits for
/// [`tessera_core::atomic::publish`], so that a result file and its summary are published
/// together; `note` becomes an XML comment after the header (a run id that ties the file to
/// its summary). A NaN or infinite value in any array is an error naming the array, the
/// component and the first offending node or cell.
pub fn stage_results_vtu(
    path: &Path,
    ho: &HoMesh,
    r: &crate::results::Results,
    enc: VtuEncoding,
    note: Option<&str>,
) -> Result<tessera_core::atomic::Staged, MeshError> {
    let arrays = result_arrays(r);
    for a in &arrays {
        let k = a.components.max(1);
        if let Some(i) = a.values.iter().position(|v| !v.is_finite()) {
            let comp = a
                .component_names
                .get(i % k)
                .cloned()
                .unwrap_or_else(|| (i % k).to_string());
            return Err(MeshError::NonFiniteValue {
                stage: "writing results",
                what: if k > 1 {
                    format!("{} (component {comp})", a.name)
                } else {
                    a.name.clone()
                },
                entity: if a.location == DataLocation::Point {
                    "node"
                } else {
                    "cell"
                },
                index: i / k,
                value: a.values[i],
            });
        }
    }
    let g = ho_grid(ho, &arrays)
        .map_err(|e| MeshError::Unsupported(format!("{}: {e}", path.display())))?;
    stage_vtu_grid(path, &g, enc, note)
}
