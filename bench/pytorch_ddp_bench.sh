#!/bin/bash
# PyTorch workers through the ps against PyTorch's DistributedDataParallel (bench/
# pytorch_ddp_bench.py says what it measures). Builds ps_server and the ps package optimized,
# then runs the comparison; extra arguments go to the script (--workers=1,2 --repeats=5 ...).
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build -c opt //server:ps_server //python/ps
PYTHONPATH="$PWD/bazel-bin/python/ps/site" exec /usr/bin/python3 bench/pytorch_ddp_bench.py \
  --ps_server="$PWD/bazel-bin/server/ps_server" "$@"
