//! VTK XML unstructured grids (`.vtu`), the format ParaView opens: written and read.
//!
//! **Cells.** Tetrahedra, hexahedra, prisms and pyramids are written as `VTK_TETRA` (10),
//! `VTK_HEXAHEDRON` (12), `VTK_WEDGE` (13) and `VTK_PYRAMID` (14) when a cell has that
//! combinatorial type; every other cell is a `VTK_POLYHEDRON` (42) with its outward face
//! loops in the `faces` / `faceoffsets` arrays (dissertation §3.3: general polyhedral
//! meshes). For `faces`, each polyhedron contributes `nfaces, (npts, ids...)...`;
//! `faceoffsets[c]` is the end of cell `c`'s stream in `faces`, or -1 for cells that are
//! not polyhedra. The reader also takes VTK 9.4's polyhedron arrays (`face_connectivity`,
//! `face_offsets`, `polyhedron_to_faces`, `polyhedron_offsets`), `VTK_VOXEL` (11), and the
//! quadratic, Lagrange and Bézier cells of the same shapes (types 24-27, 29, 31-33, 37,
//! 71-74, 78-81) by their corner points, which VTK lists first: the mesh read is linear
//! (as the MSH reader reads second-order elements), while [`read_vtu_grid`] keeps every
//! point and cell as stored.
//!
//! **Data.** [`DataArray`]s of points and cells (any number of components, optional
//! component names such as `XX`, `YY`, ...) and field data. Physical groups
//! ([`super::PhysicalGroup`]) travel as Gmsh and meshio store them: the volume cells carry
//! an `Int32` cell array `gmsh:physical` (0 = none), the members of lower-dimensional
//! groups (boundary faces, edges, vertices) are appended as `VTK_TRIANGLE`, `VTK_QUAD`,
//! `VTK_POLYGON`, `VTK_LINE` and `VTK_VERTEX` cells carrying their tag in the same array,
//! and every group's name is a field-data array `[tag, dim]` (meshio's `field_data`).
//!
//! **Encodings** ([`VtuEncoding`]): ASCII, base64 inside the XML (`format="binary"`), or
//! raw bytes in an `<AppendedData encoding="raw">` block, each optionally zlib-compressed
//! in 32 KiB blocks (`compressor="vtkZLibDataCompressor"`). The default is appended raw
//! with zlib, what ParaView writes. The reader takes all of them, `UInt32` and `UInt64`
//! headers, both byte orders, base64 appended data, and several `<Piece>`s. Header values
//! are checked against the data they describe before anything is allocated from them
//! (a block header cannot claim more than zlib's 1032:1 ratio allows). Gzip around the XML
//! (`.vtu.gz`) is not a VTK format and is not written; use the in-file compression.

use super::{fmt_f64, write_atomic, Build, Built, Collected, GroupElement};
use crate::{CellType, MeshError, Point, PolyMesh};
use rayon::prelude::*;
use std::io::Write;
use std::path::Path;
use tessera_sparse::tcsr::{col, decode};

/// Where a data array lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataLocation {
    Point,
    Cell,
    /// Field data (`<FieldData>`): any number of tuples, attached to the whole grid.
    Field,
}

/// The number type a data array is stored as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumType {
    Int8,
    UInt8,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    UInt64,
    Float32,
    Float64,
}

impl NumType {
    /// The VTK type name.
    pub fn name(self) -> &'static str {
        match self {
            NumType::Int8 => "Int8",
            NumType::UInt8 => "UInt8",
            NumType::Int16 => "Int16",
            NumType::UInt16 => "UInt16",
            NumType::Int32 => "Int32",
            NumType::UInt32 => "UInt32",
            NumType::Int64 => "Int64",
            NumType::UInt64 => "UInt64",
            NumType::Float32 => "Float32",
            NumType::Float64 => "Float64",
        }
    }
    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            NumType::Int8 | NumType::UInt8 => 1,
            NumType::Int16 | NumType::UInt16 => 2,
            NumType::Int32 | NumType::UInt32 | NumType::Float32 => 4,
            NumType::Int64 | NumType::UInt64 | NumType::Float64 => 8,
        }
    }
    fn parse(s: &str) -> Option<NumType> {
        Some(match s {
            "Int8" | "Char" => NumType::Int8,
            "UInt8" | "UnsignedChar" => NumType::UInt8,
            "Int16" | "Short" => NumType::Int16,
            "UInt16" | "UnsignedShort" => NumType::UInt16,
            "Int32" | "Int" => NumType::Int32,
            "UInt32" | "UnsignedInt" => NumType::UInt32,
            "Int64" | "IdType" | "Long" | "LongLong" => NumType::Int64,
            "UInt64" | "UnsignedLong" | "UnsignedLongLong" => NumType::UInt64,
            "Float32" | "Float" => NumType::Float32,
            "Float64" | "Double" => NumType::Float64,
            _ => return None,
        })
    }
    fn is_float(self) -> bool {
        matches!(self, NumType::Float32 | NumType::Float64)
    }
}

/// A named field with `components` values per point, cell or field tuple. Values are held
/// as `f64` (exact for every integer type up to 2^53); `ty` is the type written.
#[derive(Clone, Debug, PartialEq)]
pub struct DataArray {
    pub name: String,
    pub location: DataLocation,
    /// Components per tuple (1 scalar, 3 vector, 6 symmetric tensor, ...).
    pub components: usize,
    /// `components * count` values, tuple after tuple.
    pub values: Vec<f64>,
    /// The number type written (and read).
    pub ty: NumType,
    /// Names of the components (`X`, `Y`, `Z`; `XX`, `YY`, ...), empty when unnamed.
    pub component_names: Vec<String>,
}

impl DataArray {
    /// A `Float64` array.
    pub fn new(
        name: impl Into<String>,
        location: DataLocation,
        components: usize,
        values: Vec<f64>,
    ) -> Self {
        DataArray {
            name: name.into(),
            location,
            components,
            values,
            ty: NumType::Float64,
            component_names: Vec::new(),
        }
    }
    pub fn point_scalars(name: impl Into<String>, values: Vec<f64>) -> Self {
        Self::new(name, DataLocation::Point, 1, values)
    }
    pub fn point_vectors(name: impl Into<String>, values: &[[f64; 3]]) -> Self {
        Self::new(
            name,
            DataLocation::Point,
            3,
            values.iter().flatten().copied().collect(),
        )
        .with_component_names(&["X", "Y", "Z"])
    }
    pub fn cell_scalars(name: impl Into<String>, values: Vec<f64>) -> Self {
        Self::new(name, DataLocation::Cell, 1, values)
    }
    pub fn cell_vectors(name: impl Into<String>, values: &[[f64; 3]]) -> Self {
        Self::new(
            name,
            DataLocation::Cell,
            3,
            values.iter().flatten().copied().collect(),
        )
        .with_component_names(&["X", "Y", "Z"])
    }
    /// Symmetric tensors in VTK's order `XX, YY, ZZ, XY, YZ, XZ` (6 components, named).
    pub fn symmetric_tensors(
        name: impl Into<String>,
        location: DataLocation,
        values: &[[f64; 6]],
    ) -> Self {
        Self::new(
            name,
            location,
            6,
            values.iter().flatten().copied().collect(),
        )
        .with_component_names(&SYMMETRIC_TENSOR_COMPONENTS)
    }
    /// An `Int32` array.
    pub fn ints(name: impl Into<String>, location: DataLocation, values: &[i32]) -> Self {
        let mut a = Self::new(
            name,
            location,
            1,
            values.iter().map(|&v| v as f64).collect(),
        );
        a.ty = NumType::Int32;
        a
    }
    /// Name the components.
    pub fn with_component_names(mut self, names: &[&str]) -> Self {
        self.component_names = names.iter().map(|s| s.to_string()).collect();
        self
    }
    /// Write as this type.
    pub fn with_type(mut self, ty: NumType) -> Self {
        self.ty = ty;
        self
    }
    /// Number of tuples.
    pub fn len(&self) -> usize {
        self.values.len() / self.components.max(1)
    }
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
    /// Component `k` of every tuple.
    pub fn component(&self, k: usize) -> Vec<f64> {
        self.values
            .iter()
            .skip(k)
            .step_by(self.components.max(1))
            .copied()
            .collect()
    }
}

/// VTK's component order of symmetric tensors.
pub const SYMMETRIC_TENSOR_COMPONENTS: [&str; 6] = ["XX", "YY", "ZZ", "XY", "YZ", "XZ"];

/// How data arrays are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum VtuEncoding {
    /// Human-readable numbers (floats with round-trip precision).
    Ascii,
    /// Raw little-endian values in base64 inside the XML (`format="binary"`).
    Base64,
    /// Base64 inside the XML, zlib-compressed.
    Base64Zlib,
    /// Raw bytes in an appended block (`format="appended"`, `encoding="raw"`).
    Raw,
    /// Raw bytes in an appended block, zlib-compressed: what ParaView writes (the default).
    #[default]
    RawZlib,
}

impl VtuEncoding {
    fn compressed(self) -> bool {
        matches!(self, VtuEncoding::Base64Zlib | VtuEncoding::RawZlib)
    }
    fn appended(self) -> bool {
        matches!(self, VtuEncoding::Raw | VtuEncoding::RawZlib)
    }
}

/// VTK cell type numbers.
pub const VTK_VERTEX: u8 = 1;
pub const VTK_LINE: u8 = 3;
pub const VTK_TRIANGLE: u8 = 5;
pub const VTK_POLYGON: u8 = 7;
pub const VTK_QUAD: u8 = 9;
pub const VTK_TETRA: u8 = 10;
pub const VTK_VOXEL: u8 = 11;
pub const VTK_HEXAHEDRON: u8 = 12;
pub const VTK_WEDGE: u8 = 13;
pub const VTK_PYRAMID: u8 = 14;
pub const VTK_QUADRATIC_TETRA: u8 = 24;
pub const VTK_LAGRANGE_TETRAHEDRON: u8 = 71;
pub const VTK_POLYHEDRON: u8 = 42;

/// The volume cell shape of a VTK type whose first points are the corners in the linear
/// cell's order (linear, quadratic, Lagrange and Bézier cells), or `None`.
pub fn vtk_volume_shape(t: u8) -> Option<CellType> {
    Some(match t {
        VTK_TETRA | VTK_QUADRATIC_TETRA | VTK_LAGRANGE_TETRAHEDRON | 78 => CellType::Tetrahedron,
        VTK_HEXAHEDRON | VTK_VOXEL | 25 | 29 | 33 | 72 | 79 => CellType::Hexahedron,
        VTK_WEDGE | 26 | 31 | 32 | 73 | 80 => CellType::Prism,
        VTK_PYRAMID | 27 | 37 | 74 | 81 => CellType::Pyramid,
        _ => return None,
    })
}

/// A VTK unstructured grid as stored: points, cells in VTK's flat layout, and data arrays.
/// What [`read_vtu_grid`] returns and [`write_vtu_grid`] writes; queries on result files
/// work on it without converting to a [`PolyMesh`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VtuGrid {
    pub points: Vec<Point>,
    pub connectivity: Vec<i64>,
    /// End offset of every cell in `connectivity`.
    pub offsets: Vec<i64>,
    pub types: Vec<u8>,
    /// Legacy polyhedron streams `faces` / `faceoffsets` (see the module docs).
    pub faces: Option<(Vec<i64>, Vec<i64>)>,
    pub point_data: Vec<DataArray>,
    pub cell_data: Vec<DataArray>,
    pub field_data: Vec<DataArray>,
}

impl VtuGrid {
    pub fn num_points(&self) -> usize {
        self.points.len()
    }
    pub fn num_cells(&self) -> usize {
        self.types.len()
    }
    /// The point indices of cell `c`.
    pub fn cell(&self, c: usize) -> &[i64] {
        let a = if c == 0 {
            0
        } else {
            self.offsets[c - 1] as usize
        };
        &self.connectivity[a..self.offsets[c] as usize]
    }
    /// The face loops of polyhedron `c` from the legacy stream (`None` for other cells);
    /// an error names a malformed stream.
    pub fn face_loops(&self, c: usize) -> Result<Option<Vec<&[i64]>>, String> {
        let Some((faces, fo)) = &self.faces else {
            return Ok(None);
        };
        let end = fo[c];
        if end < 0 {
            return Ok(None);
        }
        let start = fo[..c]
            .iter()
            .rev()
            .find(|&&x| x >= 0)
            .copied()
            .unwrap_or(0);
        if end < start || end as u64 > faces.len() as u64 {
            return Err(format!(
                "faceoffsets of cell {c} are out of order or past the face stream"
            ));
        }
        let s = &faces[start as usize..end as usize];
        let bad = || format!("the face stream of polyhedron {c} is malformed");
        let nf = *s.first().ok_or_else(bad)?;
        if nf < 1 || nf as u64 > s.len() as u64 {
            return Err(bad());
        }
        let mut loops = Vec::with_capacity(nf as usize);
        let mut k = 1usize;
        for _ in 0..nf {
            let n = *s.get(k).ok_or_else(bad)?;
            if n < 3 || (k + 1 + n as usize) > s.len() {
                return Err(bad());
            }
            loops.push(&s[k + 1..k + 1 + n as usize]);
            k += 1 + n as usize;
        }
        if k != s.len() {
            return Err(bad());
        }
        Ok(Some(loops))
    }

    /// The data array with this name at this location.
    pub fn array(&self, location: DataLocation, name: &str) -> Option<&DataArray> {
        self.arrays(location).iter().find(|a| a.name == name)
    }
    /// The arrays at a location.
    pub fn arrays(&self, location: DataLocation) -> &[DataArray] {
        match location {
            DataLocation::Point => &self.point_data,
            DataLocation::Cell => &self.cell_data,
            DataLocation::Field => &self.field_data,
        }
    }
    /// Add or replace an array (by name and location).
    pub fn set_array(&mut self, a: DataArray) {
        let list = match a.location {
            DataLocation::Point => &mut self.point_data,
            DataLocation::Cell => &mut self.cell_data,
            DataLocation::Field => &mut self.field_data,
        };
        match list.iter_mut().find(|x| x.name == a.name) {
            Some(x) => *x = a,
            None => list.push(a),
        }
    }

    /// Check shapes and index ranges (what the writer needs and the reader guarantees).
    pub fn check(&self) -> Result<(), String> {
        let (np, nc) = (self.points.len(), self.types.len());
        if self.offsets.len() != nc {
            return Err(format!("{} offsets for {nc} cells", self.offsets.len()));
        }
        let mut prev = 0i64;
        for (c, &o) in self.offsets.iter().enumerate() {
            if o < prev || o as u64 > self.connectivity.len() as u64 {
                return Err(format!(
                    "offset {o} of cell {c} is out of order or past the {} connectivity entries",
                    self.connectivity.len()
                ));
            }
            prev = o;
        }
        if nc > 0 && prev as usize != self.connectivity.len() {
            return Err(format!(
                "the last offset is {prev}, but there are {} connectivity entries",
                self.connectivity.len()
            ));
        }
        if let Some(i) = self
            .connectivity
            .iter()
            .position(|&v| v < 0 || v as u64 >= np as u64)
        {
            return Err(format!(
                "connectivity entry {i} is point {}, but there are {np} points",
                self.connectivity[i]
            ));
        }
        if let Some((_, faceoffsets)) = &self.faces {
            if faceoffsets.len() != nc {
                return Err(format!("{} faceoffsets for {nc} cells", faceoffsets.len()));
            }
            for c in 0..nc {
                if let Some(l) = self.face_loops(c)? {
                    if self.types[c] != VTK_POLYHEDRON {
                        return Err(format!(
                            "cell {c} has faces but is not a polyhedron (type {})",
                            self.types[c]
                        ));
                    }
                    if let Some(&v) = l
                        .iter()
                        .flat_map(|f| f.iter())
                        .find(|&&v| v < 0 || v as u64 >= np as u64)
                    {
                        return Err(format!(
                            "a face of polyhedron {c} names point {v}, but there are {np} points"
                        ));
                    }
                } else if self.types[c] == VTK_POLYHEDRON {
                    return Err(format!("polyhedron {c} has no faces"));
                }
            }
        } else if let Some(c) = self.types.iter().position(|&t| t == VTK_POLYHEDRON) {
            return Err(format!(
                "cell {c} is a polyhedron, but the file has no face arrays"
            ));
        }
        for a in self.point_data.iter().chain(&self.cell_data) {
            let n = if a.location == DataLocation::Point {
                np
            } else {
                nc
            };
            if a.components == 0 || a.values.len() != n * a.components {
                return Err(format!(
                    "data array `{}` has {} values, expected {} ({} {} x {} components)",
                    a.name,
                    a.values.len(),
                    n * a.components,
                    n,
                    if a.location == DataLocation::Point {
                        "points"
                    } else {
                        "cells"
                    },
                    a.components
                ));
            }
        }
        Ok(())
    }
}

/// A field of a grid as the query language sees it (dissertation §6.3.4: identifiers such
/// as `DisplacementX`, `StressXX`, `VonMises`): a scalar array by its name, a component of
/// a multi-component array by the array name followed by the component name (VTK's
/// `ComponentName`s, else `X Y Z` for 3 and `XX YY ZZ XY YZ XZ` for 6 components, else the
/// index). Arrays whose names are not identifiers (`[A-Za-z_][A-Za-z0-9_]*`) are left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryField {
    pub name: String,
    pub location: DataLocation,
    /// Index into the grid's point or cell arrays.
    pub array: usize,
    /// The component (`None` for a scalar array).
    pub component: Option<usize>,
}

fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

impl VtuGrid {
    /// The query identifiers of the point and cell arrays (see [`QueryField`]).
    pub fn query_fields(&self) -> Vec<QueryField> {
        let mut out = Vec::new();
        for loc in [DataLocation::Point, DataLocation::Cell] {
            for (i, a) in self.arrays(loc).iter().enumerate() {
                if !is_identifier(&a.name) || a.name == GMSH_PHYSICAL {
                    continue;
                }
                if a.components == 1 {
                    out.push(QueryField {
                        name: a.name.clone(),
                        location: loc,
                        array: i,
                        component: None,
                    });
                    continue;
                }
                for k in 0..a.components {
                    let comp = match (a.component_names.get(k), a.components) {
                        (Some(n), _) if !n.is_empty() => n.clone(),
                        (_, 3) => ["X", "Y", "Z"][k].to_string(),
                        (_, 6) => SYMMETRIC_TENSOR_COMPONENTS[k].to_string(),
                        _ => format!("_{k}"),
                    };
                    let name = format!("{}{comp}", a.name);
                    if is_identifier(&name) {
                        out.push(QueryField {
                            name,
                            location: loc,
                            array: i,
                            component: Some(k),
                        });
                    }
                }
            }
        }
        out
    }

    /// The values of a query field.
    pub fn query_values(&self, f: &QueryField) -> Vec<f64> {
        let a = &self.arrays(f.location)[f.array];
        match f.component {
            None => a.values.clone(),
            Some(k) => a.component(k),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Writing

/// Cells of a [`PolyMesh`] in VTK's flat layout.
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
                let (vt, n) = match ty {
                    CellType::Tetrahedron => (VTK_TETRA, 4),
                    CellType::Hexahedron => (VTK_HEXAHEDRON, 8),
                    // VTK's wedge has Gmsh's vertex order: its parametric coordinates put
                    // triangle 0,1,2 at z = 0 with its right-hand normal toward 3,4,5
                    // (vtkWedge.cxx; the "points outward" sentence of its header disagrees
                    // with its own parametric coordinates)
                    CellType::Prism => (VTK_WEDGE, 6),
                    CellType::Pyramid => (VTK_PYRAMID, 5),
                    CellType::Polyhedron => unreachable!("typed cells are standard"),
                };
                connectivity.extend(buf[..n].iter().map(|&v| v as i64));
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

/// The grid of a volume mesh with its physical groups (see the module docs) and data.
pub fn mesh_grid(
    mesh: &PolyMesh,
    groups: &[super::PhysicalGroup],
    data: &[DataArray],
) -> Result<VtuGrid, MeshError> {
    let cells = volume_cells(mesh);
    let mut g = VtuGrid {
        points: mesh.positions().to_vec(),
        connectivity: cells.connectivity,
        offsets: cells.offsets,
        types: cells.types,
        faces: cells.faces,
        ..Default::default()
    };
    let nvol = g.types.len();
    for d in data {
        let n = match d.location {
            DataLocation::Point => g.points.len(),
            DataLocation::Cell => nvol,
            DataLocation::Field => d.len(),
        };
        if d.components == 0 || d.values.len() != n * d.components {
            return Err(MeshError::Unsupported(format!(
                "data array `{}` has {} values, expected {} ({} {} x {} components)",
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
    let mut physical: Vec<i32> = Vec::new();
    if !groups.is_empty() {
        physical = vec![0; nvol];
        let fv = mesh.face_vertices();
        for gr in groups {
            match gr.dim {
                3 => {
                    for &c in &gr.entities {
                        let slot = physical.get_mut(c as usize).ok_or_else(|| {
                            MeshError::Unsupported(format!(
                                "group ({}, {}) names cell {c}, but the mesh has {nvol} cells",
                                gr.dim, gr.tag
                            ))
                        })?;
                        // a cell in several volume groups keeps the first (lowest tag)
                        if *slot == 0 {
                            *slot = gr.tag;
                        }
                    }
                }
                d => {
                    for &e in &gr.entities {
                        let verts: Vec<i64> = match d {
                            2 => fv.row(e as usize).iter().map(|&v| col(v) as i64).collect(),
                            1 => mesh.edge_vertices()[e as usize]
                                .iter()
                                .map(|&v| v as i64)
                                .collect(),
                            _ => vec![e as i64],
                        };
                        let t = match (d, verts.len()) {
                            (2, 3) => VTK_TRIANGLE,
                            (2, 4) => VTK_QUAD,
                            (2, _) => VTK_POLYGON,
                            (1, _) => VTK_LINE,
                            _ => VTK_VERTEX,
                        };
                        g.connectivity.extend_from_slice(&verts);
                        g.offsets.push(g.connectivity.len() as i64);
                        g.types.push(t);
                        if let Some((_, fo)) = &mut g.faces {
                            fo.push(-1);
                        }
                        physical.push(gr.tag);
                    }
                }
            }
        }
    }
    let extra = g.types.len() - nvol;
    for d in data {
        let mut d = d.clone();
        match d.location {
            DataLocation::Point => g.point_data.push(d),
            DataLocation::Cell => {
                // group cells get 0 in the volume cells' arrays
                d.values
                    .extend(std::iter::repeat_n(0.0, extra * d.components));
                g.cell_data.push(d)
            }
            DataLocation::Field => g.field_data.push(d),
        }
    }
    if !groups.is_empty() {
        g.cell_data.push(DataArray::ints(
            GMSH_PHYSICAL,
            DataLocation::Cell,
            &physical,
        ));
        for gr in groups {
            let name = if gr.name.is_empty() {
                format!("group_{}_{}", gr.dim, gr.tag)
            } else {
                gr.name.clone()
            };
            let mut a = DataArray::ints(name, DataLocation::Field, &[gr.tag, gr.dim as i32]);
            a.components = 2;
            g.field_data.push(a);
        }
    }
    Ok(g)
}

/// The cell array holding physical tags (Gmsh's and meshio's name).
pub const GMSH_PHYSICAL: &str = "gmsh:physical";

/// Write `mesh` with data arrays as a `.vtu` (appended raw, zlib-compressed).
pub fn write_vtu(path: &Path, mesh: &PolyMesh, data: &[DataArray]) -> Result<(), MeshError> {
    write_vtu_with(path, mesh, data, VtuEncoding::default())
}

/// Write `mesh` with data arrays as a `.vtu` in the given encoding.
pub fn write_vtu_with(
    path: &Path,
    mesh: &PolyMesh,
    data: &[DataArray],
    enc: VtuEncoding,
) -> Result<(), MeshError> {
    write_vtu_groups(path, mesh, &[], data, enc)
}

/// Write `mesh` with its physical groups and data arrays as a `.vtu`.
pub fn write_vtu_groups(
    path: &Path,
    mesh: &PolyMesh,
    groups: &[super::PhysicalGroup],
    data: &[DataArray],
    enc: VtuEncoding,
) -> Result<(), MeshError> {
    let g = mesh_grid(mesh, groups, data).map_err(|e| match e {
        MeshError::Unsupported(m) => MeshError::Unsupported(format!("{}: {m}", path.display())),
        e => e,
    })?;
    write_vtu_grid(path, &g, enc)
}

/// Write a polygon surface (such as a boundary from `Boundary::surface`) as a `.vtu`:
/// triangles as `VTK_TRIANGLE`, quads as `VTK_QUAD`, other polygons as `VTK_POLYGON`.
pub fn write_vtu_polygons(
    path: &Path,
    positions: &[Point],
    polygon_offsets: &[u32],
    polygon_vertices: &[u32],
    data: &[DataArray],
    enc: VtuEncoding,
) -> Result<(), MeshError> {
    check_polygons(path, positions.len(), polygon_offsets, polygon_vertices)?;
    let np = polygon_offsets.len().saturating_sub(1);
    let mut g = VtuGrid {
        points: positions.to_vec(),
        connectivity: polygon_vertices.iter().map(|&v| v as i64).collect(),
        offsets: Vec::with_capacity(np),
        types: Vec::with_capacity(np),
        ..Default::default()
    };
    for w in polygon_offsets.windows(2) {
        g.offsets.push(w[1] as i64);
        g.types.push(match w[1] - w[0] {
            3 => VTK_TRIANGLE,
            4 => VTK_QUAD,
            _ => VTK_POLYGON,
        });
    }
    for d in data {
        g.set_array(d.clone());
    }
    write_vtu_grid(path, &g, enc)
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

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64(bytes: &[u8], out: &mut String) {
    out.reserve(bytes.len().div_ceil(3) * 4);
    for ch in bytes.chunks(3) {
        let b = [ch[0], *ch.get(1).unwrap_or(&0), *ch.get(2).unwrap_or(&0)];
        let n = ((b[0] as u32) << 16) | ((b[1] as u32) << 8) | b[2] as u32;
        out.push(B64[(n >> 18) as usize & 63] as char);
        out.push(B64[(n >> 12) as usize & 63] as char);
        out.push(if ch.len() > 1 {
            B64[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if ch.len() > 2 {
            B64[n as usize & 63] as char
        } else {
            '='
        });
    }
}

/// Values of one array to write.
enum Vals<'a> {
    F64(&'a [f64], NumType),
    I64(&'a [i64]),
    U8(&'a [u8]),
}

impl Vals<'_> {
    fn ty(&self) -> NumType {
        match self {
            Vals::F64(_, t) => *t,
            Vals::I64(_) => NumType::Int64,
            Vals::U8(_) => NumType::UInt8,
        }
    }
    fn len(&self) -> usize {
        match self {
            Vals::F64(v, _) => v.len(),
            Vals::I64(v) => v.len(),
            Vals::U8(v) => v.len(),
        }
    }
    /// Little-endian bytes in the array's type.
    fn bytes(&self) -> Vec<u8> {
        let ty = self.ty();
        let mut out = Vec::with_capacity(self.len() * ty.size());
        match self {
            Vals::I64(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Vals::U8(v) => out.extend_from_slice(v),
            Vals::F64(v, t) => {
                for &x in v.iter() {
                    match t {
                        NumType::Float64 => out.extend_from_slice(&x.to_le_bytes()),
                        NumType::Float32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
                        NumType::Int8 => out.push(x as i8 as u8),
                        NumType::UInt8 => out.push(x as u8),
                        NumType::Int16 => out.extend_from_slice(&(x as i16).to_le_bytes()),
                        NumType::UInt16 => out.extend_from_slice(&(x as u16).to_le_bytes()),
                        NumType::Int32 => out.extend_from_slice(&(x as i32).to_le_bytes()),
                        NumType::UInt32 => out.extend_from_slice(&(x as u32).to_le_bytes()),
                        NumType::Int64 => out.extend_from_slice(&(x as i64).to_le_bytes()),
                        NumType::UInt64 => out.extend_from_slice(&(x as u64).to_le_bytes()),
                    }
                }
            }
        }
        out
    }
}

/// Uncompressed bytes per zlib block (VTK's default).
const BLOCK: usize = 1 << 15;

/// The payload of one array as VTK stores it: `UInt64` length header + bytes, or the zlib
/// block header + compressed blocks. Returns (header, body) (kept apart because inline
/// compressed data base64-encodes them separately).
fn encode_payload(raw: &[u8], compress: bool) -> (Vec<u8>, Vec<u8>) {
    if !compress {
        return ((raw.len() as u64).to_le_bytes().to_vec(), raw.to_vec());
    }
    let blocks: Vec<Vec<u8>> = raw
        .par_chunks(BLOCK)
        .with_min_len(4)
        .map(|b| {
            let mut e = flate2::write::ZlibEncoder::new(
                Vec::with_capacity(b.len() / 2),
                flate2::Compression::new(5),
            );
            e.write_all(b).expect("write to a Vec");
            e.finish().expect("finish to a Vec")
        })
        .collect();
    let nb = blocks.len() as u64;
    let last = (raw.len() % BLOCK) as u64;
    let mut head = Vec::with_capacity(8 * (3 + blocks.len()));
    head.extend_from_slice(&nb.to_le_bytes());
    head.extend_from_slice(&(BLOCK as u64).to_le_bytes());
    head.extend_from_slice(&last.to_le_bytes());
    for b in &blocks {
        head.extend_from_slice(&(b.len() as u64).to_le_bytes());
    }
    let body: Vec<u8> = blocks.concat();
    (head, body)
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes the arrays of one file, inline or into the appended block.
struct ArrayWriter {
    enc: VtuEncoding,
    appended: Vec<u8>,
}

impl ArrayWriter {
    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        w: &mut dyn Write,
        indent: &str,
        name: &str,
        comps: usize,
        names: &[String],
        tuples: Option<usize>,
        vals: Vals,
    ) -> std::io::Result<()> {
        let fmt = match self.enc {
            VtuEncoding::Ascii => "ascii",
            VtuEncoding::Base64 | VtuEncoding::Base64Zlib => "binary",
            VtuEncoding::Raw | VtuEncoding::RawZlib => "appended",
        };
        let mut attrs = format!("type=\"{}\"", vals.ty().name());
        if !name.is_empty() {
            attrs.push_str(&format!(" Name=\"{}\"", xml_escape(name)));
        }
        if comps > 1 {
            attrs.push_str(&format!(" NumberOfComponents=\"{comps}\""));
        }
        if names.len() == comps {
            for (i, n) in names.iter().enumerate() {
                attrs.push_str(&format!(" ComponentName{i}=\"{}\"", xml_escape(n)));
            }
        }
        if let Some(t) = tuples {
            attrs.push_str(&format!(" NumberOfTuples=\"{t}\""));
        }
        attrs.push_str(&format!(" format=\"{fmt}\""));
        match self.enc {
            VtuEncoding::Raw | VtuEncoding::RawZlib => {
                let (head, body) = encode_payload(&vals.bytes(), self.enc.compressed());
                writeln!(
                    w,
                    "{indent}<DataArray {attrs} offset=\"{}\"/>",
                    self.appended.len()
                )?;
                self.appended.extend_from_slice(&head);
                self.appended.extend_from_slice(&body);
                Ok(())
            }
            VtuEncoding::Base64 | VtuEncoding::Base64Zlib => {
                writeln!(w, "{indent}<DataArray {attrs}>")?;
                let (head, body) = encode_payload(&vals.bytes(), self.enc.compressed());
                let mut s = String::new();
                if self.enc.compressed() {
                    base64(&head, &mut s);
                    base64(&body, &mut s);
                } else {
                    let mut all = head;
                    all.extend_from_slice(&body);
                    base64(&all, &mut s);
                }
                writeln!(w, "{indent}  {s}")?;
                writeln!(w, "{indent}</DataArray>")
            }
            VtuEncoding::Ascii => {
                writeln!(w, "{indent}<DataArray {attrs}>")?;
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
                                line.push_str(indent);
                                line.push_str("  ");
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
                    Vals::F64(v, t) if t.is_float() => {
                        emit!(v, |x: &f64| if t == NumType::Float32 {
                            format!("{}", *x as f32)
                        } else {
                            fmt_f64(*x)
                        })
                    }
                    Vals::F64(v, _) => emit!(v, |x: &f64| *x as i64),
                    Vals::I64(v) => emit!(v, |x: &i64| *x),
                    Vals::U8(v) => emit!(v, |x: &u8| *x),
                }
                writeln!(w, "{indent}</DataArray>")
            }
        }
    }
}

/// Write a grid as a `.vtu` (atomically). Floats that do not fit the array's type are the
/// writer's caller's business; integer arrays are written by truncation.
pub fn write_vtu_grid(path: &Path, g: &VtuGrid, enc: VtuEncoding) -> Result<(), MeshError> {
    let staged = stage_vtu_grid(path, g, enc, None)?;
    Ok(tessera_core::atomic::publish(vec![staged])?)
}

/// [`write_vtu_grid`] into a temporary file that waits for
/// [`tessera_core::atomic::publish`] (outputs of several files); `note` is written as an
/// XML comment after the header.
pub fn stage_vtu_grid(
    path: &Path,
    g: &VtuGrid,
    enc: VtuEncoding,
    note: Option<&str>,
) -> Result<tessera_core::atomic::Staged, MeshError> {
    if path.to_string_lossy().to_ascii_lowercase().ends_with(".gz") {
        return Err(MeshError::Unsupported(format!(
            "{}: gzip around a .vtu is not a VTK format (VTK, meshio and ParaView cannot open it); write a .vtu, which is zlib-compressed inside by default",
            path.display()
        )));
    }
    g.check()
        .map_err(|m| MeshError::Unsupported(format!("{}: {m}", path.display())))?;
    let flat: Vec<f64> = g.points.iter().flatten().copied().collect();
    let note = note.map(|n| n.replace("--", "- -"));
    super::stage(path, |w| {
        let mut aw = ArrayWriter {
            enc,
            appended: Vec::new(),
        };
        writeln!(w, "<?xml version=\"1.0\"?>")?;
        if let Some(n) = &note {
            writeln!(w, "<!-- {n} -->")?;
        }
        let comp = if enc.compressed() {
            " compressor=\"vtkZLibDataCompressor\""
        } else {
            ""
        };
        writeln!(
            w,
            "<VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\"{comp}>"
        )?;
        writeln!(w, "  <UnstructuredGrid>")?;
        if !g.field_data.is_empty() {
            writeln!(w, "    <FieldData>")?;
            for d in &g.field_data {
                aw.write(
                    w,
                    "      ",
                    &d.name,
                    d.components,
                    &d.component_names,
                    Some(d.len()),
                    Vals::F64(&d.values, d.ty),
                )?;
            }
            writeln!(w, "    </FieldData>")?;
        }
        writeln!(
            w,
            "    <Piece NumberOfPoints=\"{}\" NumberOfCells=\"{}\">",
            g.points.len(),
            g.types.len()
        )?;
        for (arrays, tag) in [(&g.point_data, "PointData"), (&g.cell_data, "CellData")] {
            if arrays.is_empty() {
                continue;
            }
            let first = |n: usize| {
                arrays
                    .iter()
                    .find(|d| d.components == n && d.ty.is_float())
                    .map(|d| d.name.as_str())
            };
            let mut attrs = String::new();
            if let Some(s) = first(1) {
                attrs.push_str(&format!(" Scalars=\"{}\"", xml_escape(s)));
            }
            if let Some(v) = first(3) {
                attrs.push_str(&format!(" Vectors=\"{}\"", xml_escape(v)));
            }
            writeln!(w, "      <{tag}{attrs}>")?;
            for d in arrays {
                aw.write(
                    w,
                    "        ",
                    &d.name,
                    d.components,
                    &d.component_names,
                    None,
                    Vals::F64(&d.values, d.ty),
                )?;
            }
            writeln!(w, "      </{tag}>")?;
        }
        writeln!(w, "      <Points>")?;
        aw.write(
            w,
            "        ",
            "Points",
            3,
            &[],
            None,
            Vals::F64(&flat, NumType::Float64),
        )?;
        writeln!(w, "      </Points>")?;
        writeln!(w, "      <Cells>")?;
        let ind = "        ";
        aw.write(
            w,
            ind,
            "connectivity",
            1,
            &[],
            None,
            Vals::I64(&g.connectivity),
        )?;
        aw.write(w, ind, "offsets", 1, &[], None, Vals::I64(&g.offsets))?;
        aw.write(w, ind, "types", 1, &[], None, Vals::U8(&g.types))?;
        if let Some((faces, faceoffsets)) = &g.faces {
            aw.write(w, ind, "faces", 1, &[], None, Vals::I64(faces))?;
            aw.write(w, ind, "faceoffsets", 1, &[], None, Vals::I64(faceoffsets))?;
        }
        writeln!(w, "      </Cells>")?;
        writeln!(w, "    </Piece>")?;
        writeln!(w, "  </UnstructuredGrid>")?;
        if enc.appended() {
            writeln!(w, "  <AppendedData encoding=\"raw\">")?;
            write!(w, "   _")?;
            w.write_all(&aw.appended)?;
            writeln!(w)?;
            writeln!(w, "  </AppendedData>")?;
        }
        writeln!(w, "</VTKFile>")?;
        Ok(())
    })
}

/// Write a `.pvd` collection (ParaView's time series) listing `(time, file)` pairs; file
/// names are written relative to the `.pvd`'s folder when they are inside it.
pub fn write_pvd(path: &Path, steps: &[(f64, &Path)]) -> Result<(), MeshError> {
    let dir = path.parent().unwrap_or(Path::new(""));
    write_atomic(path, |w| {
        writeln!(w, "<?xml version=\"1.0\"?>")?;
        writeln!(
            w,
            "<VTKFile type=\"Collection\" version=\"0.1\" byte_order=\"LittleEndian\">"
        )?;
        writeln!(w, "  <Collection>")?;
        for (t, f) in steps {
            let rel = f.strip_prefix(dir).unwrap_or(f);
            writeln!(
                w,
                "    <DataSet timestep=\"{}\" group=\"\" part=\"0\" file=\"{}\"/>",
                fmt_f64(*t),
                xml_escape(&rel.to_string_lossy())
            )?;
        }
        writeln!(w, "  </Collection>")?;
        writeln!(w, "</VTKFile>")?;
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------
// Reading

/// An array as declared in the XML, with its data inline or in the appended block.
struct Declared {
    section: Section,
    name: String,
    ty: NumType,
    components: usize,
    component_names: Vec<String>,
    /// `ascii`, `binary` or `appended`
    format: Format,
    offset: u64,
    /// inline text (ascii or base64)
    text: Vec<u8>,
    /// byte offset of the element (for messages)
    at: usize,
    piece: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Section {
    Field,
    PointData,
    CellData,
    Points,
    Cells,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Ascii,
    Binary,
    Appended,
}

/// File-level settings.
struct Header {
    big_endian: bool,
    /// header integers are UInt64 (else UInt32)
    header64: bool,
    compressed: bool,
}

/// Where the appended data starts and how it is encoded.
struct Appended {
    start: usize,
    base64: bool,
}

fn line_of(bytes: &[u8], at: usize) -> usize {
    1 + memchr::memchr_iter(b'\n', &bytes[..at.min(bytes.len())]).count()
}

/// Read a `.vtu` file as stored (every point, cell and array; see the module docs).
pub fn read_vtu_grid(path: &Path) -> Result<VtuGrid, MeshError> {
    // a regular file within the memory budget (tessera_core::input)
    let bytes = tessera_core::input::read_file(path)?;
    parse_vtu(path, &bytes)
}

/// Parse the bytes of a `.vtu` file.
pub fn parse_vtu(path: &Path, bytes: &[u8]) -> Result<VtuGrid, MeshError> {
    use quick_xml::events::{BytesStart, Event};
    let err_at = |at: usize, msg: String| MeshError::parse_line(path, line_of(bytes, at), msg);
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(MeshError::Parse {
            path: path.to_path_buf(),
            location: "byte 0".into(),
            msg: "this is gzip around a .vtu, which is not a VTK format; gunzip it first (Tessera writes .vtu files compressed inside)".into(),
        });
    }
    let mut reader = quick_xml::Reader::from_reader(bytes);
    reader.config_mut().trim_text(false);
    let mut stack: Vec<Vec<u8>> = Vec::new();
    let mut header: Option<Header> = None;
    let mut pieces: Vec<(usize, usize)> = Vec::new();
    let mut declared: Vec<Declared> = Vec::new();
    let mut current: Option<Declared> = None;
    let mut appended: Option<Appended> = None;
    let mut saw_grid = false;

    let attr = |e: &BytesStart, key: &[u8]| -> Option<String> {
        e.attributes()
            .filter_map(|a| a.ok())
            .find(|a| a.key.as_ref() == key)
            .map(|a| String::from_utf8_lossy(&a.value).into_owned())
    };

    loop {
        let pos = reader.buffer_position() as usize;
        let ev = reader.read_event().map_err(|e| {
            err_at(
                reader.error_position() as usize,
                format!("malformed XML: {e}"),
            )
        })?;
        let (e, empty) = match &ev {
            Event::Start(e) => (Some(e.clone()), false),
            Event::Empty(e) => (Some(e.clone()), true),
            _ => (None, false),
        };
        if let Some(e) = e {
            let name = e.name().as_ref().to_vec();
            match name.as_slice() {
                b"VTKFile" => {
                    let ty = attr(&e, b"type").unwrap_or_default();
                    if ty != "UnstructuredGrid" {
                        return Err(err_at(
                            pos,
                            format!("a VTKFile of type \"{ty}\"; Tessera reads unstructured grids (.vtu, type \"UnstructuredGrid\")"),
                        ));
                    }
                    let bo = attr(&e, b"byte_order").unwrap_or_else(|| "LittleEndian".into());
                    let ht = attr(&e, b"header_type").unwrap_or_else(|| "UInt32".into());
                    let comp = attr(&e, b"compressor").unwrap_or_default();
                    if !comp.is_empty() && comp != "vtkZLibDataCompressor" {
                        return Err(err_at(
                            pos,
                            format!("compressor \"{comp}\" is not supported (only vtkZLibDataCompressor)"),
                        ));
                    }
                    if ht != "UInt32" && ht != "UInt64" {
                        return Err(err_at(
                            pos,
                            format!("header_type \"{ht}\" is not UInt32 or UInt64"),
                        ));
                    }
                    header = Some(Header {
                        big_endian: bo == "BigEndian",
                        header64: ht == "UInt64",
                        compressed: !comp.is_empty(),
                    });
                }
                b"UnstructuredGrid" => saw_grid = true,
                b"Piece" => {
                    let num = |k: &[u8]| -> Result<usize, MeshError> {
                        let v = attr(&e, k).ok_or_else(|| {
                            err_at(
                                pos,
                                format!("<Piece> without {}", String::from_utf8_lossy(k)),
                            )
                        })?;
                        v.trim()
                            .parse::<usize>()
                            .ok()
                            .filter(|&n| n <= u32::MAX as usize)
                            .ok_or_else(|| {
                                err_at(
                                    pos,
                                    format!(
                                        "{}=\"{v}\" is not a count below 2^32 (Tessera's 32-bit indices)",
                                        String::from_utf8_lossy(k)
                                    ),
                                )
                            })
                    };
                    pieces.push((num(b"NumberOfPoints")?, num(b"NumberOfCells")?));
                }
                b"AppendedData" => {
                    let enc = attr(&e, b"encoding").unwrap_or_else(|| "raw".into());
                    let after = reader.buffer_position() as usize;
                    let us = memchr::memchr(b'_', &bytes[after.min(bytes.len())..]).ok_or_else(
                        || {
                            err_at(
                                after,
                                "<AppendedData> without the '_' that starts its data".into(),
                            )
                        },
                    )?;
                    appended = Some(Appended {
                        start: after + us + 1,
                        base64: enc == "base64",
                    });
                    if enc != "raw" && enc != "base64" {
                        return Err(err_at(
                            pos,
                            format!("AppendedData encoding \"{enc}\" is not raw or base64"),
                        ));
                    }
                    // The data runs to `</AppendedData>` and the file's end tag. A file cut
                    // after the '_' may still hold every array the offsets point to, so only
                    // the missing end tags show that it was truncated.
                    let closed = bytes
                        .trim_ascii_end()
                        .strip_suffix(b"</VTKFile>".as_slice())
                        .is_some_and(|t| t.trim_ascii_end().ends_with(b"</AppendedData>"));
                    if !closed {
                        return Err(err_at(
                            bytes.len(),
                            "the file ends inside <AppendedData> (no </AppendedData> and \
                             </VTKFile> after the data): it is truncated"
                                .into(),
                        ));
                    }
                    break; // what follows is data, not XML
                }
                b"DataArray" => {
                    let section = match stack.last().map(|s| s.as_slice()) {
                        Some(b"FieldData") => Section::Field,
                        Some(b"PointData") => Section::PointData,
                        Some(b"CellData") => Section::CellData,
                        Some(b"Points") => Section::Points,
                        Some(b"Cells") => Section::Cells,
                        _ => Section::Other,
                    };
                    let tyname = attr(&e, b"type").unwrap_or_default();
                    let ty = NumType::parse(&tyname).ok_or_else(|| {
                        err_at(
                            pos,
                            format!("DataArray type \"{tyname}\" is not a VTK number type"),
                        )
                    })?;
                    let components = match attr(&e, b"NumberOfComponents") {
                        Some(s) => s
                            .trim()
                            .parse::<usize>()
                            .ok()
                            .filter(|&n| (1..=1024).contains(&n))
                            .ok_or_else(|| {
                                err_at(
                                    pos,
                                    format!("NumberOfComponents=\"{s}\" is not in 1..=1024"),
                                )
                            })?,
                        None => 1,
                    };
                    let component_names: Vec<String> = (0..components)
                        .map_while(|i| attr(&e, format!("ComponentName{i}").as_bytes()))
                        .collect();
                    let format = match attr(&e, b"format").as_deref() {
                        Some("ascii") => Format::Ascii,
                        Some("binary") => Format::Binary,
                        Some("appended") => Format::Appended,
                        other => {
                            return Err(err_at(
                                pos,
                                format!(
                                    "DataArray format {other:?} is not ascii, binary or appended"
                                ),
                            ))
                        }
                    };
                    let offset = match (format, attr(&e, b"offset")) {
                        (Format::Appended, Some(o)) => o.trim().parse().map_err(|_| {
                            err_at(pos, format!("offset=\"{o}\" is not a byte offset"))
                        })?,
                        (Format::Appended, None) => {
                            return Err(err_at(pos, "an appended DataArray without offset".into()))
                        }
                        _ => 0,
                    };
                    let d = Declared {
                        section,
                        name: attr(&e, b"Name").unwrap_or_default(),
                        ty,
                        components,
                        component_names,
                        format,
                        offset,
                        text: Vec::new(),
                        at: pos,
                        piece: pieces.len().saturating_sub(1),
                    };
                    if empty {
                        declared.push(d);
                    } else {
                        current = Some(d);
                    }
                }
                _ => {}
            }
            if !empty {
                stack.push(name);
            }
            continue;
        }
        match ev {
            Event::Text(t) => {
                if let (Some(d), Some(b"DataArray")) =
                    (current.as_mut(), stack.last().map(|s| s.as_slice()))
                {
                    d.text.extend_from_slice(t.as_ref());
                }
            }
            Event::CData(t) => {
                if let Some(d) = current.as_mut() {
                    d.text.extend_from_slice(t.as_ref());
                }
            }
            Event::End(e) => {
                if e.name().as_ref() == b"DataArray" {
                    if let Some(d) = current.take() {
                        declared.push(d);
                    }
                }
                stack.pop();
            }
            Event::Eof => {
                if let Some(open) = stack.last() {
                    return Err(err_at(
                        bytes.len(),
                        format!(
                            "the file ends inside <{}>: it is truncated",
                            tessera_core::error::clip(&String::from_utf8_lossy(open), 80)
                        ),
                    ));
                }
                break;
            }
            _ => {}
        }
    }
    let header =
        header.ok_or_else(|| err_at(0, "no <VTKFile> element: not a VTK XML file".into()))?;
    if !saw_grid || pieces.is_empty() {
        return Err(err_at(
            0,
            "no <UnstructuredGrid><Piece>: not an unstructured grid".into(),
        ));
    }
    let dec = Decoder {
        path,
        bytes,
        header: &header,
        appended: appended.as_ref(),
    };
    let mut grid = VtuGrid::default();
    // one piece after another; point indices of later pieces are shifted
    let mut poly_new: Vec<Option<(Vec<i64>, Vec<i64>)>> = Vec::new();
    for (pi, &(np, nc)) in pieces.iter().enumerate() {
        let base = grid.points.len() as i64;
        let in_piece = |s: Section| {
            declared
                .iter()
                .filter(move |d| d.piece == pi && d.section == s)
        };
        let find_cells = |name: &str| in_piece(Section::Cells).find(|d| d.name == name);
        // points
        let pts = in_piece(Section::Points).next();
        match pts {
            Some(d) => {
                if d.components != 3 {
                    return Err(err_at(
                        d.at,
                        format!("Points have {} components, expected 3", d.components),
                    ));
                }
                let v = dec.floats(d, np * 3)?;
                grid.points
                    .extend(v.chunks_exact(3).map(|c| [c[0], c[1], c[2]]));
            }
            None if np == 0 => {}
            None => {
                return Err(err_at(
                    0,
                    format!("piece {pi} has {np} points but no <Points> array"),
                ))
            }
        }
        // cells
        let need = |name: &str| {
            find_cells(name)
                .ok_or_else(|| err_at(0, format!("piece {pi}: <Cells> has no \"{name}\" array")))
        };
        if nc > 0 {
            let offsets = dec.ints(need("offsets")?, Some(nc))?;
            let types = dec.ints(need("types")?, Some(nc))?;
            let conn_len = offsets.last().copied().unwrap_or(0);
            if conn_len < 0 {
                return Err(err_at(need("offsets")?.at, "negative cell offsets".into()));
            }
            let conn = dec.ints(need("connectivity")?, Some(conn_len as usize))?;
            let coff = grid.connectivity.len() as i64;
            for (c, &t) in types.iter().enumerate() {
                if !(0..=255).contains(&t) {
                    return Err(err_at(
                        need("types")?.at,
                        format!("cell {c}: type {t} is not a VTK cell type"),
                    ));
                }
            }
            grid.connectivity.extend(conn.iter().map(|&v| v + base));
            grid.offsets.extend(offsets.iter().map(|&o| o + coff));
            grid.types.extend(types.iter().map(|&t| t as u8));
            // polyhedra, legacy or VTK 9.4 layout
            let legacy = match (find_cells("faces"), find_cells("faceoffsets")) {
                (Some(f), Some(fo)) => Some((dec.ints(f, None)?, dec.ints(fo, Some(nc))?)),
                _ => None,
            };
            let modern = match (
                find_cells("face_connectivity"),
                find_cells("face_offsets"),
                find_cells("polyhedron_to_faces"),
                find_cells("polyhedron_offsets"),
            ) {
                (Some(a), Some(b), Some(c), Some(d)) => Some(
                    modern_to_legacy(
                        &dec.ints(a, None)?,
                        &dec.ints(b, None)?,
                        &dec.ints(c, None)?,
                        &dec.ints(d, None)?,
                        nc,
                    )
                    .map_err(|m| err_at(c.at, m))?,
                ),
                _ => None,
            };
            poly_new.push(
                legacy
                    .or(modern)
                    .map(|(f, fo)| shift_stream(&f, &fo, base))
                    .transpose()
                    .map_err(|m| err_at(0, format!("piece {pi}: {m}")))?,
            );
        } else {
            poly_new.push(None);
        }
        // data
        for (s, loc, n) in [
            (Section::PointData, DataLocation::Point, np),
            (Section::CellData, DataLocation::Cell, nc),
        ] {
            for d in in_piece(s) {
                let v = dec.floats(d, n * d.components)?;
                let list = if loc == DataLocation::Point {
                    &mut grid.point_data
                } else {
                    &mut grid.cell_data
                };
                match list
                    .iter_mut()
                    .find(|a| a.name == d.name && a.components == d.components)
                {
                    Some(a) if pi > 0 => a.values.extend_from_slice(&v),
                    _ => list.push(DataArray {
                        name: d.name.clone(),
                        location: loc,
                        components: d.components,
                        values: v,
                        ty: d.ty,
                        component_names: d.component_names.clone(),
                    }),
                }
            }
        }
    }
    // field data (attached to the grid)
    for d in declared.iter().filter(|d| d.section == Section::Field) {
        let v = dec.floats_any(d)?;
        grid.field_data.push(DataArray {
            name: d.name.clone(),
            location: DataLocation::Field,
            components: d.components,
            values: v,
            ty: d.ty,
            component_names: d.component_names.clone(),
        });
    }
    // polyhedra of all pieces into one legacy stream
    if poly_new.iter().any(|p| p.is_some()) {
        let mut faces = Vec::new();
        let mut fo = Vec::new();
        for (pi, p) in poly_new.into_iter().enumerate() {
            match p {
                Some((f, o)) => {
                    let shift = faces.len() as i64;
                    faces.extend(f);
                    fo.extend(o.into_iter().map(|x| if x < 0 { -1 } else { x + shift }));
                }
                None => fo.extend(std::iter::repeat_n(-1, pieces[pi].1)),
            }
        }
        grid.faces = Some((faces, fo));
    }
    grid.check().map_err(|m| MeshError::Parse {
        path: path.to_path_buf(),
        location: "whole file".into(),
        msg: m,
    })?;
    Ok(grid)
}

/// A piece's legacy polyhedron streams with point ids shifted by `base` (the points of
/// earlier pieces); offsets stay relative to the piece's stream.
fn shift_stream(f: &[i64], fo: &[i64], base: i64) -> Result<(Vec<i64>, Vec<i64>), String> {
    let mut out = Vec::with_capacity(f.len());
    let mut offs = Vec::with_capacity(fo.len());
    let mut start = 0usize;
    for (c, &end) in fo.iter().enumerate() {
        if end < 0 {
            offs.push(-1);
            continue;
        }
        if (end as u64) > f.len() as u64 || (end as usize) < start {
            return Err(format!(
                "faceoffsets of cell {c} are out of order or past the face stream"
            ));
        }
        let s = &f[start..end as usize];
        let bad = || format!("the face stream of polyhedron {c} is malformed");
        let nf = *s.first().ok_or_else(bad)?;
        out.push(nf);
        let mut k = 1usize;
        for _ in 0..nf.max(0) {
            let n = *s.get(k).ok_or_else(bad)?;
            if n < 0 || k + 1 + n as usize > s.len() {
                return Err(bad());
            }
            out.push(n);
            out.extend(s[k + 1..k + 1 + n as usize].iter().map(|&v| v + base));
            k += 1 + n as usize;
        }
        if k != s.len() {
            return Err(bad());
        }
        offs.push(out.len() as i64);
        start = end as usize;
    }
    Ok((out, offs))
}

/// VTK 9.4's polyhedron arrays to the legacy `faces` / `faceoffsets` streams.
fn modern_to_legacy(
    face_conn: &[i64],
    face_offsets: &[i64],
    poly_to_faces: &[i64],
    poly_offsets: &[i64],
    nc: usize,
) -> Result<(Vec<i64>, Vec<i64>), String> {
    // offsets may be given with or without the leading 0
    let starts = |o: &[i64], n: usize| -> Result<Vec<(usize, usize)>, String> {
        let o: Vec<i64> = if o.len() == n + 1 {
            o.to_vec()
        } else if o.len() == n {
            std::iter::once(0).chain(o.iter().copied()).collect()
        } else {
            return Err(format!("{} offsets for {n} entries", o.len()));
        };
        o.windows(2)
            .map(|w| {
                if w[0] < 0 || w[1] < w[0] {
                    Err("polyhedron offsets out of order".to_string())
                } else {
                    Ok((w[0] as usize, w[1] as usize))
                }
            })
            .collect()
    };
    let nfaces = if face_offsets.first() == Some(&0) && face_offsets.len() > 1 {
        face_offsets.len() - 1
    } else {
        face_offsets.len()
    };
    let fr = starts(face_offsets, nfaces)?;
    let pr = starts(poly_offsets, nc)?;
    let mut faces = Vec::new();
    let mut fo = Vec::with_capacity(nc);
    for &(a, b) in &pr {
        if a == b {
            fo.push(-1);
            continue;
        }
        let ids = poly_to_faces
            .get(a..b)
            .ok_or("polyhedron_to_faces is too short")?;
        faces.push(ids.len() as i64);
        for &f in ids {
            let &(s, e) = fr
                .get(usize::try_from(f).map_err(|_| "negative face id")?)
                .ok_or("a face id past face_offsets")?;
            let l = face_conn
                .get(s..e)
                .ok_or("face_connectivity is too short")?;
            faces.push(l.len() as i64);
            faces.extend_from_slice(l);
        }
        fo.push(faces.len() as i64);
    }
    Ok((faces, fo))
}

/// Decodes declared arrays.
struct Decoder<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    header: &'a Header,
    appended: Option<&'a Appended>,
}

fn b64_decode(text: &[u8]) -> Result<Vec<u8>, String> {
    let mut val = [255u8; 256];
    for (i, &c) in B64.iter().enumerate() {
        val[c as usize] = i as u8;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc = 0u32;
    let mut n = 0;
    for &c in text {
        if c.is_ascii_whitespace() {
            continue;
        }
        if c == b'=' {
            // padding ends a base64 group; VTK concatenates groups (header, then data)
            if n == 2 {
                out.push((acc >> 4) as u8);
            } else if n == 3 {
                out.push((acc >> 10) as u8);
                out.push((acc >> 2) as u8);
            }
            acc = 0;
            n = 0;
            continue;
        }
        let v = val[c as usize];
        if v == 255 {
            return Err(format!("'{}' is not a base64 character", c as char));
        }
        acc = (acc << 6) | v as u32;
        n += 1;
        if n == 4 {
            out.extend_from_slice(&[(acc >> 16) as u8, (acc >> 8) as u8, acc as u8]);
            acc = 0;
            n = 0;
        }
    }
    if n == 1 {
        return Err("truncated base64 data".into());
    } else if n == 2 {
        out.push((acc >> 4) as u8);
    } else if n == 3 {
        out.push((acc >> 10) as u8);
        out.push((acc >> 2) as u8);
    }
    Ok(out)
}

/// Base64 decoding of exactly the bytes needed for `nbytes` decoded bytes from `text`
/// (for inline compressed arrays, whose header and data are encoded separately).
fn b64_prefix_len(nbytes: usize) -> usize {
    nbytes.div_ceil(3) * 4
}

impl Decoder<'_> {
    fn err(&self, d: &Declared, msg: String) -> MeshError {
        let what = if d.name.is_empty() {
            "DataArray".to_string()
        } else {
            format!("DataArray \"{}\"", d.name)
        };
        MeshError::parse_line(
            self.path,
            line_of(self.bytes, d.at),
            format!("{what}: {msg}"),
        )
    }

    fn hsize(&self) -> usize {
        if self.header.header64 {
            8
        } else {
            4
        }
    }

    fn read_uint(&self, b: &[u8]) -> u64 {
        let mut v = [0u8; 8];
        let n = b.len();
        v[..n].copy_from_slice(b);
        if self.header.big_endian {
            v[..n].reverse();
        }
        u64::from_le_bytes(v)
    }

    /// The raw (uncompressed, native-order-unswapped) bytes of a binary or appended array.
    fn raw(&self, d: &Declared) -> Result<Vec<u8>, MeshError> {
        let hs = self.hsize();
        match d.format {
            Format::Ascii => unreachable!("ascii is parsed as text"),
            Format::Binary => {
                let text: Vec<u8> = d
                    .text
                    .iter()
                    .copied()
                    .filter(|c| !c.is_ascii_whitespace())
                    .collect();
                if self.header.compressed {
                    // header: nblocks first, then the rest of the header; encoded apart
                    let first = b64_decode(&text[..b64_prefix_len(hs).min(text.len())])
                        .map_err(|m| self.err(d, m))?;
                    if first.len() < hs {
                        return Err(self.err(d, "truncated compression header".into()));
                    }
                    let nb = self.read_uint(&first[..hs]);
                    if nb > text.len() as u64 {
                        return Err(self.err(
                            d,
                            format!(
                                "{nb} compressed blocks claimed in {} bytes of text",
                                text.len()
                            ),
                        ));
                    }
                    let hlen = (3 + nb as usize) * hs;
                    let henc = b64_prefix_len(hlen);
                    if henc > text.len() {
                        return Err(self.err(d, "truncated compression header".into()));
                    }
                    let head = b64_decode(&text[..henc]).map_err(|m| self.err(d, m))?;
                    let body = b64_decode(&text[henc..]).map_err(|m| self.err(d, m))?;
                    self.inflate(d, &head, &body)
                } else {
                    let all = b64_decode(&text).map_err(|m| self.err(d, m))?;
                    if all.len() < hs {
                        return Err(self.err(d, "truncated binary data (no length header)".into()));
                    }
                    let n = self.read_uint(&all[..hs]);
                    if n > (all.len() - hs) as u64 {
                        return Err(self.err(
                            d,
                            format!("the header says {n} bytes, {} follow", all.len() - hs),
                        ));
                    }
                    Ok(all[hs..hs + n as usize].to_vec())
                }
            }
            Format::Appended => {
                let ap = self.appended.ok_or_else(|| {
                    self.err(
                        d,
                        "format=\"appended\" but the file has no <AppendedData>".into(),
                    )
                })?;
                let data = &self.bytes[ap.start.min(self.bytes.len())..];
                if ap.base64 {
                    // each array's base64 starts at its offset (in base64 characters)
                    let o = usize::try_from(d.offset)
                        .ok()
                        .filter(|&o| o <= data.len())
                        .ok_or_else(|| {
                            self.err(d, format!("offset {} is past the appended data", d.offset))
                        })?;
                    let text = &data[o..];
                    let end = memchr::memchr(b'<', text).unwrap_or(text.len());
                    let text = &text[..end];
                    if self.header.compressed {
                        let first = b64_decode(&text[..b64_prefix_len(hs).min(text.len())])
                            .map_err(|m| self.err(d, m))?;
                        if first.len() < hs {
                            return Err(self.err(d, "truncated compression header".into()));
                        }
                        let nb = self.read_uint(&first[..hs]);
                        if nb > text.len() as u64 {
                            return Err(self.err(d, "implausible block count".into()));
                        }
                        let henc = b64_prefix_len((3 + nb as usize) * hs);
                        if henc > text.len() {
                            return Err(self.err(d, "truncated compression header".into()));
                        }
                        let head = b64_decode(&text[..henc]).map_err(|m| self.err(d, m))?;
                        let csum = self.block_sizes(d, &head)?.1.iter().sum::<u64>();
                        let benc =
                            b64_prefix_len((csum as usize).min(text.len())).min(text.len() - henc);
                        let body =
                            b64_decode(&text[henc..henc + benc]).map_err(|m| self.err(d, m))?;
                        self.inflate(d, &head, &body)
                    } else {
                        let first = b64_decode(&text[..b64_prefix_len(hs).min(text.len())])
                            .map_err(|m| self.err(d, m))?;
                        if first.len() < hs {
                            return Err(self.err(d, "truncated length header".into()));
                        }
                        let n = self.read_uint(&first[..hs]);
                        let need = b64_prefix_len(hs + (n as usize).min(text.len()));
                        if n > text.len() as u64 || need > text.len() {
                            return Err(self.err(
                                d,
                                format!("the header says {n} bytes, the appended data is shorter"),
                            ));
                        }
                        let all = b64_decode(&text[..need]).map_err(|m| self.err(d, m))?;
                        Ok(all[hs..(hs + n as usize).min(all.len())].to_vec())
                    }
                } else {
                    let o = usize::try_from(d.offset)
                        .ok()
                        .filter(|&o| o <= data.len())
                        .ok_or_else(|| {
                            self.err(
                                d,
                                format!(
                                    "offset {} is past the appended data ({} bytes)",
                                    d.offset,
                                    data.len()
                                ),
                            )
                        })?;
                    let data = &data[o..];
                    if self.header.compressed {
                        if data.len() < hs {
                            return Err(self.err(d, "truncated compression header".into()));
                        }
                        let nb = self.read_uint(&data[..hs]);
                        let hlen = (nb as u128 + 3) * hs as u128;
                        if hlen > data.len() as u128 {
                            return Err(self.err(
                                d,
                                format!("{nb} compressed blocks claimed; the file is shorter"),
                            ));
                        }
                        let hlen = hlen as usize;
                        let (_, csizes) = self.block_sizes(d, &data[..hlen])?;
                        let csum: u64 = csizes.iter().sum();
                        if csum > (data.len() - hlen) as u64 {
                            return Err(self.err(
                                d,
                                format!(
                                    "{csum} compressed bytes claimed; {} remain in the file",
                                    data.len() - hlen
                                ),
                            ));
                        }
                        self.inflate(d, &data[..hlen], &data[hlen..hlen + csum as usize])
                    } else {
                        if data.len() < hs {
                            return Err(self.err(d, "truncated length header".into()));
                        }
                        let n = self.read_uint(&data[..hs]);
                        if n > (data.len() - hs) as u64 {
                            return Err(self.err(
                                d,
                                format!(
                                    "the header says {n} bytes; {} remain in the file",
                                    data.len() - hs
                                ),
                            ));
                        }
                        Ok(data[hs..hs + n as usize].to_vec())
                    }
                }
            }
        }
    }

    /// (uncompressed sizes, compressed sizes) of the blocks of a compression header.
    fn block_sizes(&self, d: &Declared, head: &[u8]) -> Result<(Vec<u64>, Vec<u64>), MeshError> {
        let hs = self.hsize();
        if head.len() < 3 * hs {
            return Err(self.err(d, "truncated compression header".into()));
        }
        let nb = self.read_uint(&head[..hs]) as usize;
        let bs = self.read_uint(&head[hs..2 * hs]);
        let last = self.read_uint(&head[2 * hs..3 * hs]);
        if nb
            .checked_add(3)
            .and_then(|n| n.checked_mul(hs))
            .is_none_or(|n| head.len() < n)
        {
            return Err(self.err(d, "truncated compression header".into()));
        }
        let csizes: Vec<u64> = (0..nb)
            .map(|i| self.read_uint(&head[(3 + i) * hs..(4 + i) * hs]))
            .collect();
        if csizes
            .iter()
            .try_fold(0u64, |a, &c| a.checked_add(c))
            .is_none()
        {
            return Err(self.err(d, "the compressed block sizes add up past 2^64".into()));
        }
        let usizes: Vec<u64> = (0..nb)
            .map(|i| if i + 1 == nb && last != 0 { last } else { bs })
            .collect();
        Ok((usizes, csizes))
    }

    fn inflate(&self, d: &Declared, head: &[u8], body: &[u8]) -> Result<Vec<u8>, MeshError> {
        use std::io::Read;
        let (usizes, csizes) = self.block_sizes(d, head)?;
        let csum: u64 = csizes.iter().sum();
        if csum > body.len() as u64 {
            return Err(self.err(
                d,
                format!("{csum} compressed bytes claimed; {} present", body.len()),
            ));
        }
        // deflate cannot expand more than 1032:1; a header claiming more is corrupt and
        // must not size an allocation
        let usum: u128 = usizes.iter().map(|&u| u as u128).sum();
        if usum > 1032 * csum as u128 + 64 * csizes.len() as u128 {
            return Err(self.err(d, format!(
                "the compression header claims {usum} bytes from {csum} compressed bytes (more than zlib's 1032:1)"
            )));
        }
        let mut spans = Vec::with_capacity(csizes.len());
        let mut at = 0usize;
        for (&c, &u) in csizes.iter().zip(&usizes) {
            spans.push((at, at + c as usize, u as usize));
            at += c as usize;
        }
        let blocks: Vec<Result<Vec<u8>, String>> = spans
            .par_iter()
            .map(|&(a, b, u)| {
                let mut out = Vec::with_capacity(u);
                flate2::read::ZlibDecoder::new(&body[a..b])
                    .take(u as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| format!("zlib: {e}"))?;
                if out.len() != u {
                    return Err(format!(
                        "a block inflates to {} bytes, the header says {u}",
                        out.len()
                    ));
                }
                Ok(out)
            })
            .collect();
        let mut out = Vec::with_capacity(usum as usize);
        for b in blocks {
            out.extend_from_slice(&b.map_err(|m| self.err(d, m))?);
        }
        Ok(out)
    }

    /// Values as f64, checking the count when `expect` is given.
    fn values(&self, d: &Declared, expect: Option<usize>) -> Result<Vec<f64>, MeshError> {
        let v: Vec<f64> = if d.format == Format::Ascii {
            let mut out = Vec::new();
            for tok in d
                .text
                .split(|c| c.is_ascii_whitespace())
                .filter(|t| !t.is_empty())
            {
                let s = std::str::from_utf8(tok).unwrap_or("");
                let x: f64 = if d.ty.is_float() {
                    s.parse().ok()
                } else {
                    s.parse::<i64>()
                        .ok()
                        .map(|i| i as f64)
                        .or_else(|| s.parse::<u64>().ok().map(|u| u as f64))
                }
                .ok_or_else(|| {
                    self.err(
                        d,
                        format!(
                            "`{}` is not a {} value",
                            super::text::show(tok),
                            d.ty.name()
                        ),
                    )
                })?;
                out.push(x);
                if let Some(n) = expect {
                    if out.len() > n {
                        return Err(self.err(d, format!("more than the {n} values expected")));
                    }
                }
            }
            out
        } else {
            let raw = self.raw(d)?;
            let sz = d.ty.size();
            if raw.len() % sz != 0 {
                return Err(self.err(
                    d,
                    format!(
                        "{} bytes is not a whole number of {} values",
                        raw.len(),
                        d.ty.name()
                    ),
                ));
            }
            let be = self.header.big_endian;
            raw.chunks_exact(sz)
                .map(|c| {
                    let mut b = [0u8; 8];
                    b[..sz].copy_from_slice(c);
                    if be {
                        b[..sz].reverse();
                    }
                    match d.ty {
                        NumType::Int8 => b[0] as i8 as f64,
                        NumType::UInt8 => b[0] as f64,
                        NumType::Int16 => i16::from_le_bytes([b[0], b[1]]) as f64,
                        NumType::UInt16 => u16::from_le_bytes([b[0], b[1]]) as f64,
                        NumType::Int32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                        NumType::UInt32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                        NumType::Float32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                        NumType::Int64 => i64::from_le_bytes(b) as f64,
                        NumType::UInt64 => u64::from_le_bytes(b) as f64,
                        NumType::Float64 => f64::from_le_bytes(b),
                    }
                })
                .collect()
        };
        if let Some(n) = expect {
            if v.len() != n {
                return Err(self.err(d, format!("{} values, expected {n}", v.len())));
            }
        }
        Ok(v)
    }

    fn floats(&self, d: &Declared, n: usize) -> Result<Vec<f64>, MeshError> {
        self.values(d, Some(n))
    }

    fn floats_any(&self, d: &Declared) -> Result<Vec<f64>, MeshError> {
        let v = self.values(d, None)?;
        if v.len() % d.components != 0 {
            return Err(self.err(
                d,
                format!("{} values for {} components", v.len(), d.components),
            ));
        }
        Ok(v)
    }

    fn ints(&self, d: &Declared, n: Option<usize>) -> Result<Vec<i64>, MeshError> {
        if d.ty.is_float() {
            return Err(self.err(
                d,
                format!("type {} where integers are expected", d.ty.name()),
            ));
        }
        let v = self.values(d, n)?;
        Ok(v.into_iter().map(|x| x as i64).collect())
    }
}

// ---------------------------------------------------------------------------------------
// A .vtu as a volume mesh

/// Read a `.vtu` as a volume mesh (see the module docs): volume cells by their corners,
/// polyhedra by their faces, tagged lower-dimensional cells as group members; a file
/// without volume cells is read as a surface (its polygons as free faces).
pub(crate) fn read_as(path: &Path, bytes: &[u8], build: Build) -> Result<Built, MeshError> {
    let g = parse_vtu(path, bytes)?;
    let at = |what: &str, i: usize, msg: String| MeshError::Parse {
        path: path.to_path_buf(),
        location: format!("{what} {i}"),
        msg,
    };
    if let Some(i) = g
        .points
        .iter()
        .position(|p| !p.iter().all(|x| x.is_finite()))
    {
        return Err(at(
            "point",
            i,
            format!("non-finite coordinate {:?}", g.points[i]),
        ));
    }
    if let Some(a) = g
        .array(DataLocation::Cell, GMSH_PHYSICAL)
        .filter(|a| a.components == 1)
    {
        if let Some(c) = a
            .values
            .iter()
            .position(|&t| t.fract() != 0.0 || !(i32::MIN as f64..=i32::MAX as f64).contains(&t))
        {
            return Err(at(
                "cell",
                c,
                format!(
                    "physical tag {} of `{GMSH_PHYSICAL}` is not a 32-bit integer",
                    a.values[c]
                ),
            ));
        }
    }
    let mut col = Collected {
        nodes: g.points.clone(),
        ..Default::default()
    };
    let phys = g
        .array(DataLocation::Cell, GMSH_PHYSICAL)
        .filter(|a| a.components == 1)
        .map(|a| a.values.as_slice());
    // names: field arrays [tag, dim] (meshio's field_data)
    for a in &g.field_data {
        if a.components == 2 && a.values.len() == 2 && !a.ty.is_float() {
            let (tag, dim) = (a.values[0], a.values[1]);
            if (0.0..=3.0).contains(&dim) && tag.fract() == 0.0 && tag.abs() < 2e9 {
                let (dim, tag) = (dim as u8, tag as i32);
                let auto = format!("group_{dim}_{tag}");
                let name = if a.name == auto {
                    String::new()
                } else {
                    a.name.clone()
                };
                col.names.push(((dim, tag), name));
            }
        }
    }
    let has_volume = g
        .types
        .iter()
        .any(|&t| vtk_volume_shape(t).is_some() || t == VTK_POLYHEDRON);
    for c in 0..g.num_cells() {
        let t = g.types[c];
        let pts = g.cell(c);
        let tag = phys.map(|p| p[c] as i32).unwrap_or(0);
        let node = |i: usize| pts[i] as u32;
        if let Some(shape) = vtk_volume_shape(t) {
            let n = shape.num_vertices().expect("standard");
            if pts.len() < n {
                return Err(MeshError::Parse {
                    path: path.to_path_buf(),
                    location: format!("cell {c}"),
                    msg: format!(
                        "VTK type {t} needs at least {n} points, the cell has {}",
                        pts.len()
                    ),
                });
            }
            let mut v: Vec<u32> = (0..n).map(node).collect();
            if t == VTK_VOXEL {
                v.swap(2, 3);
                v.swap(6, 7);
            }
            let id = col.add_cell(shape, &v, c as u64);
            if tag != 0 {
                col.cell_groups.push((tag, id));
            }
        } else if t == VTK_POLYHEDRON {
            let loops = g
                .face_loops(c)
                .map_err(|m| MeshError::Parse {
                    path: path.to_path_buf(),
                    location: format!("cell {c}"),
                    msg: m,
                })?
                .unwrap_or_default();
            let mut stream = Vec::new();
            for l in loops {
                stream.push(l.len() as u32);
                stream.extend(l.iter().map(|&v| v as u32));
            }
            let id = col.add_poly_cell(stream, c as u64);
            if tag != 0 {
                col.cell_groups.push((tag, id));
            }
        } else {
            // lower-dimensional cells: group members when tagged, a surface when the file
            // has no volume cells; corners first for quadratic and Lagrange cells
            let (dim, n) = match t {
                VTK_VERTEX => (0u8, 1usize),
                VTK_LINE | 21 | 35 | 68 => (1, 2),
                VTK_TRIANGLE | 22 | 34 | 69 => (2, 3),
                VTK_QUAD | 23 | 28 | 70 => (2, 4),
                VTK_POLYGON => (2, pts.len()),
                // other VTK cells (strips, pixels, higher-order 2D/1D ...) carry no volume
                0..=16 | 21..=37 | 42 | 51..=83 => continue,
                _ => {
                    return Err(at(
                        "cell",
                        c,
                        format!("VTK cell type {t} is not a VTK cell type"),
                    ))
                }
            };
            if pts.len() < n {
                continue;
            }
            if tag != 0 && n <= 4 {
                let mut verts = [0u32; 4];
                for (i, v) in verts.iter_mut().enumerate().take(n) {
                    *v = node(i);
                }
                col.group_elems.push(GroupElement {
                    dim,
                    tag,
                    verts,
                    n: n as u8,
                    loc: c as u64,
                });
            } else if !has_volume && dim == 2 && n >= 3 {
                col.free_faces.push((0..n).map(node).collect());
            }
        }
    }
    let mut cur = super::text::Cursor::new(path, bytes);
    cur.cells = true;
    let built = col.finish_as(&cur, build)?;
    // general polyhedra come as face loops: they must close and be consistently oriented
    if let Built::Poly(mf) = &built {
        if g.types.contains(&VTK_POLYHEDRON) {
            mf.mesh.validate().map_err(|e| MeshError::Parse {
                path: path.to_path_buf(),
                location: "polyhedra".into(),
                msg: e.to_string(),
            })?;
        }
    }
    Ok(built)
}
