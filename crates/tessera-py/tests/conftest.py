"""Shared fixtures of the Python test suite. Run: `pytest crates/tessera-py/tests` after
`maturin develop` (see the crate README). With TESSERA_PY_STRICT=1 (CI), a missing
independent library or CLI binary is a failure, not a skip."""

import os
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "crates" / "tessera-mesh" / "tests" / "fixtures"
STRICT = os.environ.get("TESSERA_PY_STRICT") == "1"


def need(module: str):
    """Import an independent library, or skip (fail under TESSERA_PY_STRICT=1)."""
    if STRICT:
        return __import__(module)
    return pytest.importorskip(module)


@pytest.fixture(scope="session")
def tessera_bin() -> str:
    """The `tessera` CLI: $TESSERA_BIN, else target/{debug,release}/tessera."""
    cands = [os.environ.get("TESSERA_BIN")]
    cands += [str(ROOT / "target" / p / "tessera") for p in ("debug", "release")]
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    if shutil.which("tessera"):
        return shutil.which("tessera")
    if STRICT:
        pytest.fail("the tessera CLI binary was not found (build it: cargo build -p tessera)")
    pytest.skip("the tessera CLI binary was not found (cargo build -p tessera)")
