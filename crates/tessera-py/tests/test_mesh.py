"""Meshes: construction from NumPy arrays, views without copies, files, meshio interop,
relations, boundary, smoothing, subdivision, and agreement with `tessera mesh info`."""

import json
import subprocess

import numpy as np
import pytest

import tessera
from conftest import FIXTURES, need

# two tetrahedra sharing a face (dissertation Fig. 3.5 style)
PTS = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], dtype=np.float64)
TETS = np.array([[0, 1, 2, 3], [1, 2, 3, 4]], dtype=np.int64)


def test_two_tets_counts_and_views():
    m = tessera.Mesh.from_arrays(PTS, TETS)
    assert (m.num_vertices, m.num_edges, m.num_faces, m.num_cells) == (5, 9, 7, 2)
    info = m.info(device="cpu")
    assert info["euler_characteristic"] == 5 - 9 + 7 - 2
    assert info["boundary_faces"] == 6 and info["cell_types"]["tetrahedron"] == 2
    p = m.points
    assert p.dtype == np.float64 and p.shape == (5, 3) and not p.flags.writeable
    np.testing.assert_array_equal(p, PTS)
    # views of the mesh's storage: two reads share memory, no copy
    assert np.shares_memory(m.points, p)
    c = m.cells
    assert c.shape == (2, 4) and c.dtype == np.uint32 and not c.flags.writeable
    assert np.shares_memory(m.cells, c)
    # the same cells (orientation may be repaired, so compare vertex sets)
    assert [sorted(r) for r in c.tolist()] == [sorted(r) for r in TETS.tolist()]
    with pytest.raises(ValueError):
        p[0, 0] = 5.0


def test_view_keeps_mesh_alive():
    p = tessera.Mesh.from_arrays(PTS, TETS).points
    import gc

    gc.collect()
    np.testing.assert_array_equal(p, PTS)


def test_generated_box_roundtrip_through_arrays():
    for kind, ncells, types in (("tet", 6 * 27, {10}), ("hex", 27, {12}), ("mixed", None, None)):
        g = tessera.generate_box((3, 3, 3), (1.0, 2.0, 3.0), kind)
        if ncells is not None:
            assert g.num_cells == ncells
            assert set(g.cell_types.tolist()) == types
        flat, ct = g.vtk_cells()
        m = tessera.Mesh.from_arrays(g.points, flat, cell_types=ct)
        assert (m.num_vertices, m.num_edges, m.num_faces, m.num_cells) == (
            g.num_vertices, g.num_edges, g.num_faces, g.num_cells)
        assert m.info(device="cpu") == g.info(device="cpu")


def test_cells_known_closed():
    # tetrahedra from vertex lists are closed by construction; hexahedra once validated
    assert tessera.Mesh.from_arrays(PTS, TETS).cells_known_closed
    g = tessera.generate_box((2, 2, 2), kind="hex")
    assert not g.cells_known_closed
    g.validate()
    assert g.cells_known_closed
    # cell vertices of the known-closed tetrahedra: rows of four distinct vertices
    t = tessera.generate_box((3, 2, 2), kind="tet")
    assert t.cells_known_closed
    offs, cols = t.cell_vertices(format="arrays")
    assert offs.tolist() == list(range(0, 4 * t.num_cells + 1, 4))
    assert all(len(set(cols[4 * c:4 * c + 4].tolist())) == 4 for c in range(t.num_cells))


def test_non_contiguous_inputs_accepted():
    g = tessera.generate_box((2, 2, 2), kind="tet")
    wide = np.zeros((g.num_vertices, 5))
    wide[:, 1:4] = g.points
    pts = wide[:, 1:4]  # strided view
    assert not pts.flags.c_contiguous
    cells_f = np.asfortranarray(g.cells.astype(np.int32))
    m = tessera.Mesh.from_arrays(pts, cells_f, "tetra")
    np.testing.assert_array_equal(m.points, g.points)
    np.testing.assert_array_equal(m.cells, g.cells)
    # float32 points and the transposed (scikit-fem) layout through .T
    m32 = tessera.Mesh.from_arrays(np.ascontiguousarray(g.points.T).astype(np.float32).T, g.cells.T.copy().T)
    assert m32.num_cells == g.num_cells


def test_polyhedron_vtk_layout():
    # a cube as one general polyhedron (VTK 42): size, nfaces, (n, ids) per face
    pts = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0],
                    [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]], dtype=float)
    faces = [[0, 3, 2, 1], [4, 5, 6, 7], [0, 1, 5, 4], [1, 2, 6, 5], [2, 3, 7, 6], [3, 0, 4, 7]]
    stream = [len(faces)] + [x for f in faces for x in [len(f)] + f]
    # plus a tetrahedron on top sharing nothing but the top face's vertex 4..
    cells = np.array([len(stream)] + stream + [4, 4, 5, 6, 8], dtype=np.int64)
    pts = np.vstack([pts, [[0.5, 0.5, 2.0]]])
    m = tessera.Mesh.from_arrays(pts, cells, cell_types=np.array([42, 10], dtype=np.uint8))
    assert m.num_cells == 2
    info = m.info(device="cpu")
    # the cube's faces match a standard hexahedron: counted as one
    assert info["cell_types"]["hexahedron"] + info["cell_types"]["polyhedron"] == 1
    with pytest.raises(tessera.MeshError, match="mixes cell types"):
        m.cells


def test_relations_and_boundary_of_boundary():
    m = tessera.generate_box((3, 2, 2), kind="mixed")
    d2 = m.face_edges()
    d3 = m.cell_faces()
    d1 = m.edge_vertices()
    assert d3.shape == (m.num_cells, m.num_faces) and d2.shape == (m.num_faces, m.num_edges)
    # boundary of a boundary is zero (dissertation §3.3)
    assert abs(d3 @ d2).sum() == 0
    assert abs(d2 @ d1).sum() == 0
    # δ3 = ∂3ᵀ
    assert abs(m.face_cells() - d3.T).sum() == 0
    # unsigned relations are views of the cached arrays: no copy on the second call
    o1, i1 = m.cell_vertices(format="arrays")
    o2, i2 = m.cell_vertices(format="arrays")
    assert np.shares_memory(i1, i2) and not i1.flags.writeable
    cv = m.cell_vertices()
    assert cv.shape == (m.num_cells, m.num_vertices)
    with pytest.raises(ValueError, match="unknown relation"):
        m.relation("cell_cells")


def test_boundary_smooth_subdivide():
    m = tessera.generate_box((3, 3, 3), kind="tet")
    s = m.boundary(device="cpu")
    assert s.num_polygons == 2 * 6 * 9
    tri = s.triangles
    # closed surface of a ball: V - E + F = 2
    edges = {tuple(sorted(e)) for t in tri.tolist() for e in ((t[0], t[1]), (t[1], t[2]), (t[2], t[0]))}
    assert len(s.points) - len(edges) + len(tri) == 2
    np.testing.assert_array_equal(s.points, m.points[s.vertex_map])
    # smoothing moves only inner vertices and returns a new mesh
    rng = np.random.default_rng(7)
    p = m.points.copy()
    inner = np.all((p > 1e-9) & (p < 1 - 1e-9), axis=1)
    p[inner] += rng.uniform(-0.05, 0.05, (inner.sum(), 3))
    jittered = tessera.Mesh.from_arrays(p, m.cells)
    sm, rep = jittered.smooth(5, device="cpu", return_report=True)
    assert rep["inverted_after"] == 0
    np.testing.assert_array_equal(sm.points[~inner], p[~inner])
    assert np.abs(sm.points[inner] - p[inner]).max() > 0
    np.testing.assert_array_equal(jittered.points, p)  # the input is unchanged
    # Catmull-Clark: a tetrahedron becomes 4 hexahedra, a hexahedron 8
    sub = m.subdivide(1, device="cpu")
    assert sub.num_cells == 4 * m.num_cells
    assert set(sub.cell_types.tolist()) == {12}
    h = tessera.generate_box((2, 2, 2), kind="hex").subdivide(2, device="cpu")
    assert h.num_cells == 8 * 8 * 8


def test_files_roundtrip(tmp_path):
    g = tessera.generate_box((2, 3, 2), kind="mixed")
    for ext in (".vtu", ".msh", ".mesh", ".ovm", ".msh.gz"):
        f = tmp_path / f"m{ext}"
        g.write(f)
        r = tessera.read(f)
        assert r.info(device="cpu")["cells"] == g.num_cells
        assert (r.num_vertices, r.num_edges, r.num_faces) == (g.num_vertices, g.num_edges, g.num_faces)
        np.testing.assert_allclose(r.points, g.points, rtol=0, atol=1e-12)


def test_mixed_fixture_counts_match_cli(tessera_bin):
    meshio = need("meshio")
    f = FIXTURES / "mixed-v41.msh"
    cli = json.loads(subprocess.run([tessera_bin, "mesh", "info", str(f), "--json"],
                                    check=True, capture_output=True, text=True).stdout)
    mm = meshio.read(f)
    ours = tessera.Mesh.from_meshio(mm)
    read = tessera.read(f)
    # the file has a node that no volume cell uses: the reader drops it, while from_arrays
    # keeps every point it is given (indices stay those of the caller's array)
    used = np.unique(np.concatenate([b.data.ravel() for b in mm.cells
                                     if b.type in ("tetra", "hexahedron", "wedge", "pyramid")]))
    unused = len(mm.points) - len(used)
    for m, extra in ((ours, unused), (read, 0)):
        i = m.info(device="cpu")
        assert i["vertices"] == cli["vertices"] + extra
        assert i["euler_characteristic"] == cli["euler_characteristic"] + extra
        for k in ("edges", "faces", "cells", "boundary_faces", "boundary_edges",
                  "boundary_vertices", "manifold", "cell_types"):
            assert i[k] == cli[k], (k, i[k], cli[k])
    assert [g["name"] for g in read.groups] == [g["name"] for g in cli["groups"]]


def test_from_arrays_counts_match_cli_tet_file(tessera_bin, tmp_path):
    meshio = need("meshio")
    f = tmp_path / "box.vtu"
    tessera.generate_box((4, 3, 2), (1.0, 1.5, 0.5), "tet").write(f)
    cli = json.loads(subprocess.run([tessera_bin, "mesh", "info", str(f), "--json"],
                                    check=True, capture_output=True, text=True).stdout)
    mm = meshio.read(f)
    m = tessera.Mesh.from_arrays(mm.points, mm.cells_dict["tetra"], cell_type="tetra")
    i = m.info(device="cpu")
    for k in ("vertices", "edges", "faces", "cells", "boundary_faces", "euler_characteristic"):
        assert i[k] == cli[k], k


def test_to_meshio_roundtrip(tmp_path):
    meshio = need("meshio")
    g = tessera.generate_box((3, 2, 2), kind="mixed")
    mm = g.to_meshio()
    f = tmp_path / "out.vtu"
    meshio.write(f, mm)
    back = meshio.read(f)
    np.testing.assert_array_equal(back.points, mm.points)
    assert [b.type for b in back.cells] == [b.type for b in mm.cells]
    for a, b in zip(back.cells, mm.cells):
        np.testing.assert_array_equal(a.data, b.data)
    r = tessera.Mesh.from_meshio(back)
    assert r.info(device="cpu") == g.info(device="cpu")
    # tessera's own .vtu is read by meshio with the same cells
    f2 = tmp_path / "ours.vtu"
    g.write(f2)
    ours = meshio.read(f2)
    np.testing.assert_allclose(ours.points, g.points)
    assert sum(len(b.data) for b in ours.cells) == g.num_cells


def test_pyvista_if_available():
    pv = pytest.importorskip("pyvista")
    g = tessera.generate_box((2, 2, 2), kind="mixed")
    grid = g.to_pyvista()
    assert grid.n_cells == g.num_cells and grid.n_points == g.num_vertices
    assert isinstance(g.boundary().to_pyvista(), pv.PolyData)
