"""Tessera from Python, notebook style: read a mesh, look at it, assemble, solve with SciPy
and with Tessera, compare, and plot with PyVista off-screen.

    pip install ./crates/tessera-py meshio   # or: maturin develop -m crates/tessera-py/Cargo.toml
    python examples/python/bracket_fem.py [MESH] [--device auto|cpu|cuda]

MESH defaults to examples/bracket-7.9k.msh.gz (the Gmsh bracket with physical groups); any
tetrahedral mesh tessera reads works, for example one from ../shared/meshes.
"""

import argparse
import pathlib
import time

import numpy as np
import scipy.sparse.linalg as spla

import tessera

HERE = pathlib.Path(__file__).resolve().parent
ap = argparse.ArgumentParser()
ap.add_argument("mesh", nargs="?", default=str(HERE.parent / "bracket-7.9k.msh.gz"))
ap.add_argument("--device", default="auto")
ap.add_argument("--out", default="tessera-py-example")
args = ap.parse_args()
out = pathlib.Path(args.out)
out.mkdir(exist_ok=True)
print("device:", tessera.device(args.device))

# %% 1. Read a mesh: points and cells are NumPy views of Tessera's storage (no copies)
mesh = tessera.read(args.mesh)
print(mesh, "groups:", [g["name"] for g in mesh.groups])
info = mesh.info(device=args.device)
print(f"boundary: {info['boundary_faces']} faces, Euler characteristic {info['euler_characteristic']}")
pts, tets = mesh.points, mesh.cells
print("points", pts.shape, pts.dtype, "cells", tets.shape, tets.dtype)

# %% 2. Assemble the p = 1 stiffness into a scipy.sparse.bsr_matrix (3x3 blocks), units N, mm
E, nu = 210e3, 0.3  # steel in N/mm^2
t = time.perf_counter()
K = tessera.fem.assemble(mesh, order=1, youngs=E, poisson=nu, device=args.device)
print(f"K: {K.shape[0]} DOFs, {K.nnz} stored entries, {1e3 * (time.perf_counter() - t):.1f} ms")

# %% 3. Solve with SciPy: clamp the vertices at the lowest z, pull the top ones sideways
z = pts[:, 2]
fixed = np.flatnonzero(z <= z.min() + 1e-6)
top = np.flatnonzero(z >= z.max() - 1e-6)
f = np.zeros(K.shape[0])
f[3 * top + 0] = 1.0 / len(top)  # 1 N in total in x
free = np.setdiff1d(np.arange(K.shape[0]), np.concatenate([3 * fixed, 3 * fixed + 1, 3 * fixed + 2]))
Kc = K.tocsr()
Kff = Kc[free][:, free]
t = time.perf_counter()
u = np.zeros(K.shape[0])
u[free], code = spla.cg(Kff, f[free], rtol=1e-10, maxiter=20000)
print(f"SciPy CG: converged={code == 0}, {1e3 * (time.perf_counter() - t):.0f} ms, "
      f"max |u| = {np.abs(u).max():.3e} mm")

# %% 4. The same kind of problem through Tessera's own solver (problem as a dict)
problem = {
    "title": "py-bracket",
    "order": 2,
    "mesh": {"file": str(pathlib.Path(args.mesh).resolve())},
    "material": {"youngs": E, "poisson": nu},
    "fixed": [{"selector": {"type": "plane", "point": [0, 0, float(z.min())], "normal": [0, 0, 1], "tolerance": 1e-6}}],
    "loads": [{"type": "traction",
               "selector": {"type": "plane", "point": [0, 0, float(z.max())], "normal": [0, 0, 1], "tolerance": 1e-6},
               "traction": [0.01, 0.0, 0.0]}],
}
sol = tessera.fem.solve(problem, device=args.device)
print(sol)
print("stages (ms):", sol.summary.get("stages_ms"))

# %% 5. A derived field with the query compiler, where the data lives
q = tessera.query.compile("sqrt(ux^2 + uy^2 + uz^2)", fields=["ux", "uy", "uz"])
d = sol.displacement
mag = q.eval({"ux": d[:, 0], "uy": d[:, 1], "uz": d[:, 2]}, device=args.device)
assert np.allclose(mag, np.linalg.norm(d, axis=1))

# %% 6. Plot with PyVista off-screen (skipped when PyVista is not installed)
try:
    import pyvista as pv
except ImportError:
    pv = None
if pv is not None:
    grid = mesh.to_pyvista()
    grid.point_data["|u| (SciPy, p=1)"] = np.linalg.norm(u.reshape(-1, 3), axis=1)
    plotter = pv.Plotter(off_screen=True)
    plotter.add_mesh(grid, scalars="|u| (SciPy, p=1)")
    plotter.screenshot(str(out / "bracket.png"))
    print("wrote", out / "bracket.png")
else:
    print("PyVista not installed: no picture (pip install pyvista)")
print("done")
