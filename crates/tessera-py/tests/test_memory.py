"""Memory: a 10M-point array passed to Mesh.from_arrays is copied once (into the mesh),
not twice. Measured as the peak RSS of a fresh interpreter; the figures are printed
(pytest -s) for BENCHMARKS.md."""

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import tessera

    def peak_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    n = 10_000_000
    layout = sys.argv[1]
    if layout == "contiguous":
        pts = np.random.default_rng(0).random((n, 3))
    else:  # a strided view: every other row of a (2n, 3) array
        pts = np.random.default_rng(0).random((2 * n, 3))[::2]
    cells = np.array([[0, 1, 2, 3], [4, 5, 6, 7]], dtype=np.int64)
    before = peak_mb()
    m = tessera.Mesh.from_arrays(pts, cells)
    after = peak_mb()
    assert m.num_vertices == n
    view = m.points  # a view: no further growth
    after_view = peak_mb()
    print(json.dumps({"layout": layout, "array_mb": pts.nbytes / 2**20, "peak_before_mb": before,
                      "peak_after_mb": after, "peak_after_view_mb": after_view}))
""")


def _run(layout):
    out = subprocess.run([sys.executable, "-c", SCRIPT, layout], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_ten_million_points_copied_once():
    for layout in ("contiguous", "strided"):
        r = _run(layout)
        print("peak RSS", r)
        growth = r["peak_after_mb"] - r["peak_before_mb"]
        arr = r["array_mb"]
        # one copy of the points (229 MB) plus the builder's per-vertex bookkeeping (a few
        # bytes per vertex); a second copy of the points would make it >= 2x
        assert growth < 1.5 * arr, r
        assert r["peak_after_view_mb"] - r["peak_after_mb"] < 0.05 * arr, r
