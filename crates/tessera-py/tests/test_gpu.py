"""The GPU path: runs where `device="cuda"` is usable (skipped elsewhere); every result is
compared with the CPU's."""

import numpy as np
import pytest
import scipy.sparse as sp

import tessera


def _gpu():
    try:
        d = tessera.device("cuda")
    except tessera.DeviceError as e:
        pytest.skip(f"no usable GPU: {e}")
    return d


def test_gpu_matches_cpu():
    print("device:", _gpu())
    g = tessera.generate_box((12, 10, 9), (1.0, 0.8, 0.7), "tet")
    # assembly (dissertation §4.4) on the GPU, f64 and f32, p = 1 and 2
    for p in (1, 2):
        kc = tessera.fem.assemble(g, order=p, youngs=3.0, poisson=0.3, device="cpu")
        kg, st = tessera.fem.assemble(g, order=p, youngs=3.0, poisson=0.3, device="cuda", return_stats=True)
        assert st["device"].startswith("cuda")
        rel = sp.linalg.norm(kg - kc) / sp.linalg.norm(kc)
        print(f"assemble p={p} f64: relative Frobenius difference {rel:.2e}")
        assert rel < 1e-12
        k32 = tessera.fem.assemble(g, order=p, youngs=3.0, poisson=0.3, device="cuda", precision="f32")
        assert sp.linalg.norm(k32.astype(np.float64) - kc) / sp.linalg.norm(kc) < 1e-5
    # boundary, info, smoothing and subdivision equal the CPU's
    assert g.info(device="cuda")["boundary_faces"] == g.info(device="cpu")["boundary_faces"]
    bc, bg = g.boundary(device="cpu"), g.boundary(device="cuda")
    np.testing.assert_array_equal(bc.polygons, bg.polygons)
    rng = np.random.default_rng(5)
    p = g.points.copy()
    inner = np.all((p > 1e-9) & (p < np.array([1.0, 0.8, 0.7]) - 1e-9), axis=1)
    p[inner] += rng.uniform(-0.01, 0.01, (inner.sum(), 3))
    j = tessera.Mesh.from_arrays(p, g.cells)
    np.testing.assert_array_equal(j.smooth(4, device="cpu").points, j.smooth(4, device="cuda").points)
    sc, sg = g.subdivide(1, device="cpu"), g.subdivide(1, device="cuda")
    assert sc.num_cells == sg.num_cells
    np.testing.assert_allclose(sg.points, sc.points, rtol=0, atol=1e-12)
    # queries on the GPU
    u, v = rng.normal(size=100_003), rng.normal(size=100_003)
    q = tessera.query.compile("sqrt(u^2 + v^2) * exp(-u)", ["u", "v"])
    np.testing.assert_allclose(q.eval({"u": u, "v": v}, device="cuda"),
                               q.eval({"u": u, "v": v}, device="cpu"), rtol=1e-12)
    # a static solve on the GPU equals the CPU's
    prob = {"title": "gpu", "order": 2,
            "mesh": {"generate": {"box": {"cells": [10, 3, 3], "size": [10.0, 1.0, 1.0]}}},
            "material": {"youngs": 1000.0, "poisson": 0.3},
            "fixed": [{"selector": {"type": "plane", "point": [0, 0, 0], "normal": [1, 0, 0], "tolerance": 1e-6}}],
            "loads": [{"type": "traction", "selector": {"type": "plane", "point": [10, 0, 0], "normal": [1, 0, 0], "tolerance": 1e-6}, "traction": [0.0, 0.0, -1.0]}],
            "solver": {"method": "pcg", "tolerance": 1e-10}}
    sc, sg = tessera.fem.solve(prob, device="cpu"), tessera.fem.solve(prob, device="cuda")
    assert sg.summary["device"].startswith("cuda")
    d = np.abs(sg.displacement - sc.displacement).max() / np.abs(sc.displacement).max()
    print(f"solve: GPU vs CPU max relative displacement difference {d:.2e}")
    assert d < 1e-6
