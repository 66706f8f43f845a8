#!/bin/bash
# The native CNN's CPU step against PyTorch's for the same network and batch (issue 33's goal:
# at least 0.7x PyTorch's examples/s). Builds cnn_step_bench optimized, then alternates the two
# sides --repeats times for each thread count and batch size, and prints each run's figure and
# the median ratio. Both sides time a forward pass, the loss and every gradient (no optimizer:
# the native worker's update is the ps's).
#
#   bench/cnn_step_bench.sh [--job=config/jobs/fashion_mnist_cnn.json] [--repeats=5]
#       [--threads=1,2] [--batch_sizes=16,64]
set -euo pipefail
cd "$(dirname "$0")/.."
job=config/jobs/fashion_mnist_cnn.json repeats=5 threads=1,2 batch_sizes=16,64
for arg in "$@"; do
  case "$arg" in
    --job=*) job="${arg#*=}" ;;
    --repeats=*) repeats="${arg#*=}" ;;
    --threads=*) threads="${arg#*=}" ;;
    --batch_sizes=*) batch_sizes="${arg#*=}" ;;
    *) echo "cnn_step_bench.sh: unknown argument $arg (see the script's header)" >&2; exit 2 ;;
  esac
done
/usr/bin/python3 -c 'import torch' 2>/dev/null || {
  echo "cnn_step_bench.sh: needs Debian's python3-torch (apt-get install python3-torch)" >&2
  exit 1
}
bazel build -c opt //bench:cnn_step_bench
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
cp bazel-bin/bench/cnn_step_bench "$bin/"  # bazel-bin may switch configurations later.
rate() { sed -n 's/.*"examples_per_second": \([0-9.]*\).*/\1/p'; }
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' with changes')"
echo "job $job, commit $commit, $(nproc) cores"
for t in ${threads//,/ }; do
  for b in ${batch_sizes//,/ }; do
    ours=() theirs=()
    for ((r = 0; r < repeats; ++r)); do
      ours+=("$("$bin/cnn_step_bench" --job="$job" --threads="$t" --batch_size="$b" | rate)")
      theirs+=("$(/usr/bin/python3 bench/cnn_step_bench.py --job="$job" --threads="$t" \
        --batch_size="$b" | rate)")
    done
    /usr/bin/python3 - "$t" "$b" "${ours[*]}" "${theirs[*]}" <<'PY'
import statistics, sys
threads, batch, ours, theirs = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
ratios = [float(o) / float(t) for o, t in zip(ours, theirs)]
print(f"threads {threads} batch {batch}: native {statistics.median(map(float, ours)):.0f} ex/s "
      f"({' '.join(ours)}), PyTorch {statistics.median(map(float, theirs)):.0f} ex/s "
      f"({' '.join(theirs)}), ratio median {statistics.median(ratios):.2f} "
      f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
PY
  done
done
