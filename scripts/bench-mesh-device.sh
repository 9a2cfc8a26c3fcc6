#!/usr/bin/env bash
# bench-mesh-device.sh: `tessera bench mesh` on the GPU machine (dissertation Tables 3.1-3.4,
# CPU + GPU columns) for the armadillo, bunny and dragon meshes of ../shared/meshes.
#
# Two steps, from the repository root:
#   1. here (builds the release binary and packs it with the three meshes into .device/):
#        scripts/bench-mesh-device.sh pack
#   2. with the device tool, carry [".device"], timeout_s 600, command:
#        scripts/bench-mesh-device.sh run
#      which runs exactly
#        .device/run tessera bench mesh --device cuda .device/data/armadillo-3k.msh.gz \
#          .device/data/bunny-50k.msh.gz .device/data/dragon-817k.msh.gz --json
#      and writes $OUT/bench-mesh.json (the JSON document: one object per mesh),
#      and $OUT/bench-mesh.stderr; with TEXT=1 (`TEXT=1 scripts/bench-mesh-device.sh run`) also
#      the readable tables in $OUT/bench-mesh.txt (a second full pass without --json). Extra arguments after `run`
#      are passed on to `tessera bench mesh` (e.g. `--levels 1`, `--runs 5`).
#   Expected time on the H100 host (16 cores): a few minutes per pass, most of it the
#   single-thread CPU subdivision columns (armadillo levels 1-4, bunny 1-3, dragon 1).
set -euo pipefail
cd "$(dirname "$0")/.."
meshes=(armadillo-3k.msh.gz bunny-50k.msh.gz dragon-817k.msh.gz)
case "${1:-}" in
  pack)
    src=${MESHES:-../shared/meshes}
    data=()
    for m in "${meshes[@]}"; do
      [ -f "$src/$m" ] || { echo "bench-mesh-device: missing $src/$m" >&2; exit 2; }
      data+=(--data "$src/$m")
    done
    ../shared/tools/device-pack --no-tests --bin tessera "${data[@]}"
    ;;
  run)
    shift
    out=${OUT:-/tmp/bench-mesh-out}; mkdir -p "$out"
    files=()
    for m in "${meshes[@]}"; do files+=(".device/data/$m"); done
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    .device/run tessera bench mesh --device cuda "${files[@]}" --json "$@" \
      > "$out/bench-mesh.json" 2> "$out/bench-mesh.stderr"
    cat "$out/bench-mesh.stderr"
    echo "bench-mesh-device: JSON in \$OUT/bench-mesh.json ($(wc -c < "$out/bench-mesh.json") bytes)"
    if [ "${TEXT:-0}" = 1 ]; then
      .device/run tessera bench mesh --device cuda "${files[@]}" "$@" | tee "$out/bench-mesh.txt"
    fi
    ;;
  *)
    sed -n '2,18p' "$0"; exit 2 ;;
esac
