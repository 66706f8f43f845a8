#!/usr/bin/env bash
# Runs every test: installs what is missing (tools/setup.sh), builds everything with clang-14 and
# its thread-safety analysis (--config=thread_safety: every lock annotation checked, as an error
# like every warning) and runs all tests on that build, then every fuzz target for FUZZ_SECONDS
# (default 5; 0: none) with a fixed seed (tools/fuzz.sh), and ends with one line
# "tests: N passed, N failed". One build serves both the tests and the lock check: a second
# build of everything took 13 of CI's minutes on 2 cores. gcc, the compiler of `bazel test
# //...`, tools/local.sh and tools/release.sh, treats warnings as errors too; CI does not run it.
#
# Extra arguments go to `bazel test` instead of the thread-safety config, on the normal build
# (gcc), for example: tools/test.sh --config=asan
set -euo pipefail

cd "$(dirname "$0")/.."
tools/setup.sh

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
config=("$@")
if ((${#config[@]} == 0)); then
  config=(--config=thread_safety)
  echo "tests: building //... with clang-14 and its thread-safety analysis (--config=thread_safety)"
fi
bazel test --test_summary=short "${config[@]}" //... 2>&1 | tee "$log" || status=$?

fuzz_status=0
if ((status == 0 && ${FUZZ_SECONDS:-5} > 0)); then
  FUZZ_SEED=1 tools/fuzz.sh "${FUZZ_SECONDS:-5}" || fuzz_status=$?
fi

passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" || true)
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE)' "$log" || true)
if ((status != 0 && failed == 0)); then
  echo "tests: the build failed before the tests ran (see the errors above)"
fi
if ((fuzz_status != 0)); then
  echo "tests: the fuzz targets found a problem or did not build (tools/fuzz.sh's lines above)"
  failed=$((failed + 1))
  status=$fuzz_status
fi
echo "tests: ${passed} passed, ${failed} failed"
exit "$status"
