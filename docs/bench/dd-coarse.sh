#!/usr/bin/env bash
# Two-level vs one-level domain AMG vs block Jacobi on the shared brackets, k = 1..16 domains
# (BENCHMARKS "Domain decomposition"). Usage:
#   docs/bench/dd-coarse.sh [TESSERA_BIN] [OUT.jsonl]   (MESHES=/work/shared/meshes, CASES="115k:1 338k:1 115k:2")
# Each row: one `tessera fem solve PROBLEM --device cpu --domains K [--coarse C] --json` run.
set -euo pipefail
BIN=${1:-target/release/tessera}
OUT=${2:-docs/bench/dd-coarse.jsonl}
MESHES=${MESHES:-/work/shared/meshes}
CASES=${CASES:-"115k:1 338k:1 115k:2"}
KS=${KS:-"1 2 4 8 16"}
METHODS=${METHODS:-"hybrid additive none jacobi"}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
problem() { # mesh order preconditioner
  cat > "$TMP/p.toml" <<TOML
title = "bracket-$1-p$2"
order = $2
units = "mm"
[mesh]
file = "$MESHES/bracket-$1.msh.gz"
[material]
preset = "Ti-6Al-4V"
[[fixed]]
selector = { type = "group", name = "bolt_holes" }
[[loads]]
type = "traction"
selector = { type = "group", name = "load_hole" }
traction = [0.0, 0.0, -20.0]
[solver]
method = "pcg"
preconditioner = "$3"
tolerance = 1e-8
max_iterations = 20000
TOML
}
for case in $CASES; do
  mesh=${case%%:*}; p=${case##*:}
  for k in $KS; do
    for m in $METHODS; do
      if [ "$m" = jacobi ]; then problem "$mesh" "$p" block-jacobi; extra=();
      else problem "$mesh" "$p" amg; extra=(--coarse "$m"); fi
      t0=$(date +%s.%N)
      if "$BIN" fem solve "$TMP/p.toml" --device cpu --domains "$k" "${extra[@]}" --json -o "$TMP/out" > "$TMP/s.json" 2> "$TMP/err"; then
        python3 - "$TMP/s.json" "$mesh" "$p" "$k" "$m" "$t0" >> "$OUT" <<'PY'
import json, sys, time
s = json.load(open(sys.argv[1])); st = s.get("stages_ms", {}); dd = s.get("domains") or {}; c = dd.get("coarse") or {}
print(json.dumps({"mesh": "bracket-" + sys.argv[2], "p": int(sys.argv[3]), "k": int(sys.argv[4]), "method": sys.argv[5],
  "dofs": s.get("dofs"), "iterations": s.get("iterations"), "setup_ms": st.get("setup"), "solve_ms": st.get("solve"),
  "assemble_ms": st.get("assemble"), "preconditioner": s.get("preconditioner"), "coarse_dofs": c.get("coarse_dofs"),
  "coarse_levels": c.get("coarse_levels"), "local_ms": c.get("local_ms"), "coarse_ms": c.get("coarse_ms"),
  "operator_ms": c.get("operator_ms"), "final_residual": s.get("final_residual"), "max_displacement": s.get("max_displacement"),
  "wall_s": round(time.time() - float(sys.argv[6]), 2), "load": open("/proc/loadavg").read().split()[0]}))
PY
      else
        echo "{\"mesh\": \"bracket-$mesh\", \"p\": $p, \"k\": $k, \"method\": \"$m\", \"error\": $(python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read().strip()[-300:]))' "$TMP/err")}" >> "$OUT"
      fi
      tail -1 "$OUT"
    done
  done
done
