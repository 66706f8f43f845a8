#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs the default job
# (config/jobs/default.json) on a local cluster of 2 ps and 2 workers on this machine, with
# `psctl local`. Results go to results/default (replaced on each run). Extra arguments go to
# psctl local, e.g. tools/local.sh --job=config/jobs/async_downpour.json --workers=4
set -euo pipefail

cd "$(dirname "$0")/.."
tools/setup.sh
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
echo "local: building (bazel build //...)"
bazel build //... >"$log" 2>&1 || { cat "$log"; exit 1; }
exec bazel-bin/ctl/psctl local --overwrite "$@"
