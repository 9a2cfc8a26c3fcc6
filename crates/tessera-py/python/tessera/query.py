"""Derived-field queries (dissertation §6.3.4): an expression such as
``sqrt(VelocityX^2 + VelocityY^2)`` compiled once and evaluated on NumPy arrays by the
Cranelift CPU JIT or, with ``device="cuda"``, by a PTX kernel on the GPU."""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

from . import _tessera
from ._errors import QueryError


class Query:
    """A compiled query; evaluate it with :meth:`eval`."""

    __slots__ = ("_q",)

    def __init__(self, expr: str, fields: Sequence[str]):
        if isinstance(fields, str):
            raise ValueError("fields must be a list of names, not one string")
        self._q = _tessera.NativeQuery(expr, list(fields))

    @property
    def source(self) -> str:
        return self._q.source

    @property
    def fields(self) -> list:
        return self._q.fields

    def cuda_c(self, precision: str = "f32") -> str:
        """The CUDA C of the GPU kernel (for inspection)."""
        return self._q.cuda_c(precision)

    def eval(self, values: Dict[str, np.ndarray], device: str = "auto",
             precision: Optional[str] = None) -> np.ndarray:
        """Evaluate on ``values`` (name -> array; extra names are ignored). All fields must
        have one shape; the result has it too. ``precision`` ``"f32"``/``"f64"``; by
        default float32 when every field is float32, else float64. Arrays that are already
        contiguous in that dtype are read in place; others are converted (one copy)."""
        missing = [f for f in self.fields if f not in values]
        if missing:
            raise QueryError(f"missing field(s) {missing}; the query uses {self.fields}")
        arrays = [np.asarray(values[f]) for f in self.fields]
        shapes = {a.shape for a in arrays}
        if len(shapes) > 1:
            raise ValueError(f"fields have different shapes: {sorted(shapes)}")
        shape = arrays[0].shape if arrays else (0,)
        if precision is None:
            precision = "f32" if arrays and all(a.dtype == np.float32 for a in arrays) else "f64"
        if precision not in ("f32", "f64"):
            raise ValueError(f'precision {precision!r}: expected "f32" or "f64"')
        dt = np.float32 if precision == "f32" else np.float64
        for f, a in zip(self.fields, arrays):
            if a.dtype.kind not in "fiub":
                raise ValueError(f"field {f!r} has dtype {a.dtype}; expected a real number array")
        flat = [np.ascontiguousarray(a, dtype=dt).reshape(-1) for a in arrays]
        if not flat:
            raise QueryError("the query has no fields; give it at least one")
        ev = self._q._eval_f32 if precision == "f32" else self._q._eval_f64
        out, _dev = ev(flat, device)
        return out.reshape(shape)

    def __repr__(self) -> str:
        return f"tessera.query.Query({self.source!r}, fields={self.fields!r})"


def compile(expr: str, fields: Sequence[str]) -> Query:
    """Compile ``expr`` over the field names ``fields``. Syntax errors and unknown names
    raise :class:`tessera.QueryError` with the byte span."""
    return Query(expr, fields)


__all__ = ["Query", "compile"]
