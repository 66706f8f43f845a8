#!/usr/bin/env bash
# The GPU checks (bench/RESULTS.md, "On a GPU"), in one run on a machine with an NVIDIA GPU, from
# the bundle tools/gpu_bundle.sh packs here (.gpu/bundle.tar.xz):
#   1. the GPU: name, driver, CUDA;
#   2. conformance: the compute-backend and model tests, every case on the CPU and on cuda:0
#      against double-precision references (a skipped GPU case is a failure here);
#   3. compute-sanitizer memcheck and racecheck over the GPU cases;
#   4. speed: cuBLAS SGEMM through the backend for the MLP's shapes, and the worker's step
#      (worker_bench) on the GPU against the CPU;
#   5. training: psctl local, 1 ps + 2 workers sharing the GPU, against the same job on the CPU.
# Each part runs under a time limit; the summary at the end says what passed. The logs go into
# one archive, gpu_checks_logs.tar.gz, in $OUT (or /tmp/gpu_checks).
#
#   tools/gpu_checks.sh [PARTS]     PARTS: any of "info conformance sanitizer speed training"
set -uo pipefail
cd "$(dirname "$0")/.."
parts="${1:-info conformance sanitizer speed training}"
archive_dir="${OUT:-/tmp/gpu_checks}"
mkdir -p "$archive_dir"
work="$(mktemp -d)"
out="$work/logs"
mkdir -p "$out"
tar -C "$work" -xJf .gpu/bundle.tar.xz || { echo "gpu_checks: no bundle: run tools/gpu_bundle.sh"; exit 2; }
bin="$work/bin"
cuda_libs="$(dirname "$(find / -xdev -name 'libcublas.so.13' 2>/dev/null | head -1)")"
export LD_LIBRARY_PATH="$work/lib:${cuda_libs}:${LD_LIBRARY_PATH:-}"
export GLOG_logtostderr=1 PATH="$PATH:/usr/local/cuda/bin"
summary=()
record() { summary+=("$(printf '%-11s %-6s %s' "$1" "$2" "$3")"); }

# Runs "$@" with a limit of $1 seconds, its output into $out/$2.log and to the terminal.
timed() {
  local limit="$1" name="$2"
  shift 2
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$out/$name.log"
  return $rc
}

if [[ $parts == *info* ]]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  nvcc --version 2>/dev/null | tail -2
  echo "libcublas: $cuda_libs"
  missing="$(ldd "$bin"/* | grep 'not found' | sort -u)"
  [[ -z $missing ]] || echo "missing libraries: $missing"
fi

if [[ $parts == *conformance* ]]; then
  for test in compute_backend_test cuda_backend_test device_test model_test sparse_model_test; do
    timed 300 "$test" "$bin/$test" --gtest_brief=1
    rc=$?
    skipped="$(grep -c '\[  SKIPPED \]' "$out/$test.log")"
    if ((rc == 0 && skipped == 0)); then record "$test" PASS "every case ran"; else
      record "$test" FAIL "exit $rc, $skipped skipped"; fi
  done
fi

if [[ $parts == *sanitizer* ]]; then
  # The GPU cases only (the CPU's have no CUDA calls); death tests fork, so they stay out.
  for tool in memcheck racecheck; do
    for test in compute_backend_test cuda_backend_test model_test sparse_model_test; do
      filter='*Cuda*:-*DeathTest*'
      [[ $test == cuda_backend_test ]] && filter='*:-*DeathTest*'
      timed 300 "$tool-$test" compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$bin/$test" --gtest_brief=1 --gtest_filter="$filter"
      rc=$?
      errors="$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$tool-$test.log" | tail -1)"
      if ((rc == 0)); then record "$tool" PASS "$test: $errors"; else
        record "$tool" FAIL "$test: exit $rc: $errors"; fi
    done
  done
fi

if [[ $parts == *speed* ]]; then
  # An MLP 784-4096-4096-10 at batch 1024: the forward products, the weights' gradients
  # (k = the batch) and the hidden layers' input gradients.
  shapes=1024x4096x784,1024x4096x4096,1024x10x4096,784x4096x1024,4096x4096x1024,4096x10x1024
  shapes+=,1024x4096x10,4096x4096x4096
  timed 120 gemm_gpu "$bin/gemm_bench" --device=cuda:0 --seconds=1 --sizes="$shapes" &&
    record gemm_bench PASS "cuda:0" || record gemm_bench FAIL "cuda:0"
  for device in cuda:0 cpu; do
    tag="${device/:/}"
    timed 180 "worker_big_$tag" "$bin/worker_bench" --device="$device" --hidden=4096,4096 \
      --batch_size=1024 --steps=$([[ $device == cpu ]] && echo 5 || echo 50) --ps=2 --workers=1 &&
      record worker_big PASS "$device" || record worker_big FAIL "$device"
    timed 180 "worker_256_$tag" "$bin/worker_bench" --device="$device" --steps=300 \
      --ps=2 --workers=1 && record worker_256 PASS "$device" || record worker_256 FAIL "$device"
  done
fi

if [[ $parts == *training* ]]; then
  for device in cuda:0 cpu; do
    tag="${device/:/}"
    timed 240 "train_$tag" "$bin/psctl" local --job=config/jobs/default.json --ps=1 \
      --workers=2 --device="$device" --results="$work/results-$device" \
      --checkpoint_dir="$work/checkpoints-$device" --overwrite
    rc=$?
    final="$(tail -n 1 "$work/results-$device/eval.csv" 2>/dev/null)"
    cp "$work/results-$device/eval.csv" "$out/eval_$tag.csv" 2>/dev/null
    if ((rc == 0)); then record "train" PASS "$device: last eval.csv row: $final"; else
      record "train" FAIL "$device: exit $rc"; fi
  done
  grep -h "device\|cuda" "$out/train_cuda0.log" | head -5
fi

echo "== gpu_checks summary"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
tar -C "$work" -czf "$archive_dir/gpu_checks_logs.tar.gz" logs
rm -rf "$work"
