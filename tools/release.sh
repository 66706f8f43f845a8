#!/usr/bin/env bash
# Makes a versioned release of the three programs users run, built optimized and stamped with
# the git commit (bazel build --config=release):
#   dist/ps-<version>-linux-<arch>.tar.gz   bin/, share/ps/ (configs, report script, systemd
#                                           units and examples), share/doc/ps/, and the Python
#                                           package in lib/python3/dist-packages/ps
#   dist/ps_<version>_<arch>.deb            the same under /usr (import ps with Debian's python3),
#                                           units in /lib/systemd/system;
#                                           Depends lists the Debian packages of every shared
#                                           library the programs load (found with ldd, dpkg -S)
# (tools/package.sh packs them), and checks that each program's --version names the commit
# and an optimized build. A CUDA build (tools/setup.sh turns it on where nvcc exists) adds the
# GPU plugin, lib/ps/libps_cuda.so, which the programs load only to look for a GPU (dlopen): it
# needs CUDA's own libraries, which no Debian package provides, and the package's description
# says so; the programs link none, so the same package runs on hosts without CUDA (on the
# CPU). The plugin comes with ps_worker (a data dependency). RELEASE_CUDA=0 builds without it.
#
# Usage: tools/release.sh [OUT_DIR]   (default: dist)
set -euo pipefail

cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-dist}")"
tools/setup.sh

flags=(--config=release)
if [[ "${RELEASE_CUDA:-1}" == 0 ]]; then flags+=(--define=cuda=0); fi
targets=(//server:ps_server //worker:ps_worker //ctl:psctl //python/ps)
echo "release: building ${targets[*]} (${flags[*]})"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
bazel build "${flags[@]}" "${targets[@]}" >"$log" 2>&1 || { cat "$log"; exit 1; }
bin="$(bazel info "${flags[@]}" bazel-bin 2>/dev/null)"

tools/package.sh "$bin" "$out"
