#!/bin/bash
# The Python binding's cost per step against C++ and against a ps_worker step (bench/
# binding_cost_bench.py says what it measures). Builds the programs and the ps package
# optimized, then runs it; extra arguments go to the script (--repeats=7 ...).
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build -c opt //server:ps_server //worker:ps_worker //ctl:psctl //bench:session_step_bench \
  //python/ps
PYTHONPATH="$PWD/bazel-bin/python/ps/site" exec /usr/bin/python3 bench/binding_cost_bench.py \
  --ps_server="$PWD/bazel-bin/server/ps_server" \
  --session_step_bench="$PWD/bazel-bin/bench/session_step_bench" \
  --psctl="$PWD/bazel-bin/ctl/psctl" "$@"
