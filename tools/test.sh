#!/usr/bin/env bash
# Runs every test: installs what is missing (tools/setup.sh), builds everything, runs all
# tests, and ends with one line "tests: N passed, N failed". Extra arguments go to
# `bazel test`, for example: tools/test.sh --config=asan
set -euo pipefail

cd "$(dirname "$0")/.."
tools/setup.sh

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
bazel test --test_summary=short "$@" //... 2>&1 | tee "$log" || status=$?

passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" || true)
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE)' "$log" || true)
if ((status != 0 && failed == 0)); then
  echo "tests: the build failed before the tests ran (see the errors above)"
fi
echo "tests: ${passed} passed, ${failed} failed"
exit "$status"
