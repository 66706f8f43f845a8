#!/usr/bin/env bash
# Training throughput with a checkpoint every N seconds against none, in one run: worker_bench
# (2 ps and 2 workers in one process, the real trainer) alternately without and with
# --checkpoint_every_s, REPEATS times each; prints each run's examples/s (both workers) and the
# ratio of the medians. Results: bench/RESULTS.md.
#
#   bazel build -c opt //bench:worker_bench
#   bench/checkpoint_throughput.sh [REPEATS=3] [EVERY_S=10] [worker_bench flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-3}
every=${2:-10}
shift 2 || shift $#
bench=bazel-out/k8-opt/bin/bench/worker_bench
[[ -x $bench ]] || { echo "build it first: bazel build -c opt //bench:worker_bench" >&2; exit 2; }
flags=(--ps=2 --workers=2 --mode=ASYNC --hidden=2048,2048 --optimizer=ADAM --steps=300 "$@")

# examples/s of both workers together, from worker_bench's table.
throughput() { awk '$1 ~ /^[0-9]+$/ && NF == 8 { sum += $2 } END { printf "%.0f", sum }'; }

none=() with=()
for ((r = 1; r <= repeats; r++)); do
  out=$("$bench" "${flags[@]}" 2>/dev/null)
  none+=("$(throughput <<<"$out")")
  out=$("$bench" "${flags[@]}" --checkpoint_every_s="$every" 2>/dev/null)
  with+=("$(throughput <<<"$out")")
  echo "run $r: none ${none[-1]} examples/s, every ${every}s ${with[-1]} examples/s ($(grep '^checkpoints:' <<<"$out"))"
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
m_none=$(median "${none[@]}")
m_with=$(median "${with[@]}")
echo "median: none $m_none, every ${every}s $m_with examples/s; ratio $(awk -v a="$m_with" -v b="$m_none" 'BEGIN { printf "%.3f", a / b }')"
