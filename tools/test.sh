#!/usr/bin/env bash
# Runs every test: installs what is missing (tools/setup.sh), builds everything, runs all
# tests, builds everything again with clang's thread-safety analysis (--config=thread_safety:
# every lock annotation checked), then every fuzz target for FUZZ_SECONDS (default 5; 0: none) with a fixed seed
# (tools/fuzz.sh), and ends with one line "tests: N passed, N failed". Extra arguments go to
# `bazel test`, for example: tools/test.sh --config=asan
set -euo pipefail

cd "$(dirname "$0")/.."
tools/setup.sh

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
bazel test --test_summary=short "$@" //... 2>&1 | tee "$log" || status=$?

locks_status=0
if ((status == 0)); then
  echo "thread safety: building //... with --config=thread_safety (clang -Wthread-safety)"
  bazel build --config=thread_safety //... >"$log.locks" 2>&1 || locks_status=$?
  if ((locks_status != 0)); then grep -E "error|ERROR" "$log.locks" | head -40; fi
  rm -f "$log.locks"
fi

fuzz_status=0
if ((status == 0 && ${FUZZ_SECONDS:-5} > 0)); then
  FUZZ_SEED=1 tools/fuzz.sh "${FUZZ_SECONDS:-5}" || fuzz_status=$?
fi

passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" || true)
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE)' "$log" || true)
if ((status != 0 && failed == 0)); then
  echo "tests: the build failed before the tests ran (see the errors above)"
fi
if ((locks_status != 0)); then
  echo "tests: the thread-safety build (clang -Wthread-safety) failed (its errors above)"
  failed=$((failed + 1))
  status=$locks_status
fi
if ((fuzz_status != 0)); then
  echo "tests: the fuzz targets found a problem or did not build (tools/fuzz.sh's lines above)"
  failed=$((failed + 1))
  status=$fuzz_status
fi
echo "tests: ${passed} passed, ${failed} failed"
exit "$status"
