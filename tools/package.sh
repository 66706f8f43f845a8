#!/usr/bin/env bash
# Packs built programs into a release (tools/release.sh builds them first): BIN_DIR is a
# bazel-bin holding server/ps_server, worker/ps_worker and ctl/psctl. Writes
#   OUT_DIR/ps-<version>-linux-<arch>.tar.gz and OUT_DIR/ps_<version>_<arch>.deb
# as tools/release.sh describes. Each program's --version must name a commit and an optimized
# build, unless PACKAGE_UNRELEASED=1 (tests/release_package_test.sh packs the test build).
#
# Usage: tools/package.sh BIN_DIR OUT_DIR
set -euo pipefail

bin="$1"
out="$(realpath -m "$2")"
cd "$(dirname "$0")/.."

version="$(sed -n 's/.*kVersion\[\] = "\(.*\)";/\1/p' common/process/version.h)"
arch="$(dpkg --print-architecture)"
[[ -n "$version" ]] || { echo "package: no version in common/process/version.h" >&2; exit 1; }
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/ps-$version"
mkdir -p "$root/bin" "$root/share/ps/tools" "$root/share/ps/systemd" "$root/share/doc/ps"
cp "$bin/server/ps_server" "$bin/worker/ps_worker" "$bin/ctl/psctl" "$root/bin/"
chmod 0755 "$root/bin/"*
# The GPU plugin of a CUDA build (worker/compute/cuda_plugin.h), where the programs look for it:
# lib/ps/ beside bin/ (/usr/lib/ps in the Debian package).
if [[ -f "$bin/worker/compute/libps_cuda.so" ]]; then
  mkdir -p "$root/lib/ps"
  cp -L "$bin/worker/compute/libps_cuda.so" "$root/lib/ps/"
  chmod 0644 "$root/lib/ps/libps_cuda.so"
fi
cp -rL config "$root/share/ps/config"
find "$root/share/ps/config" -name BUILD -delete
cp tools/report.py tools/report_plots.py tools/compare_runs.py tools/run_report.py \
  "$root/share/ps/tools/"
cp deploy/systemd/*.service deploy/systemd/*.example "$root/share/ps/systemd/"
mkdir -p "$root/share/ps/slurm"
cp -L deploy/slurm/* "$root/share/ps/slurm/"
chmod 0755 "$root/share/ps/slurm/"*.sh "$root/share/ps/slurm/"*.sbatch
cp README.md "$root/share/doc/ps/"
mkdir -p "$root/share/doc/ps/docs"
cp docs/REFERENCE.md docs/DEPLOY.md "$root/share/doc/ps/docs/"
# The Python package (python/ps, where BIN_DIR has it built: //python/ps) where Debian's python3
# finds it, /usr/lib/python3/dist-packages/ps, and the example programs; the example jobs'
# programs then run from there: ["python3", "/usr/share/ps/examples/..."].
python_site="$bin/python/ps/site/ps"
if [[ -f "$python_site/_client.so" ]]; then
  mkdir -p "$root/lib/python3/dist-packages/ps" "$root/share/ps/examples"
  cp -L "$python_site"/*.py "$python_site/_client.so" "$root/lib/python3/dist-packages/ps/"
  chmod 0644 "$root/lib/python3/dist-packages/ps/"*
  cp -rL examples/pytorch examples/numpy "$root/share/ps/examples/"
  sed -i 's|"tools/ps_python", "examples/|"python3", "/usr/share/ps/examples/|' \
    "$root/share/ps/config/jobs/"*.json
else
  echo "package: no Python package in $bin/python/ps/site (bazel build //python/ps): left out"
fi
[[ -f docs/DEPLOY.md ]] && cp docs/DEPLOY.md "$root/share/doc/ps/"

for program in ps_server ps_worker psctl; do
  line="$("$root/bin/$program" --version)"
  echo "package: $line"
  if [[ "${PACKAGE_UNRELEASED:-0}" != 1 && "$line" != *"commit "*", built "*", optimized)"* ]]; then
    echo "package: $program --version does not name a commit and an optimized build" >&2
    exit 1
  fi
done

mkdir -p "$out"
tarball="$out/ps-${version}-linux-${arch}.tar.gz"
tar -C "$stage" --owner=0 --group=0 -czf "$tarball" "ps-$version"

# The Debian package: the same files under /usr, the units where systemd looks.
deb_root="$stage/deb"
mkdir -p "$deb_root/usr" "$deb_root/lib/systemd/system" "$deb_root/etc/ps" "$deb_root/DEBIAN"
cp -r "$root/bin" "$root/share" "$deb_root/usr/"
[[ -d "$root/lib" ]] && cp -r "$root/lib" "$deb_root/usr/"
cp deploy/systemd/*.service "$deb_root/lib/systemd/system/"

# Depends: the package of each shared library the programs load, as installed here. The GPU
# plugin's own libraries (CUDA's) are not: the package must install on hosts without them.
libraries() { ldd "$@" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p' | sort -u; }
programs_libraries="$(libraries "$root/bin/"* "$root"/lib/python3/dist-packages/ps/*.so)"
packages=()
while read -r library; do
  if owner="$(dpkg -S "$(realpath "$library")" 2>/dev/null || dpkg -S "$library" 2>/dev/null)"; then
    packages+=("${owner%%:*}")
  fi
done <<<"$programs_libraries"
cuda_libs=()
while read -r library; do
  [[ -n "$library" ]] && ! grep -qxF "$library" <<<"$programs_libraries" &&
    cuda_libs+=("$(basename "$library")")
done < <(libraries "$root"/lib/ps/*.so)
depends="$(printf '%s\n' "${packages[@]}" | sort -u | while read -r package; do
  echo "$package (>= $(dpkg-query -W -f='${Version}' "$package" | sed 's/-[^-]*$//'))"
done | paste -sd, | sed 's/,/, /g')"
recommends=""
if [[ -d "$root/lib/python3" ]]; then
  # The extension is built against this Debian's Python 3 (its ABI), and takes NumPy arrays;
  # the PyTorch integration and examples want python3-torch.
  python_version="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  python_next="$(python3 -c 'import sys; print("%d.%d" % (sys.version_info[0], sys.version_info[1] + 1))')"
  depends="${depends}, python3 (>= ${python_version}), python3 (<< ${python_next}), python3-numpy"
  recommends="Recommends: python3-torch, python3-matplotlib"  # psctl report's plots too.
fi
description="Parameter-server training service: ps_server, ps_worker and psctl"
note=""
if ((${#cuda_libs[@]} > 0)); then
  note=" .
 To look for a GPU, ps_worker (unless --device=cpu) and psctl check load the CUDA plugin,
 /usr/lib/ps/libps_cuda.so, which needs CUDA's libraries, not among this package's
 dependencies: $(printf '%s ' "${cuda_libs[@]}")(for example from the CUDA toolkit in
 /usr/local/cuda). Without them the workers run on the CPU and say why."
fi
installed_kb="$(du -sk "$deb_root/usr" "$deb_root/lib" | awk '{s += $1} END {print s}')"
cat >"$deb_root/DEBIAN/control" <<CONTROL
Package: ps
Version: ${version}
Architecture: ${arch}
Maintainer: ps developers <ps@localhost>
Installed-Size: ${installed_kb}
Depends: ${depends}
Section: science
Priority: optional
Description: ${description}
 Sharded ps daemons hold a model's variables and apply updates; workers pull weights, compute
 gradients on their data shard and push them over gRPC. psctl submits jobs and runs
 experiments (synchronous, asynchronous, bounded-staleness SGD). Units for systemd:
 ps_server@.service and ps_worker@.service, configured in /etc/ps.${note}
CONTROL
if [[ -n "$recommends" ]]; then sed -i "/^Depends:/a ${recommends}" "$deb_root/DEBIAN/control"; fi
deb="$out/ps_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$deb_root" "$deb" >/dev/null

echo "package: $tarball ($(du -h "$tarball" | cut -f1))"
echo "package: $deb ($(du -h "$deb" | cut -f1)); Depends: $depends"
if ((${#cuda_libs[@]} > 0)); then echo "package: not from Debian packages: ${cuda_libs[*]}"; fi
