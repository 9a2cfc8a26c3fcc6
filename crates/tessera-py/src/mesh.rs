//! `tessera.Mesh`: a volumetric mesh stored by its boundary operators (dissertation §3.4),
//! built from NumPy arrays or read from a file, with its relations, boundary, smoothing and
//! subdivision (dissertation §3.4.1, §3.4.2, §3.4.3).
//!
//! A `Mesh` never changes after construction: operations return new meshes. So the arrays
//! it hands out (`points`, `cells`, `cell_types`, unsigned relations) are read-only NumPy
//! views of its own storage, which the view keeps alive; they are not copied. Copies are
//! made by `vtk_cells()` (VTK's size-prefixed layout is not Tessera's), by signed relations
//! (the sign is decoded from TCSR's encoding) and by `boundary()`.

use crate::arrays;
use crate::device;
use crate::errors::{mesh_err, raise, value_error};
use numpy::ndarray::{ArrayView1, ArrayView2};
use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::OnceLock;
use tessera_core::Par;
use tessera_mesh::boundary::extract_boundary;
use tessera_mesh::cuda::DeviceMesh;
use tessera_mesh::io::{read_mesh, typed_cell_vertices, write_mesh_file, MeshFile, PhysicalGroup};
use tessera_mesh::smooth::{SmoothMethod, SmoothParams};
use tessera_mesh::{CellType, PolyMesh, PolyMeshBuilder};
use tessera_sparse::tcsr::decode;
use tessera_sparse::Tcsr;

/// VTK cell type ids (vtkCellType.h).
pub const VTK_TETRA: u8 = 10;
pub const VTK_HEXAHEDRON: u8 = 12;
pub const VTK_WEDGE: u8 = 13;
pub const VTK_PYRAMID: u8 = 14;
pub const VTK_POLYHEDRON: u8 = 42;

fn vtk_id(t: CellType) -> u8 {
    match t {
        CellType::Tetrahedron => VTK_TETRA,
        CellType::Hexahedron => VTK_HEXAHEDRON,
        CellType::Prism => VTK_WEDGE,
        CellType::Pyramid => VTK_PYRAMID,
        CellType::Polyhedron => VTK_POLYHEDRON,
    }
}

/// The cell type named by `name` (meshio and VTK names, and Tessera's).
fn cell_type_named(name: &str) -> PyResult<CellType> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "tetra" | "tet" | "tetrahedron" | "tetrahedra" => CellType::Tetrahedron,
        "hexahedron" | "hex" | "hexahedra" => CellType::Hexahedron,
        "wedge" | "prism" => CellType::Prism,
        "pyramid" => CellType::Pyramid,
        _ => {
            return Err(value_error(format!(
                "cell_type {name:?}: expected \"tetra\", \"hexahedron\", \"wedge\" or \"pyramid\" (mixed and polyhedral cells: pass a VTK flat cell array with cell_types)"
            )))
        }
    })
}

/// VTK wedges list the first triangle with its normal pointing away from the second; Gmsh
/// (and [`typed_cell_vertices`]) toward it: the two orders differ by swapping 1-2 and 4-5.
fn gmsh_to_vtk_wedge(v: &mut [u32]) {
    v.swap(1, 2);
    v.swap(4, 5);
}

/// Cell connectivity in VTK's vertex order, derived once from ∂3 and kept.
struct Connectivity {
    /// VTK type id per cell.
    types: Vec<u8>,
    /// `offsets[c]..offsets[c + 1]` is cell `c`'s row in `rows`.
    offsets: Vec<u64>,
    /// Standard cells: their vertices; polyhedra: VTK's face stream
    /// `nfaces, (npoints, ids...) per face`.
    rows: Vec<u32>,
    /// Vertices per cell when every cell has the same standard type.
    uniform: Option<usize>,
}

fn connectivity(m: &PolyMesh) -> Connectivity {
    let n = m.num_cells();
    let mut types = Vec::with_capacity(n);
    let mut offsets = Vec::with_capacity(n + 1);
    let mut rows = Vec::with_capacity(4 * n);
    offsets.push(0u64);
    let mut buf = [0u32; 8];
    let fv = m.face_vertices();
    for c in 0..n {
        match typed_cell_vertices(m, c, &mut buf) {
            Some(t) => {
                let k = t.num_vertices().unwrap_or(0);
                let start = rows.len();
                rows.extend_from_slice(&buf[..k]);
                if t == CellType::Prism {
                    gmsh_to_vtk_wedge(&mut rows[start..]);
                }
                types.push(vtk_id(t));
            }
            None => {
                let faces = m.cell_faces().row(c);
                rows.push(faces.len() as u32);
                for &e in faces {
                    let (f, s) = decode(e);
                    let lp = fv.row(f as usize);
                    rows.push(lp.len() as u32);
                    let start = rows.len();
                    rows.extend(lp.iter().map(|&v| tessera_sparse::tcsr::col(v)));
                    if s < 0 {
                        rows[start..].reverse();
                    }
                }
                types.push(VTK_POLYHEDRON);
            }
        }
        offsets.push(rows.len() as u64);
    }
    let uniform = match types.first() {
        Some(&t0) if t0 != VTK_POLYHEDRON && types.iter().all(|&t| t == t0) => {
            Some((offsets[1] - offsets[0]) as usize)
        }
        _ => None,
    };
    Connectivity {
        types,
        offsets,
        rows,
        uniform,
    }
}

/// A volumetric mesh (dissertation §3.4): tetrahedra, hexahedra, prisms, pyramids and
/// general polyhedra, stored by its boundary operators; immutable.
#[pyclass(module = "tessera._tessera", name = "NativeMesh", frozen)]
pub struct Mesh {
    pub mesh: PolyMesh,
    pub groups: Vec<PhysicalGroup>,
    conn: OnceLock<Connectivity>,
}

impl Mesh {
    pub fn new(mesh: PolyMesh, groups: Vec<PhysicalGroup>) -> Mesh {
        Mesh {
            mesh,
            groups,
            conn: OnceLock::new(),
        }
    }
    fn conn(&self) -> &Connectivity {
        self.conn.get_or_init(|| connectivity(&self.mesh))
    }
}

/// A read-only NumPy view of `view`'s memory, kept alive by `owner`.
fn view2<'py, T: numpy::Element>(
    owner: &Bound<'py, Mesh>,
    view: ArrayView2<'_, T>,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    // SAFETY: `view` points into a `Mesh` (frozen: its vectors are never mutated or moved
    // after construction, and relation caches are `OnceLock`s that are only ever set once),
    // and `owner` becomes the array's base object, so the memory outlives the array.
    let a = unsafe { PyArray2::borrow_from_array(&view, owner.clone().into_any()) };
    a.getattr("flags")?.setattr("writeable", false)?;
    Ok(a)
}

fn view1<'py, T: numpy::Element>(
    owner: &Bound<'py, Mesh>,
    view: ArrayView1<'_, T>,
) -> PyResult<Bound<'py, PyArray1<T>>> {
    // SAFETY: as in `view2`.
    let a = unsafe { PyArray1::borrow_from_array(&view, owner.clone().into_any()) };
    a.getattr("flags")?.setattr("writeable", false)?;
    Ok(a)
}

/// Build a mesh from points and standard cells of one type (`cells` `(M, k)`).
fn build_typed(points: Vec<[f64; 3]>, cells: &[u32], t: CellType) -> Result<PolyMesh, String> {
    let k = t.num_vertices().unwrap_or(0);
    let mut b = PolyMeshBuilder::new(points);
    let nfaces = t.local_faces().len();
    b.reserve(
        cells.len() / k,
        cells.len() / k * nfaces,
        cells.len() / k * nfaces * 4,
    );
    for (c, row) in cells.chunks_exact(k).enumerate() {
        b.add_typed_cell(t, row)
            .map_err(|e| format!("cell {c} {row:?}: {e}"))?;
    }
    b.build(Par::auto()).map_err(|e| e.to_string())
}

/// Build a mesh from VTK's flat size-prefixed cell array (as PyVista's `UnstructuredGrid`
/// holds it) and the VTK type of each cell: 10 tetra, 12 hexahedron, 13 wedge, 14 pyramid,
/// 42 polyhedron (`size, nfaces, (npoints, ids...) per face`).
fn build_vtk(points: Vec<[f64; 3]>, flat: &[u32], types: &[u32]) -> Result<PolyMesh, String> {
    let nv = points.len();
    let mut b = PolyMeshBuilder::new(points);
    let mut pos = 0usize;
    let take = |pos: &mut usize, n: usize, c: usize| -> Result<std::ops::Range<usize>, String> {
        let r = *pos..*pos + n;
        if r.end > flat.len() {
            return Err(format!(
                "cell {c}: the cell array ends at entry {} inside the cell",
                flat.len()
            ));
        }
        *pos = r.end;
        Ok(r)
    };
    for (c, &t) in types.iter().enumerate() {
        let size = flat[take(&mut pos, 1, c)?.start] as usize;
        let row = &flat[take(&mut pos, size, c)?];
        let check = |ids: &[u32]| -> Result<(), String> {
            match ids.iter().find(|&&v| v as usize >= nv) {
                Some(v) => Err(format!(
                    "cell {c}: vertex {v} is out of range: indices must be in 0..{nv}"
                )),
                None => Ok(()),
            }
        };
        let typed = |ty: CellType| -> Result<(), String> {
            let k = ty.num_vertices().unwrap_or(0);
            if row.len() != k {
                return Err(format!(
                    "cell {c}: a {} (VTK type {t}) has {k} vertices, the cell array gives {}",
                    ty.name(),
                    row.len()
                ));
            }
            Ok(())
        };
        match t as u8 {
            VTK_TETRA | VTK_HEXAHEDRON | VTK_WEDGE | VTK_PYRAMID if t < 256 => {
                let ty = match t as u8 {
                    VTK_TETRA => CellType::Tetrahedron,
                    VTK_HEXAHEDRON => CellType::Hexahedron,
                    VTK_WEDGE => CellType::Prism,
                    _ => CellType::Pyramid,
                };
                typed(ty)?;
                check(row)?;
                b.add_typed_cell(ty, row)
                    .map_err(|e| format!("cell {c} {row:?}: {e}"))?;
            }
            VTK_POLYHEDRON if t < 256 => {
                let nf = *row.first().ok_or(format!("cell {c}: empty polyhedron"))? as usize;
                let mut faces: Vec<&[u32]> = Vec::with_capacity(nf);
                let mut p = 1usize;
                for _ in 0..nf {
                    let n = *row
                        .get(p)
                        .ok_or(format!("cell {c}: the face stream ends early"))?
                        as usize;
                    let f = row
                        .get(p + 1..p + 1 + n)
                        .ok_or(format!("cell {c}: the face stream ends early"))?;
                    check(f)?;
                    faces.push(f);
                    p += 1 + n;
                }
                if p != row.len() {
                    return Err(format!(
                        "cell {c}: the polyhedron's size is {} but its faces take {p}",
                        row.len()
                    ));
                }
                b.add_cell(&faces).map_err(|e| format!("cell {c}: {e}"))?;
            }
            _ => {
                return Err(format!(
                    "cell {c}: VTK cell type {t} is not a volume cell Tessera reads (10 tetra, 12 hexahedron, 13 wedge, 14 pyramid, 42 polyhedron)"
                ))
            }
        }
    }
    if pos != flat.len() {
        return Err(format!(
            "the cell array has {} entries, the {} cells use {pos}",
            flat.len(),
            types.len()
        ));
    }
    b.build(Par::auto()).map_err(|e| e.to_string())
}

/// Native `from_arrays`: `cells` `(M, k)` with `cell_type`, or VTK's flat array with
/// `cell_types`. Points are copied once (converted and gathered in the same pass); the
/// index arrays once into `u32`; the GIL is released while the boundary operators are built.
#[pyfunction]
#[pyo3(signature = (points, cells, cell_type = None, cell_types = None))]
pub fn from_arrays(
    py: Python<'_>,
    points: &Bound<'_, PyAny>,
    cells: &Bound<'_, PyAny>,
    cell_type: Option<&str>,
    cell_types: Option<&Bound<'_, PyAny>>,
) -> PyResult<Mesh> {
    let pts = arrays::points(points)?;
    let nv = pts.len();
    let built = match (cell_type, cell_types) {
        (Some(_), Some(_)) => {
            return Err(value_error(
                "give either cell_type (cells of shape (M, k)) or cell_types (a VTK flat cell array), not both",
            ))
        }
        (None, Some(types)) => {
            if arrays::shape(cells, "cells")?.len() != 1 {
                return Err(value_error(
                    "with cell_types, cells must be VTK's flat size-prefixed 1-D array",
                ));
            }
            let flat = arrays::indices(cells, "cells", u32::MAX as usize)?;
            let types = arrays::indices(types, "cell_types", 256)?;
            py.allow_threads(|| build_vtk(pts, &flat, &types))
        }
        (ct, None) => {
            let shape = arrays::shape(cells, "cells")?;
            if shape.len() != 2 {
                return Err(value_error(format!(
                    "cells must have shape (M, k), got {shape:?} (a VTK flat cell array needs cell_types)"
                )));
            }
            let t = match ct {
                Some(name) => cell_type_named(name)?,
                None => match shape[1] {
                    4 => CellType::Tetrahedron,
                    8 => CellType::Hexahedron,
                    6 => CellType::Prism,
                    5 => CellType::Pyramid,
                    k => {
                        return Err(value_error(format!(
                            "cells of {k} vertices: pass cell_type (tetra 4, pyramid 5, wedge 6, hexahedron 8)"
                        )))
                    }
                },
            };
            let k = t.num_vertices().unwrap_or(0);
            if shape[1] != k {
                return Err(value_error(format!(
                    "cells must have shape (M, {k}) for cell_type {:?}, got {shape:?}",
                    t.name()
                )));
            }
            let idx = arrays::indices(cells, "cells", nv)?;
            py.allow_threads(|| build_typed(pts, &idx, t))
        }
    };
    built
        .map(|m| Mesh::new(m, Vec::new()))
        .map_err(|e| raise("MeshError", e))
}

/// Read a mesh file (every format `tessera mesh` reads; gzip transparently); parse errors
/// raise `ParseError` with the file and line.
#[pyfunction]
pub fn read(py: Python<'_>, path: PathBuf) -> PyResult<Mesh> {
    let f = py.allow_threads(|| read_mesh(&path)).map_err(mesh_err)?;
    Ok(Mesh::new(f.mesh, f.groups))
}

/// A box of `cells = (nx, ny, nz)` voxels of `size`, as tetrahedra (six per voxel), hexahedra
/// or a conforming mix of hexahedra, prisms, pyramids and tetrahedra.
#[pyfunction]
#[pyo3(signature = (cells, size = (1.0, 1.0, 1.0), kind = "tet"))]
pub fn generate_box(
    py: Python<'_>,
    cells: (usize, usize, usize),
    size: (f64, f64, f64),
    kind: &str,
) -> PyResult<Mesh> {
    use tessera_mesh::generate::{box_mesh, BoxKind};
    let k = match kind {
        "tet" => BoxKind::Tet,
        "hex" => BoxKind::Hex,
        "mixed" => BoxKind::Mixed,
        _ => {
            return Err(value_error(format!(
                "kind {kind:?}: expected \"tet\", \"hex\" or \"mixed\""
            )))
        }
    };
    let n = [cells.0, cells.1, cells.2];
    if n.iter().any(|&x| x == 0 || x > 1000) || n.iter().product::<usize>() > 50_000_000 {
        return Err(value_error(format!(
            "cells {n:?}: each must be in 1..=1000, at most 5e7 voxels"
        )));
    }
    let s = [size.0, size.1, size.2];
    if !s.iter().all(|x| x.is_finite() && *x > 0.0) {
        return Err(value_error(format!(
            "size {s:?} must be positive and finite"
        )));
    }
    Ok(Mesh::new(
        py.allow_threads(|| box_mesh(k, n, s)),
        Vec::new(),
    ))
}

/// VTK's flat cell array and the cell types.
type VtkCells<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u8>>);

/// A relation as offsets, columns, signs (signed relations only) and the column count.
type RelationArrays<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Option<Bound<'py, PyAny>>,
    usize,
);

/// Names of the relations `Mesh.relation` knows, with whether they are signed.
const RELATIONS: &[(&str, bool)] = &[
    ("edge_vertices", true),
    ("face_edges", true),
    ("cell_faces", true),
    ("vertex_edges", true),
    ("edge_faces", true),
    ("face_cells", true),
    ("face_vertices", false),
    ("cell_edges", false),
    ("cell_vertices", false),
    ("vertex_cells", false),
    ("edge_cells", false),
];

#[pymethods]
impl Mesh {
    /// Vertex positions, `(N, 3)` float64: a read-only view of the mesh's storage (no copy).
    #[getter]
    fn points<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let p = slf.get().mesh.positions();
        let v = ArrayView2::from_shape((p.len(), 3), p.as_flattened())
            .map_err(|e| value_error(e.to_string()))?;
        view2(slf, v)
    }

    /// Cells `(M, k)` uint32 in VTK vertex order when all cells have one standard type: a
    /// read-only view of connectivity derived once from ∂3 (no copy on later calls). Mixed
    /// meshes raise `MeshError`: use `vtk_cells()`.
    #[getter]
    fn cells<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyArray2<u32>>> {
        let me = slf.get();
        let c = py_conn(slf.py(), me);
        match c.uniform {
            Some(k) => {
                let v = ArrayView2::from_shape((c.types.len(), k), &c.rows)
                    .map_err(|e| value_error(e.to_string()))?;
                view2(slf, v)
            }
            None if me.mesh.num_cells() == 0 => {
                let v = ArrayView2::from_shape((0, 4), &c.rows[..0])
                    .map_err(|e| value_error(e.to_string()))?;
                view2(slf, v)
            }
            None => Err(raise(
                "MeshError",
                "the mesh mixes cell types (or has general polyhedra): use mesh.vtk_cells() for VTK's flat layout, or mesh.cell_types to select one type",
            )),
        }
    }

    /// VTK cell type id of every cell (10 tetra, 12 hexahedron, 13 wedge, 14 pyramid,
    /// 42 polyhedron): a read-only uint8 view.
    #[getter]
    fn cell_types<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let c = py_conn(slf.py(), slf.get());
        view1(slf, ArrayView1::from(&c.types[..]))
    }

    /// VTK's flat size-prefixed cell array (int64, a copy: VTK interleaves sizes) and the
    /// cell types (uint8), as `pyvista.UnstructuredGrid(cells, types, points)` takes them.
    /// Polyhedra are `size, nfaces, (npoints, ids...) per face`.
    fn vtk_cells<'py>(slf: &Bound<'py, Self>) -> PyResult<VtkCells<'py>> {
        let py = slf.py();
        let c = py_conn(py, slf.get());
        let mut flat = Vec::with_capacity(c.rows.len() + c.types.len());
        for w in c.offsets.windows(2) {
            flat.push((w[1] - w[0]) as i64);
            flat.extend(
                c.rows[w[0] as usize..w[1] as usize]
                    .iter()
                    .map(|&v| v as i64),
            );
        }
        Ok((
            PyArray1::from_vec(py, flat),
            PyArray1::from_slice(py, &c.types),
        ))
    }

    #[getter]
    fn num_vertices(&self) -> usize {
        self.mesh.num_vertices()
    }
    #[getter]
    fn num_edges(&self) -> usize {
        self.mesh.num_edges()
    }
    #[getter]
    fn num_faces(&self) -> usize {
        self.mesh.num_faces()
    }
    #[getter]
    fn num_cells(&self) -> usize {
        self.mesh.num_cells()
    }

    /// Whether every cell is known closed (tetrahedra built from vertex lists, or after a
    /// `validate()` that passed): cell vertices of tetrahedra then read two faces and three
    /// edges a cell. `False` means "not known", not "open".
    #[getter]
    fn cells_known_closed(&self) -> bool {
        self.mesh.cells_known_closed()
    }

    /// Physical groups read from the file (Gmsh physical groups, Medit references, TetGen
    /// regions): a list of dicts `dim, tag, name, entities` (entity indices, uint32).
    #[getter]
    fn groups<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.groups
            .iter()
            .map(|g| {
                let d = PyDict::new(py);
                d.set_item("dim", g.dim)?;
                d.set_item("tag", g.tag)?;
                d.set_item("name", &g.name)?;
                d.set_item("entities", PyArray1::from_slice(py, &g.entities))?;
                Ok(d)
            })
            .collect()
    }

    /// Write the mesh (format by extension, as `tessera mesh convert`; physical groups are
    /// kept by .vtu and .msh). Atomic: a temporary file renamed on success.
    fn write(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let f = MeshFile {
            mesh: self.mesh.clone(),
            groups: self.groups.clone(),
        };
        py.allow_threads(|| write_mesh_file(&f, &path, Default::default()))
            .map_err(mesh_err)
    }

    /// Check every invariant of the boundary operators; raises `MeshError` naming the
    /// offending element.
    fn validate(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| self.mesh.validate()).map_err(mesh_err)
    }

    /// A relation as `(offsets, columns, signs, ncols)`: row `r` is
    /// `columns[offsets[r]:offsets[r+1]]`. Unsigned relations give read-only views of the
    /// cached TCSR arrays (no copy) and `signs = None`; signed ones (∂ and δ) a decoded copy
    /// with int8 signs.
    #[pyo3(signature = (name, device = "auto"))]
    fn relation<'py>(
        slf: &Bound<'py, Self>,
        name: &str,
        device: &str,
    ) -> PyResult<RelationArrays<'py>> {
        let py = slf.py();
        // relations are computed on the CPU (the GPU path keeps them on the device); the
        // device argument is checked so a typo is not silently ignored
        device::parse(device)?;
        let signed = RELATIONS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| *s)
            .ok_or_else(|| {
                let names: Vec<&str> = RELATIONS.iter().map(|(n, _)| *n).collect();
                value_error(format!(
                    "unknown relation {name:?}; known: {}",
                    names.join(", ")
                ))
            })?;
        let me = slf.get();
        let m = &me.mesh;
        if name == "edge_vertices" {
            let ev = m.edge_vertices();
            let n = ev.len();
            let offsets: Vec<u32> = (0..=n as u32).map(|i| 2 * i).collect();
            let cols: Vec<u32> = ev.as_flattened().to_vec();
            let signs: Vec<i8> = (0..n).flat_map(|_| [-1i8, 1]).collect();
            return Ok((
                PyArray1::from_vec(py, offsets).into_any(),
                PyArray1::from_vec(py, cols).into_any(),
                Some(PyArray1::from_vec(py, signs).into_any()),
                m.num_vertices(),
            ));
        }
        let t: &Tcsr = py.allow_threads(|| match name {
            "face_edges" => m.face_edges(),
            "cell_faces" => m.cell_faces(),
            "vertex_edges" => m.vertex_edges(),
            "edge_faces" => m.edge_faces(),
            "face_cells" => m.face_cells(),
            "face_vertices" => m.face_vertices(),
            "cell_edges" => m.cell_edges(),
            "cell_vertices" => m.cell_vertices(),
            "vertex_cells" => m.vertex_cells(),
            _ => m.edge_cells(),
        });
        let offsets = view1(slf, ArrayView1::from(t.offsets()))?.into_any();
        if signed {
            let (cols, signs): (Vec<u32>, Vec<i8>) = t
                .columns()
                .iter()
                .map(|&e| {
                    let (c, s) = decode(e);
                    (c, s as i8)
                })
                .unzip();
            Ok((
                offsets,
                PyArray1::from_vec(py, cols).into_any(),
                Some(PyArray1::from_vec(py, signs).into_any()),
                t.ncols(),
            ))
        } else {
            // unsigned relations store non-negative entries: the encoded array is the index array
            Ok((
                offsets,
                view1(slf, ArrayView1::from(t.columns()))?.into_any(),
                None,
                t.ncols(),
            ))
        }
    }

    /// Counts as `tessera mesh info --json` prints them (JSON text; the Python wrapper
    /// returns a dict).
    #[pyo3(signature = (device = "auto"))]
    fn _info_json(&self, py: Python<'_>, device: &str) -> PyResult<String> {
        let gpu = device::open(py, device)?;
        let m = &self.mesh;
        let (b, v, ct) = py.allow_threads(|| {
            let b = boundary_on(gpu.as_deref(), m);
            (b, tessera_mesh::quality::validity(m), cell_type_counts(m))
        });
        let b = b.map_err(mesh_err)?;
        let j = serde_json::json!({
            "vertices": m.num_vertices(),
            "edges": m.num_edges(),
            "faces": m.num_faces(),
            "cells": m.num_cells(),
            "boundary_faces": b.faces.len(),
            "boundary_edges": b.edges.len(),
            "boundary_vertices": b.vertices.len(),
            "euler_characteristic": m.euler_characteristic(),
            "manifold": b.manifold,
            "cell_types": ct,
            "topology_bytes": m.topology_bytes(),
            "geometry_bytes": m.geometry_bytes(),
            "inverted_cells": v.inverted,
            "degenerate_cells": v.degenerate,
            "groups": self.groups.iter().map(|g| serde_json::json!({"dim": g.dim, "tag": g.tag, "name": g.name, "entities": g.entities.len()})).collect::<Vec<_>>(),
            "device": device::name_of(&gpu),
        });
        Ok(j.to_string())
    }

    /// The boundary surface (dissertation §3.4.2): `(points (S, 3), polygon_offsets,
    /// polygons, vertex_map, faces)` with polygons outward, `vertex_map` the mesh vertex of
    /// each surface vertex and `faces` the TCSR-encoded mesh face of each polygon. Copies.
    #[pyo3(signature = (device = "auto"))]
    #[allow(clippy::type_complexity)]
    fn _boundary<'py>(
        &self,
        py: Python<'py>,
        device: &str,
    ) -> PyResult<(
        Bound<'py, PyArray2<f64>>,
        Bound<'py, PyArray1<u32>>,
        Bound<'py, PyArray1<u32>>,
        Bound<'py, PyArray1<u32>>,
        Bound<'py, PyArray1<i32>>,
    )> {
        let gpu = device::open(py, device)?;
        let m = &self.mesh;
        let (b, s) = py
            .allow_threads(|| {
                boundary_on(gpu.as_deref(), m).map(|b| {
                    let s = b.surface(m);
                    (b, s)
                })
            })
            .map_err(mesh_err)?;
        let n = s.positions.len();
        let pts = PyArray1::from_vec(py, s.positions.into_flattened()).reshape([n, 3])?;
        Ok((
            pts,
            PyArray1::from_vec(py, s.polygon_offsets),
            PyArray1::from_vec(py, s.polygon_vertices),
            PyArray1::from_vec(py, s.vertex_map),
            PyArray1::from_vec(py, b.faces),
        ))
    }

    /// Laplacian smoothing of the inner vertices (dissertation §3.4.2), `method = "safe"`
    /// (moves that would invert or degrade a cell below `min_quality` are rejected) or
    /// `"plain"`; returns the smoothed mesh and the report (JSON text).
    #[pyo3(signature = (iterations = 10, method = "safe", min_quality = 0.1, device = "auto"))]
    fn _smooth(
        &self,
        py: Python<'_>,
        iterations: usize,
        method: &str,
        min_quality: f64,
        device: &str,
    ) -> PyResult<(Mesh, String)> {
        let method = match method {
            "safe" => SmoothMethod::Safe,
            "plain" => SmoothMethod::Plain,
            _ => {
                return Err(value_error(format!(
                    "method {method:?}: expected \"safe\" or \"plain\""
                )))
            }
        };
        if !(0.0..1.0).contains(&min_quality) {
            return Err(value_error(format!(
                "min_quality {min_quality} is outside 0..1 (a mean ratio; 1 is the regular tetrahedron)"
            )));
        }
        let params = SmoothParams {
            iterations,
            method,
            min_quality,
        };
        let gpu = device::open(py, device)?;
        let mut m = self.mesh.clone();
        let report = py
            .allow_threads(|| match gpu.as_deref() {
                Some(g) => tessera_mesh::smooth::smooth_by(&mut m, &params, |m, setup| {
                    let mut dm = DeviceMesh::upload(g, m)?;
                    let stats = match setup {
                        None => {
                            dm.laplacian_smooth(params.iterations)?;
                            Default::default()
                        }
                        Some(s) => dm.safe_smooth(s, params.iterations)?,
                    };
                    Ok((dm.download_positions()?, stats))
                }),
                None => Ok(tessera_mesh::smooth::smooth(&mut m, &params)),
            })
            .map_err(mesh_err)?;
        m.purge_caches();
        let mut j = serde_json::to_value(&report).map_err(|e| value_error(e.to_string()))?;
        j["device"] = device::name_of(&gpu).into();
        Ok((Mesh::new(m, self.groups.clone()), j.to_string()))
    }

    /// `levels` of volumetric Catmull-Clark subdivision (dissertation §3.4.3): every cell
    /// becomes hexahedra. Physical groups are not carried over.
    #[pyo3(signature = (levels = 1, device = "auto"))]
    fn subdivide(&self, py: Python<'_>, levels: usize, device: &str) -> PyResult<Mesh> {
        if levels > 6 {
            return Err(value_error(format!(
                "levels = {levels}: each level multiplies the cells by about 8; at most 6"
            )));
        }
        let gpu = device::open(py, device)?;
        let m = &self.mesh;
        let out = py
            .allow_threads(|| match gpu.as_deref() {
                Some(g) => {
                    use tessera_mesh::cuda::subdivide::{catmull_clark_gpu_with, precompute};
                    let mut cur = DeviceMesh::upload(g, m)?;
                    for _ in 0..levels {
                        let next = {
                            let rel = precompute(&cur)?;
                            catmull_clark_gpu_with(&cur, &rel)?
                        };
                        cur = next;
                    }
                    cur.download()
                }
                None => tessera_mesh::subdivide::catmull_clark_levels(m, levels),
            })
            .map_err(mesh_err)?;
        Ok(Mesh::new(out, Vec::new()))
    }

    fn __repr__(&self) -> String {
        let m = &self.mesh;
        format!(
            "tessera.Mesh({} vertices, {} edges, {} faces, {} cells)",
            m.num_vertices(),
            m.num_edges(),
            m.num_faces(),
            m.num_cells()
        )
    }
}

/// Connectivity is derived on first use; without the GIL when it is.
fn py_conn<'a>(py: Python<'_>, me: &'a Mesh) -> &'a Connectivity {
    if let Some(c) = me.conn.get() {
        return c;
    }
    py.allow_threads(|| me.conn())
}

/// Boundary extraction on the CPU or a GPU (the GPU result equals the CPU's exactly:
/// conformance test `boundary_matches_reference` in tessera-mesh).
fn boundary_on(
    gpu: Option<&tessera_gpu::Gpu>,
    m: &PolyMesh,
) -> Result<tessera_mesh::boundary::Boundary, tessera_mesh::MeshError> {
    match gpu {
        Some(g) => {
            let mut dm = DeviceMesh::upload(g, m)?;
            let db = dm.boundary()?;
            db.download(g)
        }
        None => Ok(extract_boundary(m)),
    }
}

/// Cells counted by their type (classified by their faces, as `tessera mesh info`).
fn cell_type_counts(m: &PolyMesh) -> serde_json::Value {
    let cf = m.cell_faces();
    let fe = m.face_edges();
    let mut t = [0usize; 5];
    let mut sizes = Vec::with_capacity(8);
    for c in 0..m.num_cells() {
        sizes.clear();
        sizes.extend(
            cf.row(c)
                .iter()
                .map(|&v| fe.row_len(tessera_sparse::tcsr::col(v) as usize)),
        );
        t[CellType::classify(&sizes) as usize] += 1;
    }
    serde_json::json!({
        "tetrahedron": t[CellType::Tetrahedron as usize],
        "hexahedron": t[CellType::Hexahedron as usize],
        "prism": t[CellType::Prism as usize],
        "pyramid": t[CellType::Pyramid as usize],
        "polyhedron": t[CellType::Polyhedron as usize],
    })
}
