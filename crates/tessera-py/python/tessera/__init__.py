"""Tessera from Python: volumetric meshes, higher-order FEM and derived-field queries on the
CPU or a CUDA GPU, with NumPy and SciPy in and out.

    import tessera
    mesh = tessera.read("part.msh")                     # or tessera.Mesh.from_arrays(points, cells)
    K = tessera.fem.assemble(mesh, order=2, youngs=210e9, poisson=0.3)   # scipy.sparse.bsr_matrix
    sol = tessera.fem.solve("problem.toml")             # displacement, stress, von Mises + summary
    q = tessera.query.compile("sqrt(u^2 + v^2)", fields=["u", "v"])
    speed = q.eval({"u": u, "v": v}, device="cuda")

Every call that computes takes ``device="auto"|"cpu"|"cuda"|"cuda:N"`` (auto: the GPU when
one is usable) and releases the GIL while it runs. Arrays the mesh hands out (``points``,
``cells``, ``cell_types``, unsigned relations) are read-only views of its storage, not
copies; see :class:`tessera.Mesh` for which calls copy.
"""

from ._errors import (
    DeviceError,
    FemError,
    MeshError,
    ParseError,
    ProblemError,
    QueryError,
    SolveError,
    TesseraError,
)
from ._tessera import __version__
from .mesh import Mesh, Surface, from_arrays, from_meshio, generate_box, read
from . import fem, query


def device(device: str = "auto") -> str:
    """What a call with ``device=`` runs on, as one line: ``cpu (N threads)`` or the GPU
    (``cuda:0 NVIDIA H100 ... (sm_90, 132 SMs, 79.1 GiB, NVRTC 13.0)``). Raises
    :class:`DeviceError` when a requested GPU cannot be used."""
    from ._tessera import describe_device

    return describe_device(device)


__all__ = [
    "Mesh",
    "Surface",
    "read",
    "from_arrays",
    "from_meshio",
    "generate_box",
    "fem",
    "query",
    "device",
    "TesseraError",
    "MeshError",
    "ParseError",
    "FemError",
    "ProblemError",
    "SolveError",
    "QueryError",
    "DeviceError",
    "__version__",
]
