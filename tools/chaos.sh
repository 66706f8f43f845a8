#!/usr/bin/env bash
# The chaos run of live recovery with more kills than CI makes: tests/chaos_test.cc, whose
# seeded driver kill -9s random tasks of a 2-ps, 3-worker cluster on this machine while a SYNC
# and an ASYNC job run, and starts each again 0 to 2 s later. Prints, per mode, the job's end,
# its accuracy against the same job undisturbed, and per recovery the steps done again and the
# time from the ps's restart to the job's next applied step. Exit 0 when every check held.
#
#   tools/chaos.sh [KILLS=20] [SEED=1] [MODE=SYNC|ASYNC|all]
#
# The results directories (events.csv, metrics.csv, summary.json) are kept in
# bazel-testlogs/tests/chaos_test/test.outputs/outputs.zip.
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-20}
seed=${2:-1}
mode=${3:-all}
filter=()
[[ $mode == all ]] || filter=(--test_filter="*/$mode")
exec bazel test //tests:chaos_test --test_env=CHAOS_KILLS="$kills" --test_env=CHAOS_SEED="$seed" \
  "${filter[@]}" --test_timeout=3600 --test_output=streamed --nocache_test_results
