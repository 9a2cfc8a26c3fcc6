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
# With ARGS=--ideal every round also runs the ideal bound of that moment (two threads, each the
# one-thread transpose of half of the rows, nothing shared; see the example's docs), and the
# summary adds the medians of one thread / ideal (what the machine gave two threads) and of
# ideal / 2 threads (how much of it the parallel transpose reached).
# Environment: PROCS (8), GAP (60), ROUNDS (21), PIN (1), TARGET (1.6), ARGS (more arguments),
#   BIN (target/release/examples/transpose_threads, built with cargo if missing),
#   LOG (raw output, default target/two-thread-protocol.log).
# Nothing else should run meanwhile: a build or a test run beside it moves the ratios.
# Both runs are in one memory regime: by default `reuse` (freed memory kept in one arena and
# reused); ARGS="--regime fresh" gives every run fresh pages. Judge the transposes in both.
# (Before session 40 the example ran in glibc's default regime, where the one-thread and the
# parallel runs could differ: ARGS="--regime default" repeats that.)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,/^set /{/^#/p}' "$0"; exit 2; }
PROCS=${PROCS:-8} GAP=${GAP:-60} ROUNDS=${ROUNDS:-21} PIN=${PIN:-1} TARGET=${TARGET:-1.6}
read -r -a extra <<< "${ARGS:-}"
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
    "$BIN" "$m" "${pin[@]}" ${extra[@]+"${extra[@]}"} --threads 2 --rounds "$ROUNDS" >> "$LOG"
  done
  [ "$p" -lt "$PROCS" ] && sleep "$GAP"
done
# per mesh and op: the process medians ("1.31x" after the two times), then the summary
awk -v target="$TARGET" '
  /^### process/ { mesh = $5; next }
  # the medians ending in "x": the 2-thread ratio, then (with --ideal) 1 thread / ideal and
  # ideal / 2 threads
  /^d[123] / {
    m = 0
    for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+x$/) r[++m] = substr($i, 1, length($i) - 1) + 0
    if (m == 0) next
    key = mesh " " $1
    if (!(key in n)) order[++nk] = key
    c = ++n[key]
    for (j = 1; j <= 3; j++) v[j, key, c] = (j <= m) ? r[j] : -1
  }
  function median(j, key, c,    i, k, x, s, t) {
    t = 0
    for (i = 1; i <= c; i++) if (v[j, key, i] >= 0) s[++t] = v[j, key, i]
    if (t == 0) return -1
    for (i = 2; i <= t; i++) { x = s[i]; k = i - 1; while (k >= 1 && s[k] > x) { s[k + 1] = s[k]; k-- } s[k + 1] = x }
    lo = s[1]; hi = s[t]
    return (t % 2) ? s[(t + 1) / 2] : (s[t / 2] + s[t / 2 + 1]) / 2
  }
  END {
    head = sprintf("%-32s %6s %7s %7s %7s   %-9s", "mesh, transpose", "procs", "median", "min", "max", ">= " target "x")
    if (nk > 0 && median(2, order[1], n[order[1]]) >= 0) head = head sprintf(" %13s %15s", "1 thr./ideal", "ideal/2 thr.")
    print head
    for (k = 1; k <= nk; k++) {
      key = order[k]; c = n[key]
      med = median(1, key, c); mn = lo; mx = hi
      hit = 0; for (i = 1; i <= c; i++) if (v[1, key, i] >= target) hit++
      line = sprintf("%-32s %6d %6.2fx %6.2fx %6.2fx   %-9s", key, c, med, mn, mx, hit " of " c)
      ideal = median(2, key, c); reach = median(3, key, c)
      if (ideal >= 0) line = line sprintf(" %12.2fx %14.2fx", ideal, reach)
      print line
    }
  }' "$LOG"
echo "raw: $LOG"
