//! Mesh file formats: reading volumetric meshes into a [`PolyMesh`] and writing them
//! back out (dissertation §3.4: the polyhedral mesh stored by its boundary operators).
//!
//! | format | read | write | notes |
//! |---|---|---|---|
//! | Gmsh MSH 2.2 / 4.1 (`.msh`) | ASCII + binary | 4.1 ASCII | physical groups are read into [`MeshFile::groups`] |
//! | Medit (`.mesh`) | ASCII | ASCII | element references become groups |
//! | TetGen (`.node` + `.ele`) | ASCII | ASCII (tetrahedra only) | region attributes become groups |
//! | OpenVolumeMesh (`.ovm`) | ASCII | ASCII | edges, faces and polyhedra kept as stored |
//! | VTK XML (`.vtu`) | ASCII, base64, appended raw, zlib | appended raw + zlib (default), base64, ASCII | polyhedra as `VTK_POLYHEDRON`, point/cell/field data, quadratic and Lagrange cells read by their corners ([`vtu`]) |
//! | Wavefront (`.obj`) | surfaces ([`read_surface`]) | surfaces ([`write_obj`]) | boundary surfaces |
//! | Stanford (`.ply`), OFF (`.off`) | surfaces ([`read_surface`]) | surfaces ([`write_surface`]) | ASCII and binary PLY |
//!
//! Any file but `.vtu` may be gzip-compressed: on reading when its name ends in `.gz` or it
//! starts with the gzip magic bytes, on writing when its name ends in `.gz` (`.vtu` files
//! are compressed inside, as VTK does; gzip around them is not a VTK format). Reading takes
//! regular files only and bounds gzip inflation ([`tessera_core::input`]); every count in a
//! header is checked against the bytes left in the file before anything is allocated for
//! it. Writes are atomic and private ([`tessera_core::atomic`]); a TetGen pair is published
//! together.
//!
//! Cells read from element lists go through [`PolyMeshBuilder`], which numbers edges and
//! faces canonically and orients every cell outward by its signed volume, so inverted
//! elements are repaired and degenerate ones reported with the line they came from.
//! Second-order elements (Gmsh types 11, 12, 13, ...; TetGen 10-node tetrahedra; Medit
//! `TetrahedraP2`) are read by their corner nodes only: the mesh is linear.

mod cells;
#[doc(hidden)]
pub mod fuzz;
mod medit;
mod msh;
mod obj;
mod obj_read;
mod off;
mod ovm;
mod ply;
mod surface;
mod tetgen;
pub(crate) mod text;
pub mod vtu;

pub use cells::typed_cell_vertices;
pub use obj::write_obj;
pub use off::write_off;
pub use ply::write_ply;
pub use surface::{read_surface, write_surface, write_surface_with, SurfaceFormat};
pub use vtu::{
    read_vtu_grid, stage_vtu_grid, write_pvd, write_vtu, write_vtu_grid, write_vtu_groups,
    write_vtu_polygons, write_vtu_with, DataArray, DataLocation, NumType, VtuEncoding, VtuGrid,
};

use crate::{MeshError, Point, PolyMesh, PolyMeshBuilder};
use std::io::Write;
use std::path::Path;

/// A Gmsh physical group (or a Medit/TetGen reference number) resolved to mesh entities.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhysicalGroup {
    /// Dimension of the tagged elements: 3 cells, 2 faces, 1 edges, 0 vertices.
    pub dim: u8,
    /// The physical tag (Gmsh), reference (Medit) or region attribute (TetGen).
    pub tag: i32,
    /// The name from `$PhysicalNames` (empty when none).
    pub name: String,
    /// Sorted, unique entity indices of dimension `dim` in the [`PolyMesh`]: cell indices
    /// for dim 3, mesh face indices for dim 2 (each tagged triangle/quad mapped to the face
    /// with the same vertex set), edge indices for dim 1, vertex indices for dim 0.
    pub entities: Vec<u32>,
}

/// A mesh as read from a file, with its physical groups.
#[derive(Clone, Debug)]
pub struct MeshFile {
    pub mesh: PolyMesh,
    /// Groups sorted by `(dim, tag)`.
    pub groups: Vec<PhysicalGroup>,
}

impl MeshFile {
    /// The group with this name (first match).
    pub fn group(&self, name: &str) -> Option<&PhysicalGroup> {
        self.groups.iter().find(|g| g.name == name)
    }
}

/// File formats known by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Msh,
    Medit,
    TetGen,
    Ovm,
    Vtu,
    Obj,
}

impl Format {
    /// The format of a path by its extension (a trailing `.gz` is ignored).
    pub fn from_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        let ext = name.rsplit_once('.')?.1;
        Some(match ext {
            "msh" => Format::Msh,
            "mesh" => Format::Medit,
            "node" | "ele" => Format::TetGen,
            "ovm" => Format::Ovm,
            "vtu" => Format::Vtu,
            "obj" => Format::Obj,
            _ => return None,
        })
    }
}

const READ_FORMATS: &str =
    ".msh (Gmsh 2.2/4.1), .mesh (Medit), .node/.ele (TetGen), .ovm (OpenVolumeMesh), .vtu (VTK XML)";
const WRITE_FORMATS: &str = ".vtu, .msh (4.1), .mesh, .node/.ele, .ovm";

/// How strictly readers treat questionable input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Cells with the same vertex set as an earlier cell are dropped (each keeps the
    /// groups of both) instead of being an error at the repeat's line. A repeated cell
    /// would be assembled twice (doubling its stiffness) or make its faces non-manifold.
    pub allow_duplicates: bool,
}

/// Read a volumetric mesh, choosing the reader by extension (gzip handled transparently).
pub fn read_mesh(path: &Path) -> Result<MeshFile, MeshError> {
    read_mesh_with(path, &ReadOptions::default())
}

/// [`read_mesh`] with options.
pub fn read_mesh_with(path: &Path, opts: &ReadOptions) -> Result<MeshFile, MeshError> {
    let fmt = Format::from_path(path).ok_or_else(|| {
        MeshError::Unsupported(format!(
            "{}: unknown mesh file extension; readable are {READ_FORMATS}",
            path.display()
        ))
    })?;
    match fmt {
        Format::TetGen => tetgen::read_as(path, Build::Poly, opts)?.into_poly(),
        _ => parse_mesh(fmt, path, &read_bytes(path)?, opts),
    }
}

/// Parse a mesh file's (inflated) bytes in a single-file format; `path` labels the errors.
/// For TetGen pairs see [`parse_tetgen`].
pub fn parse_mesh(
    fmt: Format,
    path: &Path,
    data: &[u8],
    opts: &ReadOptions,
) -> Result<MeshFile, MeshError> {
    match fmt {
        Format::Msh => msh::read_as(path, data, Build::Poly, opts)?.into_poly(),
        Format::Medit => medit::read_as(path, data, Build::Poly, opts)?.into_poly(),
        Format::Ovm => ovm::read(path, data),
        Format::Vtu => vtu::read_as(path, data, Build::Poly)?.into_poly(),
        Format::TetGen => Err(MeshError::Unsupported(format!(
            "{}: a TetGen mesh is a .node + .ele pair: use parse_tetgen",
            path.display()
        ))),
        Format::Obj => Err(MeshError::Unsupported(format!(
            "{}: this format is written, not read; readable are {READ_FORMATS}",
            path.display()
        ))),
    }
}

/// Parse a TetGen `.node` + `.ele` pair from their bytes (paths label the errors).
pub fn parse_tetgen(
    node: (&Path, &[u8]),
    ele: (&Path, &[u8]),
    opts: &ReadOptions,
) -> Result<MeshFile, MeshError> {
    tetgen::read_pair(node, ele, Build::Poly, opts)?.into_poly()
}

/// A tetrahedral mesh read straight into the compact simplex representation (dissertation
/// §3.4.4), with its physical groups as vertex tuples. What a FEM run needs: no polyhedral
/// boundary operators are built.
#[derive(Clone, Debug)]
pub struct SimplexMeshFile {
    pub mesh: crate::simplex::SimplexMesh,
    /// Groups sorted by `(dim, tag)`.
    pub groups: Vec<SimplexGroup>,
    /// Cells folded over relative to their neighbours (their file vertex order has the
    /// minority orientation; see [`crate::quality`]). Readers orient every cell, so these
    /// are valid cells of a tangled mesh; FEM refuses them.
    pub inverted: InvertedCells,
    /// Where each cell came from in the file: `line N` (text) or `byte N` (binary); empty
    /// when the reader does not track it. For errors found after reading.
    pub cell_locations: CellLocations,
}

/// Inverted cells of a file: how many, and the first ones as (cell index in the file's order
/// of volume elements, place in the file).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InvertedCells {
    pub count: usize,
    pub first: Vec<(u32, String)>,
}

impl InvertedCells {
    /// "cell 12 (line 40), cell 99 (line 127), ..." for messages.
    pub fn describe(&self, n: usize) -> String {
        let v: Vec<String> = self
            .first
            .iter()
            .take(n)
            .map(|(c, at)| format!("cell {c} ({at})"))
            .collect();
        let more = if self.count > v.len() { ", ..." } else { "" };
        format!("{}{more}", v.join(", "))
    }
}

/// The location in its file of every cell of a [`SimplexMeshFile`].
#[derive(Clone, Debug, Default)]
pub struct CellLocations {
    /// Line (text) or byte offset (binary) per cell; empty when unknown.
    pub loc: Vec<u64>,
    /// Whether `loc` holds byte offsets.
    pub bytes: bool,
}

impl CellLocations {
    /// `line N` or `byte N` of cell `c`, if known.
    pub fn describe(&self, c: usize) -> Option<String> {
        self.loc
            .get(c)
            .map(|&l| format!("{} {l}", if self.bytes { "byte" } else { "line" }))
    }
    /// Reorder after a renumbering: `old_of_new[c]` is the old index of new cell `c`.
    pub fn permute(&mut self, old_of_new: &[u32]) {
        if self.loc.len() == old_of_new.len() {
            self.loc = old_of_new.iter().map(|&o| self.loc[o as usize]).collect();
        }
    }
}

/// A physical group of a [`SimplexMeshFile`]: its elements as mesh entities given by their
/// (sorted) vertices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimplexGroup {
    /// Dimension of the tagged elements: 3 cells, 2 faces, 1 edges, 0 vertices.
    pub dim: u8,
    pub tag: i32,
    /// The name from `$PhysicalNames` (empty when none).
    pub name: String,
    /// dim 3: sorted, unique cell indices.
    pub cells: Vec<u32>,
    /// dim 2: sorted, unique vertex triples (each a face of the mesh).
    pub faces: Vec<[u32; 3]>,
    /// dim 1: sorted, unique vertex pairs (each an edge of the mesh).
    pub edges: Vec<[u32; 2]>,
    /// dim 0: sorted, unique vertices.
    pub vertices: Vec<u32>,
}

/// Read a tetrahedral mesh as a [`crate::simplex::SimplexMesh`] (formats as [`read_mesh`]).
///
/// Files whose volume elements are all tetrahedra go straight to the simplex form: nodes
/// not used by a tetrahedron are dropped (the others keep their order), tetrahedra keep
/// the file's order and are oriented to positive volume by swapping their last two
/// vertices (as [`PolyMeshBuilder`] orients cells), and every tagged triangle, line or point
/// must be a face, edge or vertex of the mesh (else an error at its line). Other files are
/// read as polyhedral meshes and converted, which fails for non-simplicial cells.
pub fn read_simplex_mesh(path: &Path) -> Result<SimplexMeshFile, MeshError> {
    read_simplex_mesh_with(path, &ReadOptions::default())
}

/// [`read_simplex_mesh`] with options.
pub fn read_simplex_mesh_with(
    path: &Path,
    opts: &ReadOptions,
) -> Result<SimplexMeshFile, MeshError> {
    let fmt = Format::from_path(path).ok_or_else(|| {
        MeshError::Unsupported(format!(
            "{}: unknown mesh file extension; readable are {READ_FORMATS}",
            path.display()
        ))
    })?;
    let mut tr = tessera_core::trace::Tracer::new("read_simplex_mesh");
    let built = match fmt {
        Format::Msh => {
            let bytes = read_bytes(path)?;
            tr.mark("read + gunzip");
            msh::read_as(path, &bytes, Build::Simplex, opts)?
        }
        Format::Medit => medit::read_as(path, &read_bytes(path)?, Build::Simplex, opts)?,
        Format::TetGen => tetgen::read_as(path, Build::Simplex, opts)?,
        Format::Vtu => vtu::read_as(path, &read_bytes(path)?, Build::Simplex)?,
        _ => Built::Poly(read_mesh_with(path, opts)?),
    };
    tr.mark("parse + simplex mesh + groups");
    match built {
        Built::Simplex(s) => Ok(s),
        Built::Poly(mf) => simplex_from_poly_file(path, mf),
    }
}

/// Convert a polyhedral [`MeshFile`] (tetrahedra only) with its groups.
fn simplex_from_poly_file(path: &Path, mf: MeshFile) -> Result<SimplexMeshFile, MeshError> {
    let mesh = crate::simplex::SimplexMesh::from_poly(&mf.mesh).map_err(|e| {
        MeshError::Unsupported(format!("{}: not a tetrahedral mesh: {e}", path.display()))
    })?;
    let poly = &mf.mesh;
    let v = crate::quality::validity(poly);
    let inverted = InvertedCells {
        count: v.inverted,
        first: v
            .inverted_cells
            .iter()
            .map(|&c| (c, format!("cell {c}")))
            .collect(),
    };
    let groups = mf
        .groups
        .into_iter()
        .map(|g| {
            let mut out = SimplexGroup {
                dim: g.dim,
                tag: g.tag,
                name: g.name,
                ..Default::default()
            };
            match g.dim {
                3 => out.cells = g.entities,
                2 => {
                    let fv = poly.face_vertices();
                    for &f in &g.entities {
                        let row = fv.row(f as usize);
                        if row.len() == 3 {
                            let mut t = [0u32; 3];
                            for (i, &v) in row.iter().enumerate() {
                                t[i] = tessera_sparse::tcsr::col(v);
                            }
                            t.sort_unstable();
                            out.faces.push(t);
                        }
                    }
                    out.faces.sort_unstable();
                }
                1 => {
                    for &e in &g.entities {
                        let [a, b] = poly.edge_vertices()[e as usize];
                        out.edges.push([a.min(b), a.max(b)]);
                    }
                    out.edges.sort_unstable();
                }
                _ => out.vertices = g.entities,
            }
            out
        })
        .collect();
    Ok(SimplexMeshFile {
        mesh,
        groups,
        inverted,
        cell_locations: CellLocations::default(),
    })
}

/// Which representation a reader builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Build {
    Poly,
    /// The simplex mesh when every volume element is a tetrahedron (else `Poly`).
    Simplex,
}

/// What a reader built.
pub(crate) enum Built {
    Poly(MeshFile),
    Simplex(SimplexMeshFile),
}

impl Built {
    pub(crate) fn into_poly(self) -> Result<MeshFile, MeshError> {
        match self {
            Built::Poly(m) => Ok(m),
            Built::Simplex(_) => Err(MeshError::Unsupported(
                "internal: a reader built a simplex mesh where a polyhedral one was asked for"
                    .into(),
            )),
        }
    }
}

/// Write a mesh file with its physical groups, choosing the writer by extension (`.gz`
/// compresses, except `.vtu`, which is written in `vtu` encoding). Formats that cannot hold
/// the groups are listed by [`groups_lost`].
pub fn write_mesh_file(f: &MeshFile, path: &Path, vtu: VtuEncoding) -> Result<(), MeshError> {
    match Format::from_path(path) {
        Some(Format::Vtu) => vtu::write_vtu_groups(path, &f.mesh, &f.groups, &[], vtu),
        Some(Format::Msh) => msh::write_groups(&f.mesh, &f.groups, path),
        _ => write_mesh(&f.mesh, path),
    }
}

/// The groups of `f` that a file written to `path` cannot hold (empty when it keeps all).
pub fn groups_lost<'a>(f: &'a MeshFile, path: &Path) -> Vec<&'a PhysicalGroup> {
    match Format::from_path(path) {
        Some(Format::Vtu | Format::Msh) => Vec::new(),
        _ => f.groups.iter().collect(),
    }
}

/// Write a volumetric mesh, choosing the writer by extension (`.gz` compresses).
/// `.vtu` files are written as appended raw binary, zlib-compressed.
pub fn write_mesh(mesh: &PolyMesh, path: &Path) -> Result<(), MeshError> {
    let fmt = Format::from_path(path).ok_or_else(|| {
        MeshError::Unsupported(format!(
            "{}: unknown mesh file extension; writable are {WRITE_FORMATS}",
            path.display()
        ))
    })?;
    match fmt {
        Format::Msh => msh::write(mesh, path),
        Format::Medit => medit::write(mesh, path),
        Format::TetGen => tetgen::write(mesh, path),
        Format::Ovm => ovm::write(mesh, path),
        Format::Vtu => vtu::write_vtu(path, mesh, &[]),
        Format::Obj => Err(MeshError::Unsupported(format!(
            "{}: .obj holds surfaces; write a boundary surface with write_obj",
            path.display()
        ))),
    }
}

/// Read a whole file, gunzipping it when its name ends in `.gz` or it starts with the gzip
/// magic. Only regular files are read, and inflation is bounded
/// ([`tessera_core::input`]: ratio and absolute limits, configurable).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, MeshError> {
    let raw = tessera_core::input::read_file(path)?;
    let named_gz = path.to_string_lossy().to_ascii_lowercase().ends_with(".gz");
    if tessera_core::input::is_gzip(&raw) {
        Ok(tessera_core::input::gunzip(
            path,
            &raw,
            &tessera_core::input::GzipLimits::default(),
        )?)
    } else if named_gz {
        Err(MeshError::Parse {
            path: path.to_path_buf(),
            location: "byte 0".into(),
            msg: "the name ends in .gz but the file does not start with the gzip magic bytes"
                .into(),
        })
    } else {
        Ok(raw)
    }
}

/// Write a file atomically and privately ([`tessera_core::atomic`]: a unique temporary
/// file beside it, created with `O_EXCL`, synced, then renamed). Names ending in `.gz` are
/// gzip-compressed.
pub fn write_atomic<F>(path: &Path, body: F) -> Result<(), MeshError>
where
    F: FnOnce(&mut dyn Write) -> std::io::Result<()>,
{
    tessera_core::atomic::publish(vec![stage(path, body)?]).map_err(MeshError::from)
}

/// [`write_atomic`] without the final rename: the written file waits for
/// [`tessera_core::atomic::publish`] (for outputs of several files).
pub fn stage<F>(path: &Path, body: F) -> Result<tessera_core::atomic::Staged, MeshError>
where
    F: FnOnce(&mut dyn Write) -> std::io::Result<()>,
{
    let gz = path.to_string_lossy().to_ascii_lowercase().ends_with(".gz");
    Ok(tessera_core::atomic::stage(path, |w| {
        if gz {
            let mut enc = flate2::write::GzEncoder::new(w, flate2::Compression::default());
            body(&mut enc)?;
            enc.finish()?;
            Ok(())
        } else {
            body(w)
        }
    })?)
}

/// Format a float so that it reads back bit-identically (shortest round-trip digits).
pub(crate) fn fmt_f64(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 || (1e-5..1e15).contains(&a) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

// ---------------------------------------------------------------------------------------
// Shared assembly of element-list formats (MSH, Medit, TetGen)

/// A lower-dimensional element that only fills a group.
pub(crate) struct GroupElement {
    pub dim: u8,
    pub tag: i32,
    pub verts: [u32; 4],
    pub n: u8,
    pub loc: u64,
}

/// Cells and tagged elements collected by a reader, turned into a [`MeshFile`] by [`Collected::finish`].
#[derive(Default)]
pub(crate) struct Collected {
    /// all nodes of the file, in file order
    pub nodes: Vec<Point>,
    pub cell_types: Vec<crate::CellType>,
    /// corner node indices of all cells, flattened
    pub cell_nodes: Vec<u32>,
    /// line or byte offset of each cell's element
    pub cell_loc: Vec<u64>,
    /// (tag, cell index) for dim-3 group membership
    pub cell_groups: Vec<(i32, u32)>,
    pub group_elems: Vec<GroupElement>,
    /// names of groups: (dim, tag) -> name
    pub names: Vec<((u8, i32), String)>,
    /// general polyhedra (cells of type `Polyhedron`), in cell order
    pub poly_cells: Vec<PolyCell>,
    /// polygons of a surface file (used only when the file has no volume cells)
    pub free_faces: Vec<Vec<u32>>,
    /// drop repeated cells instead of failing ([`ReadOptions::allow_duplicates`])
    pub allow_duplicates: bool,
}

/// A general polyhedron read from a file: its face loops over file nodes.
pub(crate) struct PolyCell {
    /// `[n, v0, .., v(n-1), ...]` (file node indices)
    pub loops: Vec<u32>,
    /// number of distinct nodes (stored in `Collected::cell_nodes`)
    pub nnodes: usize,
}

impl Collected {
    pub fn new(opts: &ReadOptions) -> Self {
        Collected {
            allow_duplicates: opts.allow_duplicates,
            ..Default::default()
        }
    }

    /// For every cell that repeats the vertex set of an earlier cell, the index of the
    /// earliest such cell (`u32::MAX` for cells that repeat none).
    fn duplicate_twins(&self) -> Option<Vec<u32>> {
        use rayon::prelude::*;
        let nc = self.cell_types.len();
        let offs = self.cell_offsets();
        // sorted vertices + cell index; tetrahedra (the common case) in 20 bytes
        fn pairs<const K: usize>(keys: &mut [[u32; K]]) -> Vec<(u32, u32)> {
            keys.par_sort_unstable();
            keys.windows(2)
                .filter(|w| w[0][..K - 1] == w[1][..K - 1])
                .map(|w| (w[0][K - 1], w[1][K - 1]))
                .collect()
        }
        let all_tets = self
            .cell_types
            .iter()
            .all(|&t| t == crate::CellType::Tetrahedron);
        let dup: Vec<(u32, u32)> = if all_tets {
            let mut keys: Vec<[u32; 5]> = (0..nc)
                .into_par_iter()
                .with_min_len(4096)
                .map(|c| {
                    let mut k = [0u32; 5];
                    k[..4].copy_from_slice(&self.cell_nodes[4 * c..4 * c + 4]);
                    k[..4].sort_unstable();
                    k[4] = c as u32;
                    k
                })
                .collect();
            pairs(&mut keys)
        } else {
            let mut keys: Vec<[u32; 10]> = (0..nc)
                .into_par_iter()
                .with_min_len(4096)
                .map(|c| {
                    // the node count and the first 8 sorted nodes (general polyhedra may
                    // have more: equal keys are compared in full below)
                    let mut k = [u32::MAX; 10];
                    let mut v = self.cell_nodes[offs[c]..offs[c + 1]].to_vec();
                    v.sort_unstable();
                    let m = v.len().min(8);
                    k[0] = v.len().min(u32::MAX as usize) as u32;
                    k[1..1 + m].copy_from_slice(&v[..m]);
                    k[9] = c as u32;
                    k
                })
                .collect();
            let sorted = |c: u32| {
                let mut v = self.cell_nodes[offs[c as usize]..offs[c as usize + 1]].to_vec();
                v.sort_unstable();
                v
            };
            pairs(&mut keys)
                .into_iter()
                .filter(|&(a, b)| {
                    offs[a as usize + 1] - offs[a as usize] <= 8 || sorted(a) == sorted(b)
                })
                .collect()
        };
        if dup.is_empty() {
            return None;
        }
        // runs of equal keys are sorted by cell index: (a, b) pairs chain a < b < c...
        let mut twin = vec![u32::MAX; nc];
        for &(a, b) in &dup {
            let root = if twin[a as usize] != u32::MAX {
                twin[a as usize]
            } else {
                a
            };
            twin[b as usize] = root;
        }
        Some(twin)
    }

    /// Start of each cell's nodes in `cell_nodes` (general polyhedra store their distinct
    /// nodes).
    fn cell_offsets(&self) -> Vec<usize> {
        let mut offs = Vec::with_capacity(self.cell_types.len() + 1);
        offs.push(0usize);
        let mut polys = self.poly_cells.iter();
        for t in &self.cell_types {
            let n = match t.num_vertices() {
                Some(n) => n,
                None => polys.next().map_or(0, |p| p.nnodes),
            };
            offs.push(offs.last().unwrap() + n);
        }
        offs
    }

    /// Repeated cells: an error at the first repeat's location, or with
    /// `allow_duplicates` the repeats are dropped (their groups go to the kept cell).
    fn check_duplicates(&mut self, cur: &text::Cursor) -> Result<(), MeshError> {
        let Some(twin) = self.duplicate_twins() else {
            return Ok(());
        };
        if !self.allow_duplicates {
            let b = twin.iter().position(|&t| t != u32::MAX).expect("a repeat");
            let a = twin[b] as usize;
            let name = self.cell_types[b].name();
            return Err(cur.err_at(
                self.cell_loc[b],
                format!(
                    "{name} repeats the {} at {} (same vertices); duplicate cells are errors (--allow-duplicates drops them)",
                    self.cell_types[a].name(),
                    cur.describe_loc(self.cell_loc[a])
                ),
            ));
        }
        let nc = self.cell_types.len();
        let mut new_of = vec![u32::MAX; nc];
        let mut k = 0u32;
        for c in 0..nc {
            if twin[c] == u32::MAX {
                new_of[c] = k;
                k += 1;
            }
        }
        for c in 0..nc {
            if twin[c] != u32::MAX {
                new_of[c] = new_of[twin[c] as usize];
            }
        }
        let offs = self.cell_offsets();
        let mut types = Vec::with_capacity(k as usize);
        let mut nodes = Vec::with_capacity(self.cell_nodes.len());
        let mut locs = Vec::with_capacity(k as usize);
        let mut polys = Vec::new();
        let mut old_polys = std::mem::take(&mut self.poly_cells).into_iter();
        for (c, &t) in twin.iter().enumerate() {
            let poly = (self.cell_types[c] == crate::CellType::Polyhedron)
                .then(|| old_polys.next())
                .flatten();
            if t == u32::MAX {
                types.push(self.cell_types[c]);
                nodes.extend_from_slice(&self.cell_nodes[offs[c]..offs[c + 1]]);
                locs.push(self.cell_loc[c]);
                polys.extend(poly);
            }
        }
        self.cell_types = types;
        self.cell_nodes = nodes;
        self.cell_loc = locs;
        self.poly_cells = polys;
        for g in &mut self.cell_groups {
            g.1 = new_of[g.1 as usize];
        }
        Ok(())
    }

    pub fn add_cell(&mut self, ty: crate::CellType, nodes: &[u32], loc: u64) -> u32 {
        self.cell_types.push(ty);
        self.cell_nodes.extend_from_slice(nodes);
        self.cell_loc.push(loc);
        (self.cell_types.len() - 1) as u32
    }

    /// A general polyhedron given by its face loops (`[n, v...]` over file nodes).
    pub fn add_poly_cell(&mut self, loops: Vec<u32>, loc: u64) -> u32 {
        let mut nodes: Vec<u32> = Vec::new();
        let mut i = 0;
        while i < loops.len() {
            let n = loops[i] as usize;
            nodes.extend_from_slice(&loops[i + 1..(i + 1 + n).min(loops.len())]);
            i += 1 + n;
        }
        nodes.sort_unstable();
        nodes.dedup();
        self.cell_types.push(crate::CellType::Polyhedron);
        self.cell_nodes.extend_from_slice(&nodes);
        self.cell_loc.push(loc);
        self.poly_cells.push(PolyCell {
            loops,
            nnodes: nodes.len(),
        });
        (self.cell_types.len() - 1) as u32
    }

    /// Take the nodes used by cells, in file order: `(new_index, positions)` with
    /// `new_index[file node]` the compacted index (`u32::MAX` for unused nodes).
    fn take_used_nodes(&mut self) -> (Vec<u32>, Vec<Point>) {
        let nodes = std::mem::take(&mut self.nodes);
        let mut new_index = vec![u32::MAX; nodes.len()];
        for &n in &self.cell_nodes {
            new_index[n as usize] = 0;
        }
        if self.cell_types.is_empty() {
            for &n in self.free_faces.iter().flatten() {
                new_index[n as usize] = 0;
            }
        }
        let mut positions = Vec::with_capacity(nodes.len());
        for (i, p) in nodes.iter().enumerate() {
            if new_index[i] == 0 {
                new_index[i] = positions.len() as u32;
                positions.push(*p);
            }
        }
        (new_index, positions)
    }

    /// Build what `build` asks for: the simplex mesh when asked and every cell is a
    /// tetrahedron, else the polyhedral mesh.
    pub fn finish_as(mut self, cur: &text::Cursor, build: Build) -> Result<Built, MeshError> {
        self.check_duplicates(cur)?;
        let all_tets = !self.cell_types.is_empty()
            && self
                .cell_types
                .iter()
                .all(|&t| t == crate::CellType::Tetrahedron);
        if build == Build::Simplex && all_tets {
            self.finish_simplex(cur).map(Built::Simplex)
        } else {
            self.finish(cur).map(Built::Poly)
        }
    }

    /// The simplex path of [`read_simplex_mesh`] (every cell a tetrahedron).
    fn finish_simplex(mut self, cur: &text::Cursor) -> Result<SimplexMeshFile, MeshError> {
        use rayon::prelude::*;
        let mut tr = tessera_core::trace::Tracer::new("finish_simplex");
        let (new_index, positions) = self.take_used_nodes();
        for (v, p) in positions.iter().enumerate() {
            if !p.iter().all(|x| x.is_finite()) {
                return Err(MeshError::NonFinitePosition { vertex: v });
            }
        }
        let mut cv: Vec<u32> = self
            .cell_nodes
            .par_iter()
            .with_min_len(4096)
            .map(|&n| new_index[n as usize])
            .collect();
        drop(self.cell_nodes);
        // orient to positive volume (0: kept, 1: flipped, 2: repeats a vertex, 3: zero
        // volume); degenerate cells are an error naming their count and the first lines
        let status: Vec<(u8, f64)> = cv
            .par_chunks_mut(4)
            .with_min_len(4096)
            .map(|t| {
                let p = |i: usize| positions[t[i] as usize];
                let (a, b, d, e) = (p(0), p(1), p(2), p(3));
                let u = [b[0] - a[0], b[1] - a[1], b[2] - a[2]];
                let v = [d[0] - a[0], d[1] - a[1], d[2] - a[2]];
                let w = [e[0] - a[0], e[1] - a[1], e[2] - a[2]];
                let vol = u[0] * (v[1] * w[2] - v[2] * w[1]) - u[1] * (v[0] * w[2] - v[2] * w[0])
                    + u[2] * (v[0] * w[1] - v[1] * w[0]);
                if (0..4).any(|i| (0..i).any(|j| t[i] == t[j])) {
                    return (2, 0.0);
                }
                if vol == 0.0 || !vol.is_finite() {
                    return (3, 0.0);
                }
                if vol < 0.0 {
                    t.swap(2, 3);
                    return (1, -vol);
                }
                (0, vol)
            })
            .collect();
        let degenerate: Vec<usize> = (0..status.len()).filter(|&c| status[c].0 >= 2).collect();
        if let Some(&c) = degenerate.first() {
            let more: Vec<String> = degenerate
                .iter()
                .skip(1)
                .take(4)
                .map(|&c| cur.describe_loc(self.cell_loc[c]))
                .collect();
            return Err(cur.err_at(
                self.cell_loc[c],
                format!(
                    "degenerate tetrahedron: {}{}",
                    if status[c].0 == 2 {
                        "it repeats a vertex"
                    } else {
                        "zero volume"
                    },
                    if degenerate.len() > 1 {
                        format!(
                            " ({} degenerate tetrahedra in all; the next at {}{})",
                            degenerate.len(),
                            more.join(", "),
                            if degenerate.len() > 5 { ", ..." } else { "" }
                        )
                    } else {
                        String::new()
                    }
                ),
            ));
        }
        // the orientation of the file's vertex order is the one holding most of the volume
        // (a tool's convention, such as TetGen's); cells of the other orientation are folded
        // over relative to their neighbours
        let (kept, flipped) =
            status.iter().fold(
                (0.0, 0.0),
                |(k, f), &(s, v)| {
                    if s == 1 {
                        (k, f + v)
                    } else {
                        (k + v, f)
                    }
                },
            );
        let minority: u8 = if flipped > kept { 0 } else { 1 };
        let mut inverted = InvertedCells::default();
        for (c, &(s, _)) in status.iter().enumerate() {
            if s == minority {
                inverted.count += 1;
                if inverted.first.len() < crate::quality::LIST_LIMIT {
                    inverted
                        .first
                        .push((c as u32, cur.describe_loc(self.cell_loc[c])));
                }
            }
        }
        drop(status);
        let mut mesh = crate::simplex::SimplexMesh::new(3, cv, positions)?;
        mesh.set_par(tessera_core::Par::auto());
        tr.mark("compact + orient + SimplexMesh::new");

        use std::collections::{BTreeMap, HashMap};
        let mut groups: BTreeMap<(u8, i32), SimplexGroup> = BTreeMap::new();
        let names: HashMap<(u8, i32), String> = self.names.iter().cloned().collect();
        fn group<'a>(
            groups: &'a mut BTreeMap<(u8, i32), SimplexGroup>,
            names: &HashMap<(u8, i32), String>,
            dim: u8,
            tag: i32,
        ) -> &'a mut SimplexGroup {
            groups.entry((dim, tag)).or_insert_with(|| SimplexGroup {
                dim,
                tag,
                name: names.get(&(dim, tag)).cloned().unwrap_or_default(),
                ..Default::default()
            })
        }
        for ((d, t), _) in &self.names {
            group(&mut groups, &names, *d, *t);
        }
        for &(tag, c) in &self.cell_groups {
            group(&mut groups, &names, 3, tag).cells.push(c);
        }
        // the tagged triangles and lines must be faces and edges of the tetrahedra: look
        // them up while scanning the cells (no sort of all faces: the caller may renumber)
        use std::collections::HashSet;
        let key = |g: &GroupElement| -> Option<[u32; 4]> {
            let mut k = [u32::MAX; 4];
            for i in 0..g.n as usize {
                k[i] = new_index[g.verts[i] as usize];
                if k[i] == u32::MAX {
                    return None;
                }
            }
            k[..g.n as usize].sort_unstable();
            Some(k)
        };
        let mut want_faces: Vec<[u32; 3]> = Vec::new();
        let mut want_edges: Vec<[u32; 2]> = Vec::new();
        for g in &self.group_elems {
            match (g.dim, g.n, key(g)) {
                (2, 3, Some(k)) => want_faces.push([k[0], k[1], k[2]]),
                (1, 2, Some(k)) => want_edges.push([k[0], k[1]]),
                _ => {}
            }
        }
        want_faces.sort_unstable();
        want_faces.dedup();
        want_edges.sort_unstable();
        want_edges.dedup();
        // first vertices of the wanted faces and edges: most cell faces fail this at once
        let nv = mesh.num_vertices();
        let mut first = vec![0u8; nv];
        for f in &want_faces {
            first[f[0] as usize] |= 1;
        }
        for e in &want_edges {
            first[e[0] as usize] |= 2;
        }
        let (fw, ew) = (!want_faces.is_empty(), !want_edges.is_empty());
        let found: HashSet<[u32; 4]> = if !fw && !ew {
            HashSet::new()
        } else {
            let hits: Vec<[u32; 4]> = mesh
                .cell_vertices()
                .par_chunks(4)
                .with_min_len(4096)
                .fold(Vec::new, |mut acc, t| {
                    if fw {
                        for f in crate::simplex::TET_FACES {
                            let mut k = [t[f[0]], t[f[1]], t[f[2]]];
                            k.sort_unstable();
                            if first[k[0] as usize] & 1 != 0 && want_faces.binary_search(&k).is_ok()
                            {
                                acc.push([k[0], k[1], k[2], u32::MAX]);
                            }
                        }
                    }
                    if ew {
                        for [i, j] in crate::simplex::local_edges(3) {
                            let (a, b) = (t[*i].min(t[*j]), t[*i].max(t[*j]));
                            if first[a as usize] & 2 != 0
                                && want_edges.binary_search(&[a, b]).is_ok()
                            {
                                acc.push([a, b, u32::MAX, u32::MAX]);
                            }
                        }
                    }
                    acc
                })
                .reduce(Vec::new, |mut a, mut b| {
                    a.append(&mut b);
                    a
                });
            hits.into_iter().collect()
        };
        tr.mark("group faces and edges found in the cells");
        for g in &self.group_elems {
            let what = ["point", "line", "surface element", "cell"][g.dim.min(3) as usize];
            let not_found = || {
                cur.err_at(
                    g.loc,
                    format!(
                        "{what} of group ({}, {}) is not {} of the volume mesh",
                        g.dim,
                        g.tag,
                        ["a vertex", "an edge", "a face"][g.dim.min(2) as usize]
                    ),
                )
            };
            let k = key(g).ok_or_else(not_found)?;
            match (g.dim, g.n) {
                (2, 3) => {
                    if !found.contains(&k) {
                        return Err(not_found());
                    }
                    group(&mut groups, &names, 2, g.tag)
                        .faces
                        .push([k[0], k[1], k[2]]);
                }
                (1, 2) => {
                    if !found.contains(&k) {
                        return Err(not_found());
                    }
                    group(&mut groups, &names, 1, g.tag)
                        .edges
                        .push([k[0], k[1]]);
                }
                (0, 1) => group(&mut groups, &names, 0, g.tag).vertices.push(k[0]),
                _ => return Err(not_found()),
            }
        }
        let groups = groups
            .into_values()
            .map(|mut g| {
                g.cells.sort_unstable();
                g.cells.dedup();
                g.faces.sort_unstable();
                g.faces.dedup();
                g.edges.sort_unstable();
                g.edges.dedup();
                g.vertices.sort_unstable();
                g.vertices.dedup();
                g
            })
            .collect();
        Ok(SimplexMeshFile {
            mesh,
            groups,
            inverted,
            cell_locations: CellLocations {
                loc: self.cell_loc,
                bytes: cur.binary,
            },
        })
    }

    /// Build the mesh (nodes not used by any cell are dropped; the others keep their
    /// order) and resolve the groups.
    pub fn finish(mut self, cur: &text::Cursor) -> Result<MeshFile, MeshError> {
        let path = cur.path;
        if self.cell_types.is_empty() && self.free_faces.is_empty() {
            return Err(MeshError::Parse {
                path: path.to_path_buf(),
                location: "whole file".into(),
                msg: "the file has no volume elements (tetrahedra, hexahedra, prisms or pyramids)"
                    .into(),
            });
        }
        let (new_index, positions) = self.take_used_nodes();
        let mut b = PolyMeshBuilder::new(positions);
        let mut k = 0;
        let mut buf = [0u32; 8];
        let mut polys = self.poly_cells.iter();
        for (c, &ty) in self.cell_types.iter().enumerate() {
            if ty == crate::CellType::Polyhedron {
                let pc = polys.next().expect("one PolyCell per polyhedron");
                k += pc.nnodes;
                let mapped = &pc.loops;
                let mut loops: Vec<Vec<u32>> = Vec::new();
                let mut i = 0;
                while i < mapped.len() {
                    let n = mapped[i] as usize;
                    loops.push(
                        mapped[i + 1..i + 1 + n]
                            .iter()
                            .map(|&v| new_index[v as usize])
                            .collect(),
                    );
                    i += 1 + n;
                }
                let refs: Vec<&[u32]> = loops.iter().map(|l| l.as_slice()).collect();
                b.add_cell(&refs)
                    .map_err(|e| cur.err_at(self.cell_loc[c], format!("polyhedron: {e}")))?;
                continue;
            }
            let n = ty.num_vertices().expect("standard cell");
            for i in 0..n {
                buf[i] = new_index[self.cell_nodes[k + i] as usize];
            }
            k += n;
            b.add_typed_cell(ty, &buf[..n])
                .map_err(|e| cur.err_at(self.cell_loc[c], format!("{}: {e}", ty.name())))?;
        }
        drop(self.cell_nodes);
        if self.cell_types.is_empty() {
            for f in &self.free_faces {
                let l: Vec<u32> = f.iter().map(|&v| new_index[v as usize]).collect();
                b.add_free_face(&l).map_err(|e| MeshError::Parse {
                    path: path.to_path_buf(),
                    location: "whole file".into(),
                    msg: format!("polygon: {e}"),
                })?;
            }
        }
        let mesh = b.build(tessera_core::Par::auto()).map_err(|e| match e {
            MeshError::DegenerateCell { cell, reason } => cur.err_at(
                self.cell_loc[cell],
                format!("degenerate {}: {reason}", self.cell_types[cell].name()),
            ),
            other => MeshError::Parse {
                path: path.to_path_buf(),
                location: "whole file".into(),
                msg: other.to_string(),
            },
        })?;
        // Faces are identified across cells by their vertex sets (§3.4.1). A quadrilateral that
        // two cells list in different cyclic orders (a twisted hexahedron, prism or pyramid)
        // merges two different faces and leaves a cell that is not closed (∂2 ∂3 ≠ 0, §3.3):
        // an error at that cell, not a mesh accepted broken. Tetrahedra alone cannot do this
        // (a triangle is its vertex set), so tetrahedral meshes skip the check.
        if self
            .cell_types
            .iter()
            .any(|&t| t != crate::CellType::Tetrahedron)
        {
            if let Err(e) = mesh.validate() {
                return Err(match &e {
                    MeshError::Invalid {
                        entity: crate::validate::Entity::Cell,
                        index,
                        ..
                    } if *index < self.cell_loc.len() => cur.err_at(
                        self.cell_loc[*index],
                        format!("{}: {e}", self.cell_types[*index].name()),
                    ),
                    _ => MeshError::Parse {
                        path: path.to_path_buf(),
                        location: "whole file".into(),
                        msg: e.to_string(),
                    },
                });
            }
        }

        // groups
        use std::collections::{BTreeMap, HashMap};
        let mut groups: BTreeMap<(u8, i32), Vec<u32>> = BTreeMap::new();
        for ((d, t), _) in &self.names {
            groups.entry((*d, *t)).or_default();
        }
        for &(tag, c) in &self.cell_groups {
            groups.entry((3, tag)).or_default().push(c);
        }
        if !self.group_elems.is_empty() {
            let key_of = |verts: &[u32]| -> Option<[u32; 4]> {
                let mut k = [u32::MAX; 4];
                for (i, &v) in verts.iter().enumerate() {
                    let nv = new_index[v as usize];
                    if nv == u32::MAX {
                        return None;
                    }
                    k[i] = nv;
                }
                k[..verts.len()].sort_unstable();
                Some(k)
            };
            let mut face_keys: HashMap<[u32; 4], u32> = HashMap::new();
            let mut edge_keys: HashMap<[u32; 2], u32> = HashMap::new();
            let mut resolved: Vec<Option<[u32; 4]>> = Vec::with_capacity(self.group_elems.len());
            for g in &self.group_elems {
                let k = key_of(&g.verts[..g.n as usize]);
                if let Some(k) = k {
                    match g.dim {
                        2 => {
                            face_keys.insert(k, u32::MAX);
                        }
                        1 => {
                            edge_keys.insert([k[0], k[1]], u32::MAX);
                        }
                        _ => {}
                    }
                }
                resolved.push(k);
            }
            if !face_keys.is_empty() {
                let fv = mesh.face_vertices();
                for f in 0..mesh.num_faces() {
                    let row = fv.row(f);
                    if row.len() > 4 {
                        continue;
                    }
                    let mut k = [u32::MAX; 4];
                    for (i, &v) in row.iter().enumerate() {
                        k[i] = tessera_sparse::tcsr::col(v);
                    }
                    k[..row.len()].sort_unstable();
                    if let Some(slot) = face_keys.get_mut(&k) {
                        *slot = f as u32;
                    }
                }
            }
            if !edge_keys.is_empty() {
                for (e, ev) in mesh.edge_vertices().iter().enumerate() {
                    let k = [ev[0].min(ev[1]), ev[0].max(ev[1])];
                    if let Some(slot) = edge_keys.get_mut(&k) {
                        *slot = e as u32;
                    }
                }
            }
            for (g, k) in self.group_elems.iter().zip(resolved) {
                let what = ["point", "line", "surface element", "cell"][g.dim.min(3) as usize];
                let not_found = || {
                    cur.err_at(
                        g.loc,
                        format!(
                            "{what} of group ({}, {}) is not {} of the volume mesh",
                            g.dim,
                            g.tag,
                            ["a vertex", "an edge", "a face"][g.dim.min(2) as usize]
                        ),
                    )
                };
                let k = k.ok_or_else(not_found)?;
                let ent = match g.dim {
                    0 => k[0],
                    1 => *edge_keys
                        .get(&[k[0], k[1]])
                        .filter(|&&e| e != u32::MAX)
                        .ok_or_else(not_found)?,
                    _ => *face_keys
                        .get(&k)
                        .filter(|&&f| f != u32::MAX)
                        .ok_or_else(not_found)?,
                };
                groups.entry((g.dim, g.tag)).or_default().push(ent);
            }
        }
        let names: HashMap<(u8, i32), String> = self.names.into_iter().collect();
        let groups = groups
            .into_iter()
            .map(|((dim, tag), mut entities)| {
                entities.sort_unstable();
                entities.dedup();
                PhysicalGroup {
                    dim,
                    tag,
                    name: names.get(&(dim, tag)).cloned().unwrap_or_default(),
                    entities,
                }
            })
            .collect();
        Ok(MeshFile { mesh, groups })
    }
}
