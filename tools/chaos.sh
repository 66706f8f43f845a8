#!/usr/bin/env bash
# The chaos runs with more kills than CI makes. Prints, per run, the job's end and its accuracy
# against the same job undisturbed. Exit 0 when every check held.
#
#   tools/chaos.sh [KILLS=20] [SEED=1] [MODE=SYNC|ASYNC|all|replicated]
#
# SYNC, ASYNC, all: live recovery from checkpoints (tests/chaos_test.cc), whose seeded driver
# kill -9s random tasks of a 2-ps, 3-worker cluster on this machine while a SYNC and an ASYNC job
# run, and starts each again 0 to 2 s later; printed per recovery: the steps done again and the
# time from the ps's restart to the job's next applied step. The results directories
# (events.csv, metrics.csv, summary.json) are kept in
# bazel-testlogs/tests/chaos_test/test.outputs/outputs.zip.
#
# replicated: replicated shards (tests/replication_process_test.cc): kill -9 of random ps and
# workers of a 3-ps, 3-worker cluster running a SYNC job with "replicas": 2 and a checkpoint
# every 500 steps; no step may be done again (no rollback), the model must be the undisturbed run's, and every takeover must come
# within 1 s of its kill. Printed per kill: each shard's takeover time. The daemons' logs and the
# results are kept in bazel-testlogs/tests/replication_process_test/test.outputs/outputs.zip.
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-20}
seed=${2:-1}
mode=${3:-all}
if [[ $mode == replicated ]]; then
  exec bazel test //tests:replication_process_test --test_env=REPLICATION_KILLS="$kills" \
    --test_env=REPLICATION_SEED="$seed" --test_timeout=3600 --test_output=streamed \
    --nocache_test_results
fi
filter=()
[[ $mode == all ]] || filter=(--test_filter="*/$mode")
exec bazel test //tests:chaos_test --test_env=CHAOS_KILLS="$kills" --test_env=CHAOS_SEED="$seed" \
  "${filter[@]}" --test_timeout=3600 --test_output=streamed --nocache_test_results
