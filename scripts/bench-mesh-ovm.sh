#!/usr/bin/env bash
# bench-mesh-ovm.sh: Tessera's CPU mesh relations (dissertation Tables 3.2/3.3) beside
# OpenVolumeMesh's, both measured on this machine, in interleaved rounds.
#
# usage, from the repository root:
#   scripts/bench-mesh-ovm.sh OVM_SOURCE_DIR MESH [MESH...]
# OVM_SOURCE_DIR is an OpenVolumeMesh source tree that you provide (nothing of OVM is in
# this repository), for example
#   git clone --branch v3.4.1 https://gitlab.vci.rwth-aachen.de:9000/OpenVolumeMesh/OpenVolumeMesh.git
# (or its GitHub mirror OpenVolumeMesh/OpenVolumeMesh). Needs cmake and a C++17 compiler.
#
# What it does:
#   1. builds OVM in Release (cmake, static library) and our harness scripts/ovm-peer/ovm_peer.cc
#      against it, under $OUT (default target/ovm-peer), once;
#   2. converts every mesh to OVM's text format with `tessera mesh convert` (same vertex, edge,
#      face and cell numbering in both libraries); OVM reads it with topology checks and
#      bottom-up incidences off;
#   3. ROUNDS times (default 3), alternating processes: ovm_peer (RUNS runs per operation,
#      median) then `tessera bench mesh --device cpu --levels 0 --threads $THREADS --peer-ovm`
#      on the same mesh (the table shows OVM's figure, ours and the ratio, wall clock and
#      thread CPU time);
#   4. prints, per mesh and operation, the median over the rounds of OVM / ours (1 thread), and
#      of ours 1 thread / ours with the last thread count.
# Environment: ROUNDS (3), RUNS (5), THREADS (1,2), OUT (target/ovm-peer), OVM_VERSION (label),
#   TESSERA (target/release/tessera, built with `cargo build --release -p tessera` if missing),
#   JOBS (make -j, default: all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,30p' "$0"; exit 2; }
src=$(cd "$1" && pwd); shift
[ -f "$src/src/OpenVolumeMesh/Mesh/TetrahedralMesh.hh" ] || { echo "bench-mesh-ovm: $src is not an OpenVolumeMesh source tree" >&2; exit 2; }
rounds=${ROUNDS:-3} runs=${RUNS:-5} threads=${THREADS:-1,2} out=${OUT:-target/ovm-peer}
tessera=${TESSERA:-target/release/tessera}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ ! -x "$tessera" ]; then cargo build --release -p tessera; fi
if [ ! -f "$out/ovm-build/Build/lib/libOpenVolumeMesh.a" ]; then
  cmake -S "$src" -B "$out/ovm-build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
    -DOVM_ENABLE_EXAMPLES=OFF -DOVM_ENABLE_UNITTESTS=OFF -DOVM_BUILD_DOCUMENTATION=OFF >/dev/null
  cmake --build "$out/ovm-build" -j "${JOBS:-$(nproc)}" >/dev/null
fi
${CXX:-g++} -O3 -DNDEBUG -std=c++17 -I"$src/src" -I"$out/ovm-build/src" scripts/ovm-peer/ovm_peer.cc \
  "$out/ovm-build/Build/lib/libOpenVolumeMesh.a" -o "$out/ovm_peer"
echo "bench-mesh-ovm: OVM from $src (${OVM_VERSION:-$(git -C "$src" describe --tags 2>/dev/null || echo 'version unknown: set OVM_VERSION')}), $(nproc) cores, $(date -u +%F)"
for mesh in "$@"; do
  name=$(basename "$mesh"); name=${name%%.gz}; name=${name%.*}
  ovm="$out/$name.ovm"
  [ -f "$ovm" ] || "$tessera" mesh convert "$mesh" "$ovm" >/dev/null 2>&1
  for r in $(seq 1 "$rounds"); do
    "$out/ovm_peer" "$ovm" "$name" "$runs" > "$out/$name.ovm-$r.json" 2>"$out/$name.ovm-$r.log"
    "$tessera" bench mesh --device cpu --levels 0 --runs "$(( runs < 5 ? 5 : runs ))" --threads "$threads" \
      --peer-ovm "$out/$name.ovm-$r.json" "$mesh" --json > "$out/$name.tessera-$r.json"
    echo "bench-mesh-ovm: $name round $r done"
  done
done
# medians over the rounds
python3 - "$out" "$rounds" "$@" <<'PY'
import json, os, statistics, sys
out, rounds, meshes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for mesh in meshes:
    name = os.path.basename(mesh)
    name = name[:-3] if name.endswith(".gz") else name
    name = name.rsplit(".", 1)[0]
    runs = [json.load(open(f"{out}/{name}.tessera-{r}.json"))[0] for r in range(1, rounds + 1)]
    t = [x["threads"] for x in runs[0]["ops"][0]["threads_ms"]]
    print(f"\n{name}: median of {rounds} interleaved rounds (ms; OVM/ours = speed-up of ours over OVM, 1 thread)")
    print(f"{'operation':<22} {'OVM':>9} {'ours 1 thr':>10} {'OVM/ours':>9} {'CPU OVM':>9} {'CPU ours':>9} {'OVM/ours':>9} " +
          " ".join(f"{str(n) + ' thr':>9}" for n in t[1:]) + f" {'1/' + str(t[-1]) + ' thr':>9}")
    for i, op in enumerate(runs[0]["ops"]):
        ops = [x["ops"][i] for x in runs]
        p = [o["peer_ovm"] for o in ops if o.get("peer_ovm")]
        med = lambda v: statistics.median(v) if v else float("nan")
        row = f"{op['name']:<22} "
        if p:
            row += f"{med([q['ovm_ms'] for q in p]):9.2f} {med([q['ours_ms'] for q in p]):10.2f} {med([q['ovm_over_ours'] for q in p]):8.1f}x "
            cpu = [q for q in p if q.get("ovm_over_ours_cpu")]
            row += f"{med([q['ovm_cpu_ms'] for q in cpu]):9.2f} {med([q['ours_cpu_ms'] for q in cpu]):9.2f} {med([q['ovm_over_ours_cpu'] for q in cpu]):8.1f}x "
        else:
            row += f"{'-':>9} {med([o['ms_1_thread'] for o in ops]):10.2f} {'-':>9} {'-':>9} {'-':>9} {'-':>9} "
        for k in range(1, len(t)):
            row += f"{med([o['threads_ms'][k]['ms'] for o in ops]):9.2f} "
        row += f"{med([o['threads_ms'][0]['ms'] / o['threads_ms'][-1]['ms'] for o in ops]):8.2f}x"
        print(row)
PY
