#!/usr/bin/env bash
# two-thread-protocol.sh: the 2-thread ratio of the CPU transposes δ1, δ2, δ3 (dissertation
# §3.4.1), judged over time rather than from one process (issue 20; BENCHMARKS.md, sessions
# 34-35: on a 2-vCPU VM the same binary gives 1.1x in one minute and 1.8x in another).
#
# usage, from the repository root:
#   scripts/two-thread-protocol.sh MESH [MESH...]
# It runs PROCS processes of the `transpose_threads` example (one copy of the input, 1 and 2
# threads alternating, ROUNDS rounds, the workers pinned unless PIN=0), GAP seconds apart, and
# prints for every mesh and transpose the per-process medians of the per-round ratio (1 thread
# / 2 threads), their median, and how many processes reached TARGET.
# Environment: PROCS (8), GAP (60), ROUNDS (21), PIN (1), TARGET (1.6),
#   BIN (target/release/examples/transpose_threads, built with cargo if missing),
#   LOG (raw output, default target/two-thread-protocol.log).
# Nothing else should run meanwhile: a build or a test run beside it moves the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,17p' "$0"; exit 2; }
PROCS=${PROCS:-8} GAP=${GAP:-60} ROUNDS=${ROUNDS:-21} PIN=${PIN:-1} TARGET=${TARGET:-1.6}
BIN=${BIN:-target/release/examples/transpose_threads}
LOG=${LOG:-target/two-thread-protocol.log}
if [ ! -x "$BIN" ]; then
  cargo build --release -p tessera-mesh --example transpose_threads
fi
mkdir -p "$(dirname "$LOG")"
: > "$LOG"
pin=()
[ "$PIN" = 1 ] && pin=(--pin)
for ((p = 1; p <= PROCS; p++)); do
  for m in "$@"; do
    echo "### process $p $(date -u +%FT%TZ) $(basename "$m") load $(cut -d' ' -f1 /proc/loadavg)" >> "$LOG"
    "$BIN" "$m" "${pin[@]}" --threads 2 --rounds "$ROUNDS" >> "$LOG"
  done
  [ "$p" -lt "$PROCS" ] && sleep "$GAP"
done
# per mesh and op: the process medians ("1.31x" after the two times), then the summary
awk -v target="$TARGET" '
  /^### process/ { mesh = $5; next }
  /^d[123] / {
    r = ""
    for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+x$/) { r = substr($i, 1, length($i) - 1); break }
    if (r == "") next
    key = mesh " " $1
    if (!(key in n)) order[++nk] = key
    v[key, ++n[key]] = r + 0
  }
  END {
    printf "%-32s %6s %7s %7s %7s   %s\n", "mesh, transpose", "procs", "median", "min", "max", ">= " target "x"
    for (k = 1; k <= nk; k++) {
      key = order[k]; c = n[key]
      for (i = 1; i <= c; i++) s[i] = v[key, i]
      for (i = 2; i <= c; i++) { x = s[i]; j = i - 1; while (j >= 1 && s[j] > x) { s[j + 1] = s[j]; j-- } s[j + 1] = x }
      med = (c % 2) ? s[(c + 1) / 2] : (s[c / 2] + s[c / 2 + 1]) / 2
      hit = 0; for (i = 1; i <= c; i++) if (s[i] >= target) hit++
      printf "%-32s %6d %6.2fx %6.2fx %6.2fx   %d of %d\n", key, c, med, s[1], s[c], hit, c
    }
  }' "$LOG"
echo "raw: $LOG"
