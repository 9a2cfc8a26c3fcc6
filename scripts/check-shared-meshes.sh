#!/usr/bin/env bash
# Check `tessera mesh info --json` on every mesh of ../shared/meshes against the counts in
# that folder's README.md (V, E, F, T, boundary faces, boundary vertices, Euler characteristic).
#
# usage: scripts/check-shared-meshes.sh [MESH_DIR]
#   MESH_DIR  default: ../shared/meshes relative to the repository root
#   TESSERA   the binary to use (default: build and use target/release/tessera)
# Exit status 0 when every mesh matches; 1 otherwise.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/../shared/meshes}"
if [ ! -f "$dir/README.md" ]; then
  echo "no $dir/README.md: nothing to check" >&2
  exit 1
fi
if [ -z "${TESSERA:-}" ]; then
  (cd "$root" && cargo build --release -p tessera --quiet)
  TESSERA="${CARGO_TARGET_DIR:-$root/target}/release/tessera"
fi
python3 - "$dir" "$TESSERA" <<'PY'
import json, re, subprocess, sys, time
folder, exe = sys.argv[1], sys.argv[2]
rows = []
for line in open(f"{folder}/README.md", encoding="utf-8"):
    m = re.match(r"\|\s*([\w.-]+\.msh\.gz)\s*\|(.*)\|\s*$", line)
    if not m:
        continue
    cells = [c.strip().replace(",", "").replace("\u2212", "-") for c in m.group(2).split("|")]
    v, e, f, t, fb, vb, chi = (int(x) for x in cells[:7])
    rows.append((m.group(1), dict(vertices=v, edges=e, faces=f, cells=t, boundary_faces=fb,
                                  boundary_vertices=vb, euler_characteristic=chi)))
if not rows:
    sys.exit("no mesh table found in README.md")
bad = 0
for name, want in rows:
    t0 = time.time()
    p = subprocess.run([exe, "mesh", "info", f"{folder}/{name}", "--json"], capture_output=True, text=True)
    dt = time.time() - t0
    if p.returncode != 0:
        print(f"FAIL {name}: exit {p.returncode}: {p.stderr.strip()}")
        bad += 1
        continue
    got = json.loads(p.stdout)
    diff = {k: (got.get(k), w) for k, w in want.items() if got.get(k) != w}
    if diff:
        bad += 1
        print(f"FAIL {name}: " + ", ".join(f"{k} {g} != {w}" for k, (g, w) in diff.items()))
    else:
        print(f"ok   {name}: V {got['vertices']} E {got['edges']} F {got['faces']} T {got['cells']} "
              f"Fb {got['boundary_faces']} Vb {got['boundary_vertices']} chi {got['euler_characteristic']} "
              f"manifold {got['manifold']} ({dt:.1f} s)")
print(f"{len(rows) - bad}/{len(rows)} meshes match README.md")
sys.exit(1 if bad else 0)
PY
