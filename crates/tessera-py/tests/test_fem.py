"""FEM through Python: the p = 1 stiffness against scikit-fem's vector P1 elasticity, the
static solve against `tessera fem solve`, rigid-body modes, and queries."""

import json
import subprocess
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

import tessera
from conftest import ROOT, need


def _perturbed_box():
    skfem = need("skfem")
    m = skfem.MeshTet.init_tensor(np.linspace(0, 1, 5), np.linspace(0, 2, 4), np.linspace(0, 0.5, 6))
    p = m.p.copy()
    inner = np.all((p > 1e-9) & (p < np.array([[1], [2], [0.5]]) - 1e-9), axis=0)
    rng = np.random.default_rng(3)
    p[:, inner] += rng.uniform(-0.03, 0.03, (3, inner.sum()))
    return skfem.MeshTet(p, m.t)


def test_p1_stiffness_equals_scikit_fem():
    skfem = need("skfem")
    from skfem.models.elasticity import lame_parameters, linear_elasticity

    m = _perturbed_box()
    E, nu = 210.0, 0.3
    basis = skfem.Basis(m, skfem.ElementVector(skfem.ElementTetP1()))
    ks = skfem.asm(linear_elasticity(*lame_parameters(E, nu)), basis).tocsr()
    # scikit-fem's transposed (3, N) / (4, M) arrays, passed as strided views
    mesh = tessera.Mesh.from_arrays(m.p.T, m.t.T, "tetra")
    kt = tessera.fem.assemble(mesh, order=1, youngs=E, poisson=nu, device="cpu")
    assert isinstance(kt, sp.bsr_matrix) and kt.blocksize == (3, 3)
    nv = m.p.shape[1]
    # tessera's DOF 3 v + c is scikit-fem's nodal_dofs[c, v]
    perm = np.empty(3 * nv, dtype=np.int64)
    for c in range(3):
        perm[3 * np.arange(nv) + c] = basis.nodal_dofs[c]
    ks_p = ks[perm][:, perm]
    diff = sp.linalg.norm(kt.tocsr() - ks_p) / sp.linalg.norm(ks_p)
    assert diff < 1e-10, diff
    # CSR output and f32 precision
    kc = tessera.fem.assemble(mesh, youngs=E, poisson=nu, device="cpu", format="csr")
    assert isinstance(kc, sp.csr_matrix) and abs(kc - kt).max() == 0
    k32 = tessera.fem.assemble(mesh, youngs=E, poisson=nu, device="cpu", precision="f32")
    assert k32.dtype == np.float32
    assert sp.linalg.norm(k32.astype(np.float64) - kt) / sp.linalg.norm(kt) < 1e-6


def test_mass_and_higher_order():
    g = tessera.generate_box((2, 2, 2), (1.0, 1.0, 1.0), "tet")
    mass, st = tessera.fem.assemble(g, order=2, matrix="mass", density=2.0, device="cpu", return_stats=True)
    assert st["device"] == "cpu" and st["order"] == 2
    n = 3 * st["nodes"]
    assert mass.shape == (n, n)
    # the x-components of the consistent mass sum to ρ |Ω| (a partition of unity)
    ex = np.zeros(n)
    ex[0::3] = 1.0
    assert abs(ex @ (mass @ ex) - 2.0) < 1e-12
    # rigid-body modes lie in the stiffness's null space
    for p in (1, 2):
        k = tessera.fem.assemble(g, order=p, youngs=5.0, poisson=0.25, device="cpu")
        b = tessera.fem.rigid_body_modes(g, order=p)
        assert b.shape == (k.shape[0], 6)
        assert np.abs(k @ b).max() < 1e-10 * abs(k).max()


PROBLEM = """
title = "py-beam"
order = {order}

[mesh]
generate = {{ box = {{ cells = [8, 2, 2], size = [4.0, 1.0, 1.0] }} }}

[material]
youngs = 1000.0
poisson = 0.3

[[fixed]]
selector = {{ type = "plane", point = [0, 0, 0], normal = [1, 0, 0], tolerance = 1e-6 }}

[[loads]]
type = "traction"
selector = {{ type = "plane", point = [4, 0, 0], normal = [1, 0, 0], tolerance = 1e-6 }}
traction = [0.0, 0.0, -1.0]

[solver]
method = "pcg"
tolerance = 1e-12
"""


@pytest.mark.parametrize("order", [1, 2])
def test_solve_matches_cli(tmp_path, tessera_bin, order):
    meshio = need("meshio")
    toml = tmp_path / "beam.toml"
    toml.write_text(PROBLEM.format(order=order))
    out = tmp_path / "out"
    cli = json.loads(subprocess.run(
        [tessera_bin, "fem", "solve", str(toml), "-o", str(out), "--json", "--device", "cpu"],
        check=True, capture_output=True, text=True).stdout)
    sol = tessera.fem.solve(toml, device="cpu")
    s = sol.summary
    for k in ("dofs", "nodes", "cells", "iterations"):
        assert s[k] == cli[k], k
    assert abs(s["max_displacement"] - cli["max_displacement"]) <= 1e-12 * cli["max_displacement"]
    # the CLI's .vtu carries the nodal displacement at the same nodes
    v = meshio.read(cli["vtu"])
    u_cli = np.asarray(v.point_data["Displacement"])
    assert u_cli.shape == sol.displacement.shape
    # match nodes by position (the .vtu lists higher-order nodes in VTK's cell order)
    key = lambda x: np.lexsort(np.round(x, 9).T[::-1])
    ia, ib = key(v.points), key(sol.nodes)
    np.testing.assert_allclose(v.points[ia], sol.nodes[ib], atol=1e-12)
    scale = np.abs(u_cli).max()
    np.testing.assert_allclose(sol.displacement[ib], u_cli[ia], rtol=0, atol=1e-10 * scale)
    assert sol.stress.shape == (len(sol.nodes), 6) and sol.von_mises.shape == (len(sol.nodes),)
    # the same problem as a dict
    tomllib = pytest.importorskip("tomllib")

    d = tomllib.loads(PROBLEM.format(order=order))
    sol2 = tessera.fem.solve(d, device="cpu")
    np.testing.assert_allclose(sol2.displacement, sol.displacement, rtol=0, atol=1e-12 * scale)


def test_query_cpu():
    rng = np.random.default_rng(1)
    u, v = rng.normal(size=1000), rng.normal(size=1000)
    q = tessera.query.compile("sqrt(u^2 + v^2) + max(u, 0)", fields=["u", "v"])
    r = q.eval({"u": u, "v": v, "unused": 1}, device="cpu")
    np.testing.assert_allclose(r, np.sqrt(u**2 + v**2) + np.maximum(u, 0), rtol=1e-14)
    r32 = q.eval({"u": u.astype(np.float32), "v": v.astype(np.float32)}, device="cpu")
    assert r32.dtype == np.float32
    np.testing.assert_allclose(r32, r, rtol=1e-5, atol=1e-6)
    # 2-D fields keep their shape; strided input is converted once
    r2 = q.eval({"u": u.reshape(20, 50), "v": v.reshape(50, 20).T}, device="cpu")
    assert r2.shape == (20, 50)


def test_example_problem_file_solves():
    sol = tessera.fem.solve(ROOT / "examples" / "cantilever.toml", device="cpu")
    # Timoshenko tip deflection 4.024 (examples/cantilever.toml)
    assert abs(sol.summary["max_displacement"] - 4.024) / 4.024 < 0.05


def test_gil_released_during_assembly():
    import threading

    g = tessera.generate_box((14, 14, 14), kind="tet")
    state = {"started": False, "done": False}

    def work():
        state["started"] = True
        tessera.fem.assemble(g, order=2, device="cpu")
        state["done"] = True

    t = threading.Thread(target=work)
    t.start()
    while not state["started"]:
        pass
    ticks = 0
    while not state["done"]:
        ticks += 1  # runs only while the assembly does not hold the GIL
    t.join()
    assert ticks > 1000, ticks
