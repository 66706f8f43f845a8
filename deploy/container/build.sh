#!/usr/bin/env bash
# Builds the ps container image from the release binaries, with podman and no registry:
# a FROM scratch image holding /usr/bin/{ps_server,ps_worker,psctl}, a CUDA build's GPU plugin
# (/usr/lib/ps/libps_cuda.so), the shared libraries ldd finds for them (at the same paths, the dynamic loader included), the example jobs under
# /usr/share/ps/config/jobs, a passwd naming nobody, and an empty /tmp. Prints the image's size.
#
# Usage: deploy/container/build.sh [--bin_dir=DIR] [--tag=NAME:TAG] [--print_tag]
#   --bin_dir  where ps_server, ps_worker and psctl are (server/, worker/, ctl/ under it, as in
#              bazel-bin); default: build them with `bazel build --config=release`
#   --tag      the image's name (default ps:<version>-<commit>, the commit ps_server --version
#              names, so that each build has a tag of its own and a cluster's IfNotPresent pulls a
#              rebuilt image; a build from a modified tree, or an unstamped one, adds the first
#              12 hex digits of the programs' SHA-256)
#   --print_tag  print the image's name and build nothing
set -euo pipefail

cd "$(dirname "$0")/../.."
bin_dir=""
tag=""
print_tag=0
for arg in "$@"; do
  case "$arg" in
    --bin_dir=*) bin_dir="${arg#*=}" ;;
    --tag=*) tag="${arg#*=}" ;;
    --print_tag) print_tag=1 ;;
    *) echo "usage: $0 [--bin_dir=DIR] [--tag=NAME:TAG] [--print_tag]" >&2; exit 2 ;;
  esac
done
version="$(sed -n 's/.*kVersion\[\] = "\(.*\)";/\1/p' common/process/version.h)"
if [[ -z "$bin_dir" ]]; then
  echo "build: bazel build --config=release (ps_server, ps_worker, psctl)"
  bazel build --config=release //server:ps_server //worker:ps_worker //ctl:psctl
  bin_dir="$(bazel info --config=release bazel-bin 2>/dev/null)"
fi

if [[ -z "$tag" ]]; then
  commit="$("$bin_dir/server/ps_server" --version 2>&1 |
            sed -n 's/.*(commit \([0-9a-f]\{7,\}\(-modified\)\{0,1\}\),.*/\1/p' | head -n 1)"
  if [[ -z "$commit" || "$commit" == *-modified ]]; then
    sum="$(cat "$bin_dir/server/ps_server" "$bin_dir/worker/ps_worker" "$bin_dir/ctl/psctl" |
           sha256sum | cut -c 1-12)"
    commit="${commit:-unstamped}-$sum"
  fi
  tag="ps:$version-$commit"
fi
if ((print_tag)); then
  echo "$tag"
  exit 0
fi

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
rootfs="$stage/rootfs"
mkdir -p "$rootfs/usr/bin" "$rootfs/tmp" "$rootfs/etc" "$rootfs/usr/share/ps/config"
chmod 1777 "$rootfs/tmp"
programs=("$bin_dir/server/ps_server" "$bin_dir/worker/ps_worker" "$bin_dir/ctl/psctl")
for program in "${programs[@]}"; do
  install -m 0755 "$program" "$rootfs/usr/bin/"
done
# A CUDA build's GPU plugin where the programs look for it (worker/compute/cuda_plugin.h), with
# CUDA's libraries it loads; a CPU-only build has none.
loaded=("${programs[@]}")
if [[ -f "$bin_dir/worker/compute/libps_cuda.so" ]]; then
  mkdir -p "$rootfs/usr/lib/ps"
  install -m 0644 "$bin_dir/worker/compute/libps_cuda.so" "$rootfs/usr/lib/ps/"
  loaded+=("$bin_dir/worker/compute/libps_cuda.so")
fi
# Every library at the path the loader finds it at, followed to the file (not the symlink).
ldd "${loaded[@]}" | awk '/=> \// {print $3} /^[ \t]*\/[^ ]+ \(/ {print $1}' | sort -u |
  while read -r library; do
    mkdir -p "$rootfs$(dirname "$library")"
    cp -L "$library" "$rootfs$library"
  done
cp -r config/jobs "$rootfs/usr/share/ps/config/"
printf 'root:x:0:0:root:/:/usr/bin/nologin\nnobody:x:65534:65534:nobody:/tmp:/usr/bin/nologin\n' \
  >"$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
cp deploy/container/Containerfile "$stage/"

podman build --quiet --tag "$tag" --file "$stage/Containerfile" "$stage" >/dev/null
size="$(podman image inspect --format '{{.Size}}' "$tag")"
echo "image $tag: $((size / 1024 / 1024)) MiB ($size bytes), $(find "$rootfs" -name '*.so*' | wc -l) libraries"
echo "for Kubernetes, in your overlay: images: [{name: ps, newName: <registry>/ps, newTag: ${tag##*:}}]"
