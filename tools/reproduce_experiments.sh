#!/bin/bash
# Regenerates the reports behind docs/EXPERIMENTS.md's tables (docs/experiments/SWEEP/report.md,
# its plots and sweep.csv) from one commit with one command: builds the release
# binaries, prepares the real data sets the sweeps read (tools/prepare_digits.py,
# tools/prepare_weka_data.py), runs each sweep on local clusters (psctl experiment --local),
# draws its report (psctl report) into docs/experiments/NAME/, and stamps each report with the
# commit, the command and the machine that made it.
#
#   tools/reproduce_experiments.sh                         # every sweep below (hours on 2 cores)
#   tools/reproduce_experiments.sh fashion_mnist_cnn modes # some of them
#   tools/reproduce_experiments.sh --quick                 # the CI sweep end to end, in a minute
#
# --quick runs config/sweeps/ci.json through the same steps into a temporary directory and
# checks the stamped report (tests/reproduce_experiments_test runs it); it takes no sweep names
# and no --out. --psctl, --ps_server and --ps_worker give built binaries instead of building;
# --out=DIR writes there instead of docs/experiments. The per-run directories are not kept
# (run a sweep with psctl experiment to have them).
set -euo pipefail
readonly ALL_SWEEPS=(fashion_mnist_cnn fashion_mnist_cnn_stragglers
  fashion_mnist_cnn_heterogeneity tuned_digits modes async_lr backup_workers downpour overlap
  ps_vs_allreduce compression_digits embedding_bag_soybean sparse_reuters)
quick=0 psctl="" ps_server="" ps_worker="" out=docs/experiments sweeps=()
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --psctl=*) psctl="$(realpath -m "${arg#*=}")" ;;
    --ps_server=*) ps_server="$(realpath -m "${arg#*=}")" ;;
    --ps_worker=*) ps_worker="$(realpath -m "${arg#*=}")" ;;
    --out=*) out="$(realpath -m "${arg#*=}")" ;;
    -*) echo "reproduce_experiments.sh: unknown flag $arg (see the script's header)" >&2; exit 2 ;;
    *)
      [ -f "$(dirname "$0")/../config/sweeps/$arg.json" ] || {
        echo "reproduce_experiments.sh: no config/sweeps/$arg.json; sweeps: ${ALL_SWEEPS[*]}" >&2
        exit 2
      }
      sweeps+=("$arg") ;;
  esac
done
cd "$(dirname "$0")/.."
temporary=()
trap 'rm -rf "${temporary[@]}"' EXIT
if [ "$quick" = 1 ]; then
  if [ "${#sweeps[@]}" -gt 0 ] || [ "$out" != docs/experiments ]; then
    echo "reproduce_experiments.sh: --quick runs the CI sweep alone, into a temporary directory:" \
      "give it no sweep names and no --out" >&2
    exit 2
  fi
  sweeps=(ci)
  out="$(mktemp -d)"
  temporary+=("$out")
fi
[ "${#sweeps[@]}" -gt 0 ] || sweeps=("${ALL_SWEEPS[@]}")
for sweep in "${sweeps[@]}"; do
  if [[ "$sweep" = fashion_mnist_* ]] &&
    [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    echo "reproduce_experiments.sh: the $sweep sweep reads Debian's" \
      "dataset-fashion-mnist: apt-get install dataset-fashion-mnist" >&2
    exit 1
  fi
done

if [ -z "$psctl" ]; then
  echo "reproduce: building the release binaries (bazel build --config=release)"
  bazel build --config=release //ctl:psctl //server:ps_server //worker:ps_worker
  bin="$(mktemp -d)"
  temporary+=("$bin")
  cp bazel-bin/ctl/psctl bazel-bin/server/ps_server bazel-bin/worker/ps_worker "$bin/"
  psctl="$bin/psctl" ps_server="$bin/ps_server" ps_worker="$bin/ps_worker"
fi
if commit="$(git rev-parse --short=12 HEAD 2>/dev/null)"; then
  git diff --quiet HEAD || commit="$commit with uncommitted changes"
else
  commit="unknown (not a git checkout)"
fi
command="tools/reproduce_experiments.sh $*"

for sweep in "${sweeps[@]}"; do
  file="config/sweeps/$sweep.json"
  case "$sweep" in
    *_digits) [ -f data/digits/train.csv ] || /usr/bin/python3 tools/prepare_digits.py ;;
    embedding_bag_soybean | sparse_reuters)
      [ -d data/weka ] || /usr/bin/python3 tools/prepare_weka_data.py ;;
  esac
  results="$out/$sweep"
  started="$(date -u +%Y-%m-%dT%H:%M:%SZ)" load_before="$(cut -d' ' -f1 /proc/loadavg)"
  echo "reproduce: $sweep ($file) into $results"
  "$psctl" experiment --sweep="$file" --local --device=cpu --results="$results" --overwrite \
    --ps_server_binary="$ps_server" --ps_worker_binary="$ps_worker"
  "$psctl" report "$results"
  # The stamp: what made these tables, first in the report.
  {
    echo "> Made at commit $commit by \`$command\` (sweep \`$file\`), from $started to"
    echo "> $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo |
      cut -d: -f2 | sed 's/^ //')), 1-minute load $load_before before and"
    echo "> $(cut -d' ' -f1 /proc/loadavg) after (the sweep's own daemons included)."
    [ "$quick" = 1 ] || echo "> The per-run directories named below were not kept."
    echo
    cat "$results/report.md"
  } > "$results/report.md.stamped"
  mv "$results/report.md.stamped" "$results/report.md"
  # Leave the tables and plots; the per-run directories and logs stay out of the repository.
  if [ "$quick" = 0 ]; then
    find "$results" -mindepth 1 -maxdepth 1 ! -name report.md ! -name plots ! -name sweep.csv \
      ! -name sweep.json -exec rm -rf {} +
  fi
done
if [ "$quick" = 1 ]; then
  report="$out/ci/report.md"
  grep -q "^> Made at commit " "$report" && grep -q "^## Results" "$report" || {
    echo "reproduce_experiments.sh --quick: $report lacks its stamp or its tables" >&2
    exit 1
  }
  echo "reproduce: --quick made a stamped report of the CI sweep"
fi
