#!/usr/bin/env bash
# Bazel's --workspace_status_command under --config=release (.bazelrc): the git commit the
# binaries are built from, and whether the tree had changes, for --version
# (common/process/build_info.h). Keys starting with STABLE_ rebuild what uses them when they change.
set -euo pipefail
cd "$(dirname "$0")/.."
commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if [[ "$commit" != unknown ]] && ! git diff --quiet HEAD -- 2>/dev/null; then
  commit="${commit}-modified"
fi
echo "STABLE_GIT_COMMIT ${commit}"
echo "BUILD_DATE_UTC $(date -u +%Y-%m-%dT%H:%M:%SZ)"
