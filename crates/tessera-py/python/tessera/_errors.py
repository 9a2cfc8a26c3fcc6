"""Exceptions raised by Tessera. Every one derives from :class:`TesseraError`; those about
bad input also derive from :class:`ValueError`, so ``except ValueError`` catches them."""


class TesseraError(Exception):
    """Base class of Tessera's exceptions."""


class MeshError(TesseraError, ValueError):
    """Invalid mesh input or topology; the message names the offending cell, face or vertex."""


class ParseError(MeshError):
    """A mesh file that cannot be read.

    Attributes: ``path`` (the file), ``location`` (``"line N"`` or ``"byte N"``) and
    ``line`` (1-based int, or None for binary files)."""

    path = None
    location = None
    line = None


class FemError(TesseraError, ValueError):
    """Invalid FEM input: material, order, a mesh that is not tetrahedral."""


class ProblemError(TesseraError, ValueError):
    """A problem description (TOML file or dict) that cannot be used; names the key."""


class SolveError(TesseraError, RuntimeError):
    """A linear solve that failed (not converged, singular, unconstrained)."""


class QueryError(TesseraError, ValueError):
    """A query expression that does not compile, or fields that do not fit it; the message
    gives the byte span of the expression it refers to."""


class DeviceError(TesseraError, RuntimeError):
    """A device that cannot be used (``device="cuda:N"`` without that GPU) or a GPU failure."""
