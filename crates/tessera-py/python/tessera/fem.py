"""Higher-order FEM for linear elasticity (dissertation Chapter 4): assembly into SciPy
matrices, static solves from a problem file or dict, rigid-body modes.

DOFs are node-major: DOF ``3 i + k`` is component ``k`` (x, y, z) of node ``i``; for
``order=1`` the nodes are the mesh vertices in their order."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Union

import numpy as np

from . import _tessera
from .mesh import Mesh


def _native(mesh) -> "_tessera.NativeMesh":
    if isinstance(mesh, Mesh):
        return mesh._m
    if isinstance(mesh, (str, os.PathLike)):
        return Mesh.read(mesh)._m
    raise TypeError(f"mesh must be a tessera.Mesh or a path, got {type(mesh).__name__}")


def assemble(mesh, order: int = 1, youngs: float = 1.0, poisson: float = 0.3,
             density: float = 1.0, matrix: str = "stiffness", precision: str = "f64",
             device: str = "auto", format: str = "bsr", summation: str = "auto",
             return_stats: bool = False):
    """Assemble the stiffness matrix of linear isotropic elasticity (Eq. 4.7; ``youngs``
    E, ``poisson`` ν) or the consistent mass matrix (``matrix="mass"``, ``density`` ρ) of a
    tetrahedral mesh with Bernstein-Bézier elements of order ``order`` (1..12), through the
    exact Bin-BCSR* pattern (dissertation §4.4).

    Returns a ``scipy.sparse.bsr_matrix`` with 3x3 blocks (``format="bsr"``; the arrays
    come from Tessera without a copy) or a ``csr_matrix`` (``format="csr"``, converted by
    SciPy). ``precision="f32"`` assembles in single precision. ``device="cuda"`` assembles
    on the GPU and downloads the matrix. ``summation`` is ``"auto"`` (inline on the CPU up
    to p = 3, else per-node), ``"per-node"``, ``"inline"`` or ``"per-entry"``; all give the
    same values. With ``return_stats`` also returns a dict of sizes and stage times."""
    import scipy.sparse as sp

    if format not in ("bsr", "csr"):
        raise ValueError(f'format {format!r}: expected "bsr" or "csr"')
    indptr, indices, data, n, stats = _tessera.assemble(
        _native(mesh), order, float(youngs), float(poisson), float(density), matrix,
        precision, device, summation)
    k = sp.bsr_matrix((data, indices, indptr), shape=(n, n))
    if format == "csr":
        k = k.tocsr()
    return (k, json.loads(stats)) if return_stats else k


def rigid_body_modes(mesh, order: int = 1) -> np.ndarray:
    """The six rigid-body modes ``(3 n, 6)`` at the nodes of order ``order`` (translations
    x, y, z; rotations about x, y, z through the centroid, scaled to O(1)): the near null
    space of the stiffness matrix (for example pyamg's ``B``)."""
    return _tessera.rigid_body_modes(_native(mesh), order)


class Solution:
    """A solved static problem.

    Nodal (Lagrange) values at the ``nodes`` (``(n, 3)``; the mesh vertices first):
    ``displacement`` (n, 3), ``strain``, ``stress`` (n, 6: xx, yy, zz, xy, yz, xz; averaged
    over the cells of a node) and ``von_mises`` (n,); per cell at its centroid:
    ``cell_strain``, ``cell_stress``, ``cell_von_mises``. ``cells`` the tetrahedra (vertex
    indices), ``coefficients`` the Bernstein-Bézier displacement coefficients (3 n),
    ``load`` the load vector, ``summary`` the dict ``tessera fem solve --json`` prints."""

    def __init__(self, d: Dict[str, Any]):
        self.summary = json.loads(d.pop("summary"))
        for k, v in d.items():
            setattr(self, k, v)

    def __repr__(self) -> str:
        s = self.summary
        return (f"tessera.fem.Solution({s.get('title')!r}: p = {s.get('order')}, "
                f"{s.get('dofs')} DOFs, max |u| = {s.get('max_displacement')}, "
                f"device {s.get('device')})")


def solve(problem: Union[str, "os.PathLike[str]", Dict[str, Any]], device: str = "auto",
          allow_inverted: bool = False) -> Solution:
    """Solve a static linear-elasticity problem as ``tessera fem solve`` does (dissertation
    §4.1): ``problem`` is a TOML file (docs/problem-format.md) or a dict with the same keys
    (relative mesh paths then resolve against the working directory). Nothing is written
    to disk. Raises :class:`tessera.ProblemError` naming a bad key, :class:`SolveError`
    when the solve fails."""
    if isinstance(problem, dict):
        text = json.dumps(problem)
        return Solution(_tessera.solve(text, "<dict>", os.getcwd(), True, device, allow_inverted))
    path = os.fspath(problem)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    base = os.path.dirname(os.path.abspath(path))
    return Solution(_tessera.solve(text, path, base, False, device, allow_inverted))


__all__ = ["assemble", "solve", "rigid_body_modes", "Solution"]
