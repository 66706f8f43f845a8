#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs the main job on the
# embedded default, a local cluster on this machine (config/clusters/local.json).
set -euo pipefail

cd "$(dirname "$0")/.."
tools/setup.sh
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
echo "local: building (bazel build //...)"
bazel build //... >"$log" 2>&1 || { cat "$log"; exit 1; }
bazel-bin/ctl/psctl check --cluster_spec=config/clusters/local.json "$@"
