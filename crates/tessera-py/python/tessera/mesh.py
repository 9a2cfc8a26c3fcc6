"""Volumetric meshes (dissertation §3.4): :class:`Mesh` and its NumPy, SciPy, meshio and
PyVista conversions.

Copies, in one place:

* ``Mesh.from_arrays``: the points are copied once into the mesh (float64, C order,
  any input strides: a non-contiguous or float32 array costs the same single copy, made
  while converting; never a second one); the cell array once into uint32.
* ``mesh.points``, ``mesh.cells``, ``mesh.cell_types`` and unsigned relations
  (``cell_vertices``, ``face_vertices``, ``cell_edges``, ``vertex_cells``, ``edge_cells``)
  are read-only views of the mesh's storage: no copy (``np.array(a)`` makes a writable one).
  ``mesh.cells`` is derived from the boundary operators on first use and kept.
* ``vtk_cells()``, signed relations (∂ and δ, whose signs are decoded), ``boundary()``,
  ``to_meshio()`` and ``to_pyvista()`` copy.
"""

from __future__ import annotations

import json
import os
from typing import Optional, Tuple, Union

import numpy as np

from . import _tessera
from ._errors import MeshError

PathLike = Union[str, "os.PathLike[str]"]

# meshio cell block names <-> VTK type ids
_MESHIO_TO_VTK = {"tetra": 10, "hexahedron": 12, "wedge": 13, "pyramid": 14}
_VTK_TO_MESHIO = {v: k for k, v in _MESHIO_TO_VTK.items()}
_VTK_SIZES = {10: 4, 12: 8, 13: 6, 14: 5}

_SIGNED = ("edge_vertices", "face_edges", "cell_faces", "vertex_edges", "edge_faces", "face_cells")


def _array(a, what: str) -> np.ndarray:
    # lists and tuples become arrays; arrays pass through untouched (no copy)
    if isinstance(a, np.ndarray):
        return a
    if isinstance(a, (list, tuple)):
        return np.asarray(a)
    raise ValueError(f"{what} must be a NumPy array, got {type(a).__name__}")


class Mesh:
    """A volumetric mesh: tetrahedra, hexahedra, prisms (wedges), pyramids and general
    polyhedra, stored by its boundary operators (dissertation §3.4). Immutable: operations
    return new meshes, so the views it hands out stay valid."""

    __slots__ = ("_m",)

    def __init__(self, native: "_tessera.NativeMesh"):
        if not isinstance(native, _tessera.NativeMesh):
            raise TypeError(
                "construct meshes with tessera.Mesh.from_arrays, tessera.read or tessera.generate_box"
            )
        self._m = native

    # construction -----------------------------------------------------------------------
    @staticmethod
    def from_arrays(points, cells, cell_type: Optional[str] = None, *, cell_types=None) -> "Mesh":
        """A mesh from NumPy arrays.

        * ``points``: ``(N, 3)`` float64 (float32 accepted), finite.
        * ``cells``: ``(M, k)`` integer vertex indices of one standard type (``cell_type``
          ``"tetra"``, ``"hexahedron"``, ``"wedge"``, ``"pyramid"``; guessed from ``k`` when
          omitted) in VTK/meshio vertex order; or VTK's flat size-prefixed 1-D array (as
          ``pyvista.UnstructuredGrid.cells``) with ``cell_types`` (VTK ids 10, 12, 13, 14, and
          42 for polyhedra given as ``size, nfaces, (npoints, ids...) per face``).

        Cells are oriented outward by their signed volume (inverted input is repaired).
        Raises ``ValueError`` for wrong dtypes, shapes, out-of-range indices and NaN or
        infinite coordinates, :class:`MeshError` for invalid topology (naming the cell).
        The GIL is released while the mesh is built."""
        points = _array(points, "points")
        cells = _array(cells, "cells")
        if cell_types is not None:
            cell_types = _array(cell_types, "cell_types")
        return Mesh(_tessera.from_arrays(points, cells, cell_type, cell_types))

    @staticmethod
    def read(path: PathLike) -> "Mesh":
        """Read a mesh file: .msh (Gmsh 2.2/4.1), .mesh (Medit), .node/.ele (TetGen), .ovm,
        .vtu (optionally .gz but .vtu). Parse errors raise :class:`ParseError` with
        ``path`` and ``line``."""
        return Mesh(_tessera.read(os.fspath(path)))

    @staticmethod
    def from_meshio(m) -> "Mesh":
        """A mesh from a ``meshio.Mesh`` (its tetra, hexahedron, wedge and pyramid blocks,
        in block order; other blocks such as boundary triangles are skipped)."""
        blocks = [(b.type, np.asarray(b.data)) for b in m.cells if b.type in _MESHIO_TO_VTK]
        if not blocks:
            raise MeshError(
                "the meshio mesh has no volume cells (tetra, hexahedron, wedge or pyramid)"
            )
        points = np.asarray(m.points)
        if points.ndim == 2 and points.shape[1] == 2:
            raise ValueError("points must have shape (N, 3); meshio gave 2-D points")
        if len(blocks) == 1:
            return Mesh.from_arrays(points, blocks[0][1], blocks[0][0])
        flat, types = [], []
        for t, data in blocks:
            k = data.shape[1]
            flat.append(np.hstack([np.full((len(data), 1), k, dtype=np.int64), data.astype(np.int64)]).ravel())
            types.append(np.full(len(data), _MESHIO_TO_VTK[t], dtype=np.uint8))
        return Mesh.from_arrays(points, np.concatenate(flat), cell_types=np.concatenate(types))

    # arrays -----------------------------------------------------------------------------
    @property
    def points(self) -> np.ndarray:
        """``(N, 3)`` float64, a read-only view (no copy)."""
        return self._m.points

    @property
    def cells(self) -> np.ndarray:
        """``(M, k)`` uint32 in VTK vertex order when all cells have one standard type: a
        read-only view (derived once, then no copy). Mixed meshes raise :class:`MeshError`;
        use :meth:`vtk_cells` or :attr:`cell_types`."""
        return self._m.cells

    @property
    def cell_types(self) -> np.ndarray:
        """VTK type id per cell (uint8, read-only view): 10 tetra, 12 hexahedron, 13 wedge,
        14 pyramid, 42 polyhedron."""
        return self._m.cell_types

    def vtk_cells(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(cells, cell_types)`` in VTK's flat size-prefixed layout (int64, uint8), as
        ``pyvista.UnstructuredGrid`` takes them. A copy."""
        return self._m.vtk_cells()

    @property
    def num_vertices(self) -> int:
        return self._m.num_vertices

    @property
    def num_edges(self) -> int:
        return self._m.num_edges

    @property
    def num_faces(self) -> int:
        return self._m.num_faces

    @property
    def num_cells(self) -> int:
        return self._m.num_cells

    @property
    def groups(self) -> list:
        """Physical groups read from the file: dicts ``dim, tag, name, entities``."""
        return self._m.groups

    @property
    def cells_known_closed(self) -> bool:
        """Whether every cell is known closed (tetrahedra built from vertex lists, or after a
        :meth:`validate` that passed); ``False`` means "not known", not "open"."""
        return self._m.cells_known_closed

    def __len__(self) -> int:
        return self._m.num_cells

    def __repr__(self) -> str:
        return self._m.__repr__()

    # files ------------------------------------------------------------------------------
    def write(self, path: PathLike) -> None:
        """Write the mesh, format by extension (.vtu, .msh 4.1, .mesh, .node/.ele, .ovm;
        ``.gz`` compresses all but .vtu). Atomic: nothing is left half-written."""
        self._m.write(os.fspath(path))

    def validate(self) -> None:
        """Check every invariant of the boundary operators; raises :class:`MeshError`
        naming the offending element."""
        self._m.validate()

    # operations -------------------------------------------------------------------------
    def info(self, device: str = "auto") -> dict:
        """The counts ``tessera mesh info --json`` prints: vertices, edges, faces, cells,
        boundary faces/edges/vertices, Euler characteristic, manifoldness, cell types,
        inverted and degenerate cells, bytes, groups."""
        return json.loads(self._m._info_json(device))

    def boundary(self, device: str = "auto") -> "Surface":
        """The boundary surface (dissertation §3.4.2), polygons oriented outward."""
        pts, offs, loops, vmap, faces = self._m._boundary(device)
        return Surface(pts, offs, loops, vmap, faces)

    def smooth(self, iterations: int = 10, method: str = "safe", min_quality: float = 0.1,
               device: str = "auto", return_report: bool = False):
        """Laplacian smoothing of the inner vertices (dissertation §3.4.2). ``"safe"``
        rejects moves that would invert a cell or push its mean ratio below
        ``min_quality``; ``"plain"`` takes every move. Returns the smoothed mesh (and the
        report dict when ``return_report``)."""
        m, rep = self._m._smooth(iterations, method, min_quality, device)
        mesh = Mesh(m)
        return (mesh, json.loads(rep)) if return_report else mesh

    def subdivide(self, levels: int = 1, device: str = "auto") -> "Mesh":
        """``levels`` of volumetric Catmull-Clark subdivision (dissertation §3.4.3): all
        cells become hexahedra."""
        return Mesh(self._m.subdivide(levels, device))

    # relations --------------------------------------------------------------------------
    def relation(self, name: str, format: str = "csr"):
        """A relation of dissertation §3.3-3.4 as a ``scipy.sparse.csr_matrix`` (entries
        ±1 for the signed ∂ and δ relations, 1 for incidence sets) or, with
        ``format="arrays"``, ``(offsets, indices)`` (plus ``signs`` for signed ones).
        Names: edge_vertices, face_edges, cell_faces (∂1-∂3), vertex_edges, edge_faces,
        face_cells (δ1-δ3), face_vertices, cell_edges, cell_vertices, vertex_cells,
        edge_cells."""
        offsets, indices, signs, ncols = self._m.relation(name)
        if format == "arrays":
            return (offsets, indices) if signs is None else (offsets, indices, signs)
        if format != "csr":
            raise ValueError(f'format {format!r}: expected "csr" or "arrays"')
        import scipy.sparse as sp

        data = signs if signs is not None else np.ones(len(indices), dtype=np.int8)
        return sp.csr_matrix(
            (data, indices.astype(np.int32, copy=False), offsets.astype(np.int64, copy=False)),
            shape=(len(offsets) - 1, ncols),
        )

    def cell_vertices(self, format: str = "csr"):
        """cell -> vertices (sorted), ∂̂3²."""
        return self.relation("cell_vertices", format)

    def cell_edges(self, format: str = "csr"):
        """cell -> edges (sorted), ∂̂3¹."""
        return self.relation("cell_edges", format)

    def cell_faces(self, format: str = "csr"):
        """cell -> signed faces, ∂3."""
        return self.relation("cell_faces", format)

    def face_cells(self, format: str = "csr"):
        """face -> signed cells, δ3 = ∂3ᵀ."""
        return self.relation("face_cells", format)

    def face_vertices(self, format: str = "csr"):
        """face -> vertex loop (in loop order), ∂̂2¹."""
        return self.relation("face_vertices", format)

    def face_edges(self, format: str = "csr"):
        """face -> signed edges, ∂2."""
        return self.relation("face_edges", format)

    def edge_faces(self, format: str = "csr"):
        """edge -> signed faces, δ2."""
        return self.relation("edge_faces", format)

    def edge_vertices(self, format: str = "csr"):
        """edge -> (-first, +second vertex), ∂1."""
        return self.relation("edge_vertices", format)

    def vertex_edges(self, format: str = "csr"):
        """vertex -> signed edges, δ1."""
        return self.relation("vertex_edges", format)

    def vertex_cells(self, format: str = "csr"):
        """vertex -> cells."""
        return self.relation("vertex_cells", format)

    def edge_cells(self, format: str = "csr"):
        """edge -> cells."""
        return self.relation("edge_cells", format)

    # interop ----------------------------------------------------------------------------
    def to_meshio(self):
        """A ``meshio.Mesh`` (copies): one cell block per run of cells of one type, in cell
        order. General polyhedra are not supported by meshio's blocks and raise
        :class:`MeshError`."""
        import meshio

        types = self.cell_types
        if np.any(types == 42):
            raise MeshError("the mesh has general polyhedra, which meshio cell blocks cannot hold")
        flat, _ = self.vtk_cells()
        blocks = []
        if len(types) == 0:
            return meshio.Mesh(np.array(self.points), [])
        # cells are stored as size, ids...: sizes are fixed per type, so each run is a reshape
        starts = np.flatnonzero(np.r_[True, types[1:] != types[:-1]])
        ends = np.r_[starts[1:], len(types)]
        pos = 0
        for s, e in zip(starts, ends):
            t = int(types[s])
            k = _VTK_SIZES[t]
            n = int(e - s)
            block = flat[pos:pos + n * (k + 1)].reshape(n, k + 1)[:, 1:]
            blocks.append((_VTK_TO_MESHIO[t], np.ascontiguousarray(block)))
            pos += n * (k + 1)
        return meshio.Mesh(np.array(self.points), blocks)

    def to_pyvista(self):
        """A ``pyvista.UnstructuredGrid`` (copies; raises ImportError without PyVista)."""
        import pyvista as pv

        cells, types = self.vtk_cells()
        return pv.UnstructuredGrid(cells, types, np.array(self.points))


class Surface:
    """A polygonal surface: the boundary of a volumetric mesh (dissertation §3.4.2).

    ``points`` (S, 3); polygon ``i`` is ``polygons[offsets[i]:offsets[i+1]]`` (surface
    vertex indices, counter-clockwise seen from outside); ``vertex_map`` the mesh vertex of
    each surface vertex; ``mesh_faces`` the mesh face of each polygon."""

    def __init__(self, points, offsets, polygons, vertex_map, faces):
        self.points = points
        self.offsets = offsets
        self.polygons = polygons
        self.vertex_map = vertex_map
        enc = faces.astype(np.int64)
        self.mesh_faces = np.where(enc < 0, ~enc, enc)

    @property
    def num_polygons(self) -> int:
        return len(self.offsets) - 1

    @property
    def triangles(self) -> np.ndarray:
        """``(F, 3)`` when every polygon is a triangle (else ValueError)."""
        sizes = np.diff(self.offsets)
        if not np.all(sizes == 3):
            raise ValueError("the surface has polygons that are not triangles")
        return self.polygons.reshape(-1, 3)

    def to_pyvista(self):
        """A ``pyvista.PolyData`` (copies)."""
        import pyvista as pv

        sizes = np.diff(self.offsets).astype(np.int64)
        faces = np.insert(self.polygons.astype(np.int64), self.offsets[:-1].astype(np.int64), sizes)
        return pv.PolyData(np.array(self.points), faces)

    def to_meshio(self):
        """A ``meshio.Mesh`` with triangle and quad blocks (copies)."""
        import meshio

        sizes = np.diff(self.offsets)
        blocks = []
        for k, name in ((3, "triangle"), (4, "quad")):
            sel = np.flatnonzero(sizes == k)
            if len(sel):
                idx = self.offsets[sel][:, None].astype(np.int64) + np.arange(k)
                blocks.append((name, self.polygons[idx]))
        if np.any((sizes != 3) & (sizes != 4)):
            raise MeshError("the surface has polygons of more than 4 vertices")
        return meshio.Mesh(np.array(self.points), blocks)

    def __repr__(self) -> str:
        return f"tessera.Surface({len(self.points)} vertices, {self.num_polygons} polygons)"


def read(path: PathLike) -> Mesh:
    """Read a mesh file (see :meth:`Mesh.read`)."""
    return Mesh.read(path)


def from_arrays(points, cells, cell_type: Optional[str] = None, *, cell_types=None) -> Mesh:
    """See :meth:`Mesh.from_arrays`."""
    return Mesh.from_arrays(points, cells, cell_type, cell_types=cell_types)


def from_meshio(m) -> Mesh:
    """See :meth:`Mesh.from_meshio`."""
    return Mesh.from_meshio(m)


def generate_box(cells=(4, 4, 4), size=(1.0, 1.0, 1.0), kind: str = "tet") -> Mesh:
    """A box of ``cells`` voxels of total ``size``: ``kind="tet"`` (six tetrahedra per
    voxel), ``"hex"``, or ``"mixed"`` (hexahedra, prisms, pyramids and tetrahedra)."""
    return Mesh(_tessera.generate_box(tuple(int(c) for c in cells), tuple(float(s) for s in size), kind))
