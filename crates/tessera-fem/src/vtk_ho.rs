//! VTK XML (`.vtu`) output of order-`p` tetrahedral meshes with higher-order cells, so that
//! ParaView shows curved fields (issue 6):
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
//! swapped. Files are ASCII and written atomically (temporary file, then rename).

use std::io::Write;
use std::path::Path;

use crate::multi_index::multi_indices;
use crate::nodes::HoMesh;

/// A named data array: `components` values per point or per cell.
pub struct VtkArray<'a> {
    pub name: &'a str,
    pub components: usize,
    pub values: &'a [f64],
}

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

fn io_err(path: &Path, e: std::io::Error) -> tessera_mesh::MeshError {
    tessera_mesh::MeshError::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

/// Write `ho` with point and cell data as a `.vtu` file (p = 1..=3).
pub fn write_vtu_ho(
    path: &Path,
    ho: &HoMesh,
    point_data: &[VtkArray],
    cell_data: &[VtkArray],
) -> Result<(), tessera_mesh::MeshError> {
    let p = ho.order();
    let ty = vtk_cell_type(p).ok_or_else(|| {
        tessera_mesh::MeshError::Unsupported(format!(
            "VTK output supports orders 1..=3, not p = {p}"
        ))
    })?;
    let vtk = vtk_point_multi_indices(p).expect("p checked");
    let alphas = multi_indices(3, p);
    let local_of = |a: &[u8; 4]| alphas.iter().position(|x| x == a).expect("a local node");
    let swap = |a: &[u8; 4]| [a[0], a[2], a[1], a[3]];
    let map: Vec<usize> = vtk.iter().map(local_of).collect();
    let map_swapped: Vec<usize> = vtk.iter().map(|a| local_of(&swap(a))).collect();
    let nn = ho.num_nodes();
    let nc = ho.num_cells();
    for a in point_data {
        if a.values.len() != nn * a.components {
            return Err(tessera_mesh::MeshError::Unsupported(format!(
                "point array `{}` has {} values, expected {}",
                a.name,
                a.values.len(),
                nn * a.components
            )));
        }
    }
    for a in cell_data {
        if a.values.len() != nc * a.components {
            return Err(tessera_mesh::MeshError::Unsupported(format!(
                "cell array `{}` has {} values, expected {}",
                a.name,
                a.values.len(),
                nc * a.components
            )));
        }
    }
    let pos = ho.node_positions();
    let vpos = ho.mesh().positions();
    let tmp = path.with_extension("vtu.tmp");
    let file = std::fs::File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
    let mut w = std::io::BufWriter::new(file);
    let res = (|| -> std::io::Result<()> {
        writeln!(w, "<?xml version=\"1.0\"?>")?;
        writeln!(w, "<VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">")?;
        writeln!(
            w,
            "<UnstructuredGrid>\n<Piece NumberOfPoints=\"{nn}\" NumberOfCells=\"{nc}\">"
        )?;
        let arr = |w: &mut std::io::BufWriter<std::fs::File>,
                   a: &VtkArray|
         -> std::io::Result<()> {
            writeln!(w, "<DataArray type=\"Float64\" Name=\"{}\" NumberOfComponents=\"{}\" format=\"ascii\">", a.name, a.components)?;
            for row in a.values.chunks(a.components.max(1)) {
                for v in row {
                    write!(w, "{:e} ", if v.is_finite() { *v } else { 0.0 })?;
                }
                writeln!(w)?;
            }
            writeln!(w, "</DataArray>")
        };
        writeln!(w, "<PointData>")?;
        for a in point_data {
            arr(&mut w, a)?;
        }
        writeln!(w, "</PointData>\n<CellData>")?;
        for a in cell_data {
            arr(&mut w, a)?;
        }
        writeln!(w, "</CellData>\n<Points>\n<DataArray type=\"Float64\" NumberOfComponents=\"3\" format=\"ascii\">")?;
        for x in &pos {
            writeln!(w, "{:e} {:e} {:e}", x[0], x[1], x[2])?;
        }
        writeln!(w, "</DataArray>\n</Points>\n<Cells>\n<DataArray type=\"Int64\" Name=\"connectivity\" format=\"ascii\">")?;
        let mut cn = vec![0u32; ho.nodes_per_cell()];
        for c in 0..nc {
            ho.cell_nodes(c, &mut cn);
            let cv = ho.mesh().cell(c);
            let d = |i: usize| {
                let (a, b) = (vpos[cv[i] as usize], vpos[cv[0] as usize]);
                [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
            };
            let (a, b, e) = (d(1), d(2), d(3));
            let det = a[0] * (b[1] * e[2] - b[2] * e[1]) - a[1] * (b[0] * e[2] - b[2] * e[0])
                + a[2] * (b[0] * e[1] - b[1] * e[0]);
            let m = if det >= 0.0 { &map } else { &map_swapped };
            for &l in m {
                write!(w, "{} ", cn[l])?;
            }
            writeln!(w)?;
        }
        writeln!(
            w,
            "</DataArray>\n<DataArray type=\"Int64\" Name=\"offsets\" format=\"ascii\">"
        )?;
        for c in 0..nc {
            write!(w, "{} ", (c + 1) * vtk.len())?;
            if c % 16 == 15 {
                writeln!(w)?;
            }
        }
        writeln!(
            w,
            "\n</DataArray>\n<DataArray type=\"UInt8\" Name=\"types\" format=\"ascii\">"
        )?;
        for c in 0..nc {
            write!(w, "{ty} ")?;
            if c % 32 == 31 {
                writeln!(w)?;
            }
        }
        writeln!(
            w,
            "\n</DataArray>\n</Cells>\n</Piece>\n</UnstructuredGrid>\n</VTKFile>"
        )?;
        w.flush()
    })();
    res.map_err(|e| io_err(&tmp, e))?;
    drop(w);
    std::fs::rename(&tmp, path).map_err(|e| io_err(path, e))
}

/// Write the standard result arrays of [`crate::results::Results`].
pub fn write_results_vtu(
    path: &Path,
    ho: &HoMesh,
    r: &crate::results::Results,
) -> Result<(), tessera_mesh::MeshError> {
    let flat3: Vec<f64> = r.displacement.iter().flatten().copied().collect();
    let strain: Vec<f64> = r.strain.iter().flatten().copied().collect();
    let stress: Vec<f64> = r.stress.iter().flatten().copied().collect();
    let cstrain: Vec<f64> = r.cell_strain.iter().flatten().copied().collect();
    let cstress: Vec<f64> = r.cell_stress.iter().flatten().copied().collect();
    write_vtu_ho(
        path,
        ho,
        &[
            VtkArray {
                name: "displacement",
                components: 3,
                values: &flat3,
            },
            VtkArray {
                name: "strain",
                components: 6,
                values: &strain,
            },
            VtkArray {
                name: "stress",
                components: 6,
                values: &stress,
            },
            VtkArray {
                name: "von_mises",
                components: 1,
                values: &r.von_mises,
            },
        ],
        &[
            VtkArray {
                name: "cell_strain",
                components: 6,
                values: &cstrain,
            },
            VtkArray {
                name: "cell_stress",
                components: 6,
                values: &cstress,
            },
            VtkArray {
                name: "cell_von_mises",
                components: 1,
                values: &r.cell_von_mises,
            },
        ],
    )
}
