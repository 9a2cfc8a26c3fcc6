//! VTK XML unstructured grids (`.vtu`), the format ParaView opens.
//!
//! Tetrahedra, hexahedra, prisms and pyramids are written as `VTK_TETRA` (10),
//! `VTK_HEXAHEDRON` (12), `VTK_WEDGE` (13) and `VTK_PYRAMID` (14) when a cell has that
//! combinatorial type; every other cell is a `VTK_POLYHEDRON` (42) with its outward face
//! loops in the `faces` / `faceoffsets` arrays (dissertation §3.3: general polyhedral
//! meshes). For `faces`, each polyhedron contributes `nfaces, (npts, ids...)...`;
//! `faceoffsets[c]` is the end of cell `c`'s stream in `faces`, or -1 for cells that are
//! not polyhedra. Data arrays are ASCII or base64 binary (an 8-byte `UInt64` length
//! followed by the little-endian values, encoded as one base64 stream).
//!
//! Point and cell data ([`DataArray`]: scalar or 3-vector `Float64` fields) are written
//! alongside, so FEM results can be stored with the mesh.

use super::{fmt_f64, write_atomic};
use crate::{CellType, MeshError, Point, PolyMesh};
use std::io::Write;
use std::path::Path;
use tessera_sparse::tcsr::{col, decode};

/// Where a data array lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataLocation {
    Point,
    Cell,
}

/// A named `Float64` field with 1 (scalar) or 3 (vector) components per point or cell.
#[derive(Clone, Debug, PartialEq)]
pub struct DataArray {
    pub name: String,
    pub location: DataLocation,
    /// Components per tuple (1 or 3 for ParaView's scalar/vector handling; any >= 1 is written).
    pub components: usize,
    /// `components * count` values, tuple after tuple.
    pub values: Vec<f64>,
}

impl DataArray {
    pub fn point_scalars(name: impl Into<String>, values: Vec<f64>) -> Self {
        DataArray {
            name: name.into(),
            location: DataLocation::Point,
            components: 1,
            values,
        }
    }
    pub fn point_vectors(name: impl Into<String>, values: &[[f64; 3]]) -> Self {
        DataArray {
            name: name.into(),
            location: DataLocation::Point,
            components: 3,
            values: values.iter().flatten().copied().collect(),
        }
    }
    pub fn cell_scalars(name: impl Into<String>, values: Vec<f64>) -> Self {
        DataArray {
            name: name.into(),
            location: DataLocation::Cell,
            components: 1,
            values,
        }
    }
    pub fn cell_vectors(name: impl Into<String>, values: &[[f64; 3]]) -> Self {
        DataArray {
            name: name.into(),
            location: DataLocation::Cell,
            components: 3,
            values: values.iter().flatten().copied().collect(),
        }
    }
}

/// How data arrays are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum VtuEncoding {
    /// Human-readable numbers (floats with round-trip precision).
    Ascii,
    /// Raw little-endian values in base64 (`format="binary"`), exact and compact.
    #[default]
    Base64,
}

/// VTK cell type numbers.
pub const VTK_TRIANGLE: u8 = 5;
pub const VTK_POLYGON: u8 = 7;
pub const VTK_QUAD: u8 = 9;
pub const VTK_TETRA: u8 = 10;
pub const VTK_HEXAHEDRON: u8 = 12;
pub const VTK_WEDGE: u8 = 13;
pub const VTK_PYRAMID: u8 = 14;
pub const VTK_POLYHEDRON: u8 = 42;

/// Cells in VTK's flat layout.
struct Cells {
    connectivity: Vec<i64>,
    offsets: Vec<i64>,
    types: Vec<u8>,
    /// `faces`, `faceoffsets` when any cell is a polyhedron
    faces: Option<(Vec<i64>, Vec<i64>)>,
}

fn volume_cells(mesh: &PolyMesh) -> Cells {
    let nc = mesh.num_cells();
    let mut connectivity = Vec::with_capacity(nc * 4);
    let mut offsets = Vec::with_capacity(nc);
    let mut types = Vec::with_capacity(nc);
    let mut faces: Vec<i64> = Vec::new();
    let mut faceoffsets: Vec<i64> = Vec::new();
    let mut any_poly = false;
    let mut buf = [0u32; 8];
    for c in 0..nc {
        match super::typed_cell_vertices(mesh, c, &mut buf) {
            Some(ty) => {
                let (vt, order): (u8, &[usize]) = match ty {
                    CellType::Tetrahedron => (VTK_TETRA, &[0, 1, 2, 3]),
                    CellType::Hexahedron => (VTK_HEXAHEDRON, &[0, 1, 2, 3, 4, 5, 6, 7]),
                    // VTK's wedge has Gmsh's vertex order: its parametric coordinates put
                    // triangle 0,1,2 at z = 0 with its right-hand normal toward 3,4,5
                    // (vtkWedge.cxx; the "points outward" sentence of its header disagrees
                    // with its own parametric coordinates)
                    CellType::Prism => (VTK_WEDGE, &[0, 1, 2, 3, 4, 5]),
                    CellType::Pyramid => (VTK_PYRAMID, &[0, 1, 2, 3, 4]),
                    CellType::Polyhedron => unreachable!("typed cells are standard"),
                };
                connectivity.extend(order.iter().map(|&i| buf[i] as i64));
                types.push(vt);
                faceoffsets.push(-1);
            }
            None => {
                any_poly = true;
                for &v in mesh.cell_vertices().row(c) {
                    connectivity.push(col(v) as i64);
                }
                types.push(VTK_POLYHEDRON);
                let fv = mesh.face_vertices();
                let row = mesh.cell_faces().row(c);
                faces.push(row.len() as i64);
                for &e in row {
                    let (f, s) = decode(e);
                    let l = fv.row(f as usize);
                    faces.push(l.len() as i64);
                    let start = faces.len();
                    faces.extend(l.iter().map(|&v| col(v) as i64));
                    if s < 0 {
                        faces[start..].reverse();
                    }
                }
                faceoffsets.push(faces.len() as i64);
            }
        }
        offsets.push(connectivity.len() as i64);
    }
    Cells {
        connectivity,
        offsets,
        types,
        faces: any_poly.then_some((faces, faceoffsets)),
    }
}

/// Write `mesh` with data arrays as a `.vtu` (base64 binary; `.gz` compresses the file).
pub fn write_vtu(path: &Path, mesh: &PolyMesh, data: &[DataArray]) -> Result<(), MeshError> {
    write_vtu_with(path, mesh, data, VtuEncoding::Base64)
}

/// Write `mesh` with data arrays as a `.vtu` in the given encoding.
pub fn write_vtu_with(
    path: &Path,
    mesh: &PolyMesh,
    data: &[DataArray],
    enc: VtuEncoding,
) -> Result<(), MeshError> {
    let cells = volume_cells(mesh);
    write_grid(path, mesh.positions(), &cells, data, enc)
}

/// Write a polygon surface (such as a boundary from `Boundary::surface`) as a `.vtu`:
/// triangles as `VTK_TRIANGLE`, quads as `VTK_QUAD`, other polygons as `VTK_POLYGON`.
pub fn write_vtu_polygons(
    path: &Path,
    positions: &[Point],
    polygon_offsets: &[u32],
    polygon_vertices: &[u32],
    data: &[DataArray],
) -> Result<(), MeshError> {
    check_polygons(path, positions.len(), polygon_offsets, polygon_vertices)?;
    let np = polygon_offsets.len().saturating_sub(1);
    let mut cells = Cells {
        connectivity: polygon_vertices.iter().map(|&v| v as i64).collect(),
        offsets: Vec::with_capacity(np),
        types: Vec::with_capacity(np),
        faces: None,
    };
    for w in polygon_offsets.windows(2) {
        cells.offsets.push(w[1] as i64);
        cells.types.push(match w[1] - w[0] {
            3 => VTK_TRIANGLE,
            4 => VTK_QUAD,
            _ => VTK_POLYGON,
        });
    }
    write_grid(path, positions, &cells, data, VtuEncoding::Base64)
}

pub(crate) fn check_polygons(
    path: &Path,
    nv: usize,
    offsets: &[u32],
    verts: &[u32],
) -> Result<(), MeshError> {
    let bad = |m: String| MeshError::Unsupported(format!("{}: {m}", path.display()));
    if offsets.first().copied().unwrap_or(0) != 0
        || offsets.last().copied().unwrap_or(0) as usize != verts.len()
    {
        return Err(bad(
            "polygon offsets must start at 0 and end at the number of polygon vertices".into(),
        ));
    }
    if offsets.windows(2).any(|w| w[1] < w[0] + 3) {
        return Err(bad(
            "every polygon needs at least 3 vertices (offsets must increase by 3 or more)".into(),
        ));
    }
    if let Some(&v) = verts.iter().find(|&&v| v as usize >= nv) {
        return Err(bad(format!(
            "polygon vertex {v} out of range (there are {nv} vertices)"
        )));
    }
    Ok(())
}

fn base64(bytes: &[u8], out: &mut String) {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out.reserve(bytes.len().div_ceil(3) * 4);
    for ch in bytes.chunks(3) {
        let b = [ch[0], *ch.get(1).unwrap_or(&0), *ch.get(2).unwrap_or(&0)];
        let n = ((b[0] as u32) << 16) | ((b[1] as u32) << 8) | b[2] as u32;
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if ch.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if ch.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
}

/// Values of one data array.
enum Vals<'a> {
    F64(&'a [f64]),
    I64(&'a [i64]),
    U8(&'a [u8]),
}

impl Vals<'_> {
    fn type_name(&self) -> &'static str {
        match self {
            Vals::F64(_) => "Float64",
            Vals::I64(_) => "Int64",
            Vals::U8(_) => "UInt8",
        }
    }
    fn bytes(&self) -> Vec<u8> {
        match self {
            Vals::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Vals::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Vals::U8(v) => v.to_vec(),
        }
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn data_array(
    w: &mut dyn Write,
    name: &str,
    comps: usize,
    vals: Vals,
    enc: VtuEncoding,
) -> std::io::Result<()> {
    let fmt = match enc {
        VtuEncoding::Ascii => "ascii",
        VtuEncoding::Base64 => "binary",
    };
    let nc = if comps > 1 {
        format!(" NumberOfComponents=\"{comps}\"")
    } else {
        String::new()
    };
    let nm = if name.is_empty() {
        String::new()
    } else {
        format!(" Name=\"{}\"", xml_escape(name))
    };
    writeln!(
        w,
        "        <DataArray type=\"{}\"{nm}{nc} format=\"{fmt}\">",
        vals.type_name()
    )?;
    match enc {
        VtuEncoding::Base64 => {
            let body = vals.bytes();
            let mut all = Vec::with_capacity(8 + body.len());
            all.extend_from_slice(&(body.len() as u64).to_le_bytes());
            all.extend_from_slice(&body);
            let mut s = String::new();
            base64(&all, &mut s);
            writeln!(w, "          {s}")?;
        }
        VtuEncoding::Ascii => {
            let per_line = if comps > 1 { comps * 4 } else { 12 };
            let mut line = String::with_capacity(256);
            macro_rules! emit {
                ($v:expr, $f:expr) => {{
                    for (i, x) in $v.iter().enumerate() {
                        use std::fmt::Write as _;
                        if i % per_line == 0 {
                            if i > 0 {
                                writeln!(w, "{line}")?;
                            }
                            line.clear();
                            line.push_str("          ");
                        } else {
                            line.push(' ');
                        }
                        let _ = write!(line, "{}", $f(x));
                    }
                    if !$v.is_empty() {
                        writeln!(w, "{line}")?;
                    }
                }};
            }
            match vals {
                Vals::F64(v) => emit!(v, |x: &f64| fmt_f64(*x)),
                Vals::I64(v) => emit!(v, |x: &i64| *x),
                Vals::U8(v) => emit!(v, |x: &u8| *x),
            }
        }
    }
    writeln!(w, "        </DataArray>")
}

fn write_grid(
    path: &Path,
    points: &[Point],
    cells: &Cells,
    data: &[DataArray],
    enc: VtuEncoding,
) -> Result<(), MeshError> {
    let np = points.len();
    let nc = cells.types.len();
    for d in data {
        let n = match d.location {
            DataLocation::Point => np,
            DataLocation::Cell => nc,
        };
        if d.components == 0 || d.values.len() != n * d.components {
            return Err(MeshError::Unsupported(format!(
                "{}: data array `{}` has {} values, expected {} ({} {} x {} components)",
                path.display(),
                d.name,
                d.values.len(),
                n * d.components,
                n,
                if d.location == DataLocation::Point {
                    "points"
                } else {
                    "cells"
                },
                d.components
            )));
        }
    }
    let flat: Vec<f64> = points.iter().flatten().copied().collect();
    write_atomic(path, |w| {
        writeln!(w, "<?xml version=\"1.0\"?>")?;
        writeln!(
            w,
            "<VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">"
        )?;
        writeln!(w, "  <UnstructuredGrid>")?;
        writeln!(
            w,
            "    <Piece NumberOfPoints=\"{np}\" NumberOfCells=\"{nc}\">"
        )?;
        for (loc, tag) in [
            (DataLocation::Point, "PointData"),
            (DataLocation::Cell, "CellData"),
        ] {
            let arrays: Vec<&DataArray> = data.iter().filter(|d| d.location == loc).collect();
            if arrays.is_empty() {
                continue;
            }
            let first_scalar = arrays
                .iter()
                .find(|d| d.components == 1)
                .map(|d| d.name.as_str());
            let first_vector = arrays
                .iter()
                .find(|d| d.components == 3)
                .map(|d| d.name.as_str());
            let mut attrs = String::new();
            if let Some(s) = first_scalar {
                attrs.push_str(&format!(" Scalars=\"{}\"", xml_escape(s)));
            }
            if let Some(v) = first_vector {
                attrs.push_str(&format!(" Vectors=\"{}\"", xml_escape(v)));
            }
            writeln!(w, "      <{tag}{attrs}>")?;
            for d in arrays {
                data_array(w, &d.name, d.components, Vals::F64(&d.values), enc)?;
            }
            writeln!(w, "      </{tag}>")?;
        }
        writeln!(w, "      <Points>")?;
        data_array(w, "Points", 3, Vals::F64(&flat), enc)?;
        writeln!(w, "      </Points>")?;
        writeln!(w, "      <Cells>")?;
        data_array(w, "connectivity", 1, Vals::I64(&cells.connectivity), enc)?;
        data_array(w, "offsets", 1, Vals::I64(&cells.offsets), enc)?;
        data_array(w, "types", 1, Vals::U8(&cells.types), enc)?;
        if let Some((faces, faceoffsets)) = &cells.faces {
            data_array(w, "faces", 1, Vals::I64(faces), enc)?;
            data_array(w, "faceoffsets", 1, Vals::I64(faceoffsets), enc)?;
        }
        writeln!(w, "      </Cells>")?;
        writeln!(w, "    </Piece>")?;
        writeln!(w, "  </UnstructuredGrid>")?;
        writeln!(w, "</VTKFile>")?;
        Ok(())
    })
}
