"""Bad input raises a clear exception, never crashes the interpreter."""

import numpy as np
import pytest

import tessera
from conftest import FIXTURES

PTS = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], dtype=np.float64)
TETS = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])


@pytest.mark.parametrize("points, msg", [
    (PTS.astype(np.int64), "float64"),
    (PTS.astype(np.complex128), "float64"),
    (PTS.astype(object), "float64"),
    (PTS[:, :2], r"shape \(N, 3\)"),
    (PTS.ravel(), r"shape \(N, 3\)"),
    ("points", "NumPy array"),
])
def test_bad_points(points, msg):
    with pytest.raises(ValueError, match=msg):
        tessera.Mesh.from_arrays(points, TETS)


def test_nan_and_inf_coordinates():
    for bad in (np.nan, np.inf):
        p = PTS.copy()
        p[3, 1] = bad
        with pytest.raises(ValueError, match=r"points\[3\].*non-finite"):
            tessera.Mesh.from_arrays(p, TETS)


@pytest.mark.parametrize("cells, msg", [
    (TETS.astype(np.float64), "integer"),
    (np.array([[0, 1, 2, 5]]), r"cells\[0, 3\] = 5 is out of range"),
    (np.array([[0, 1, 2, 3], [0, 1, -1, 3]]), r"cells\[1, 2\] = -1 is out of range"),
    (np.array([[0, 1, 2]]), r"cell_type|shape"),
    (np.array([0, 1, 2, 3]), r"shape \(M, k\)"),
])
def test_bad_cells(cells, msg):
    with pytest.raises(ValueError, match=msg):
        tessera.Mesh.from_arrays(PTS, cells)


def test_bad_topology_names_the_cell():
    with pytest.raises(tessera.MeshError, match="cell 1"):
        tessera.Mesh.from_arrays(PTS, np.array([[0, 1, 2, 3], [1, 1, 3, 4]]))
    flat = PTS.copy()
    flat[3] = [0.5, 0.5, 0.0]  # cell 0 lies in a plane
    with pytest.raises(tessera.MeshError):
        tessera.Mesh.from_arrays(flat, TETS[:1])
    with pytest.raises(ValueError, match="hexahedron"):
        tessera.Mesh.from_arrays(PTS, TETS, "hexahedron")
    with pytest.raises(ValueError, match="cell_type"):
        tessera.Mesh.from_arrays(PTS, TETS, "triangle")


def test_bad_vtk_flat_arrays():
    ct = np.array([10], dtype=np.uint8)
    with pytest.raises(tessera.MeshError, match="ends"):
        tessera.Mesh.from_arrays(PTS, np.array([4, 0, 1, 2]), cell_types=ct)
    with pytest.raises(tessera.MeshError, match="VTK cell type 5"):
        tessera.Mesh.from_arrays(PTS, np.array([3, 0, 1, 2]), cell_types=np.array([5]))
    with pytest.raises(tessera.MeshError, match="out of range"):
        tessera.Mesh.from_arrays(PTS, np.array([4, 0, 1, 2, 9]), cell_types=ct)
    with pytest.raises(ValueError, match="cell_types"):
        tessera.Mesh.from_arrays(PTS, np.array([4, 0, 1, 2, 3]), cell_types=np.array([300]))


def test_parse_errors_carry_file_and_line():
    f = FIXTURES / "malformed" / "m22-nan.msh"
    with pytest.raises(tessera.ParseError) as e:
        tessera.read(f)
    assert e.value.path.endswith("m22-nan.msh") and isinstance(e.value.line, int)
    assert isinstance(e.value, tessera.MeshError) and isinstance(e.value, ValueError)
    for bad in sorted((FIXTURES / "malformed").iterdir()):
        with pytest.raises(tessera.TesseraError):
            tessera.read(bad)
    with pytest.raises(FileNotFoundError):
        tessera.read("/nonexistent/file.msh")
    with pytest.raises(tessera.MeshError, match="extension"):
        tessera.read(str(FIXTURES / "mixed-v41.msh") + ".txt")


def test_bad_device_and_fem_arguments():
    g = tessera.generate_box((2, 2, 2))
    with pytest.raises(ValueError, match="device"):
        g.info(device="tpu")
    with pytest.raises(tessera.DeviceError):
        g.info(device="cuda:4096")
    with pytest.raises(tessera.FemError, match="material"):
        tessera.fem.assemble(g, youngs=-1.0)
    with pytest.raises(tessera.FemError, match="tetrahedral"):
        tessera.fem.assemble(tessera.generate_box((2, 2, 2), kind="hex"))
    with pytest.raises(ValueError, match="order"):
        tessera.fem.assemble(g, order=0)
    with pytest.raises(ValueError, match="matrix"):
        tessera.fem.assemble(g, matrix="damping")
    with pytest.raises(tessera.ProblemError):
        tessera.fem.solve({"title": "x", "order": 1, "mesh": {"generate": {"box": {"cells": [2, 2, 2]}}}, "material": {"youngs": 1.0, "poisson": 0.3}, "bogus": 1})
    with pytest.raises(tessera.TesseraError):
        tessera.fem.solve({"title": "x", "order": 1, "mesh": {"file": "/nonexistent.msh"}, "material": {"youngs": 1.0, "poisson": 0.3}})
    with pytest.raises(ValueError, match="levels"):
        g.subdivide(50)


def test_query_errors():
    with pytest.raises(tessera.QueryError, match="bytes"):
        tessera.query.compile("sqrt(u^2 +", ["u"])
    with pytest.raises(tessera.QueryError, match="unknown field"):
        tessera.query.compile("w + 1", ["u"])
    q = tessera.query.compile("u + v", ["u", "v"])
    with pytest.raises(tessera.QueryError, match="missing"):
        q.eval({"u": np.zeros(3)})
    with pytest.raises(ValueError, match="shapes"):
        q.eval({"u": np.zeros(3), "v": np.zeros(4)})
    with pytest.raises(ValueError, match="dtype"):
        q.eval({"u": np.zeros(3, dtype=complex), "v": np.zeros(3)})
