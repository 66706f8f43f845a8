#!/bin/bash
# One package for every host (issue 36): the .deb made by tools/package.sh, installed with
# apt-get into a clean Debian root (debootstrap --variant=minbase from the package archive this
# machine uses, no CUDA anywhere), pulls in every library the programs need through its Depends
# and runs the README's default job there to DONE on the CPU, the workers saying why they do not
# use a GPU (the GPU plugin is installed, CUDA's libraries are not); the tarball unpacked in the
# same root runs it too. The root's /proc is mounted for the run and unmounted at the end.
#
# Needs root, debootstrap (installed when missing) and the package archive; skips, saying why,
# without them.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

[ "$(id -u)" = 0 ] || skip "debootstrap and chroot need root"
root="${TEST_TMPDIR}/debian"
cleanup() { mountpoint -q "$root/proc" && umount "$root/proc"; }
on_exit cleanup
apt_install_if_missing debootstrap debootstrap
LOG_FILES=("${TEST_TMPDIR}/*.log")

out="${TEST_TMPDIR}/dist"
PACKAGE_UNRELEASED=1 "${RUNFILES}/tools/package.sh" "$RUNFILES" "$out" >"${TEST_TMPDIR}/package.log"
deb="$(ls "$out"/ps_*.deb)"
tarball="$(ls "$out"/ps-*-linux-*.tar.gz)"

# The archive and release this machine's apt uses (deb822 sources, else sources.list).
mirror="$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
  grep -v security | head -1)"
[ -n "$mirror" ] ||
  mirror="$(sed -n 's/^deb \(http[^ ]*\) .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -1)"
codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
[ -n "$mirror" ] && [ -n "$codename" ] || skip "no Debian archive or release found in apt's sources"
log "debootstrap $codename from $mirror"
debootstrap --variant=minbase "$codename" "$root" "$mirror" >"${TEST_TMPDIR}/debootstrap.log" 2>&1 ||
  skip "debootstrap from $mirror failed (no archive reachable?): $(tail -2 "${TEST_TMPDIR}/debootstrap.log")"
find "$root" -regextype egrep -regex '.*/libcu(da|dart|blas|blasLt)\.so.*' | grep -q . &&
  fail "the clean root has CUDA libraries"

cp "$deb" "$root/tmp/ps.deb"
chroot "$root" apt-get update -q >"${TEST_TMPDIR}/apt.log" 2>&1 ||
  skip "apt-get update in the clean root failed: $(tail -2 "${TEST_TMPDIR}/apt.log")"
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  /tmp/ps.deb >>"${TEST_TMPDIR}/apt.log" 2>&1 || fail "apt-get install of the package failed"
log "ok: apt-get installed $(basename "$deb") and its Depends into a clean $codename root"

mkdir -p "$root/opt"
tar -xzf "$tarball" -C "$root/opt"
tarball_bin="$(cd "$root" && ls -d opt/ps-*/bin)"
mount -t proc proc "$root/proc"
# Why the workers run on the CPU: a CUDA build's plugin cannot load without CUDA's libraries;
# a build without CUDA has no plugin.
contents="$(dpkg-deb --contents "$deb")"
if grep -q ' ./usr/lib/ps/libps_cuda.so$' <<<"$contents"; then
  why="cannot load the CUDA backend .*libcublas"
else
  why="built without CUDA"
fi
# run NAME PSCTL: the default job with psctl PSCTL (a path in the root), results in /tmp/NAME.
run() {
  chroot "$root" /bin/sh -c "cd /tmp && $2 local --job=/usr/share/ps/config/jobs/default.json \
    --results=/tmp/$1 --device=auto" >"${TEST_TMPDIR}/$1.log" 2>&1 ||
    fail "psctl local ($2) in the clean root failed"
  grep -q '"state": *"DONE"' "$root/tmp/$1/summary.json" || fail "the $1 job did not end DONE"
  grep -q "started job default on cpu (auto: $why" "${TEST_TMPDIR}/$1.log" ||
    fail "the $1 workers did not say why they run on the CPU"
  log "ok: $2 ran the default job to DONE: $(grep -m1 'started job default' "${TEST_TMPDIR}/$1.log")"
}
run deb /usr/bin/psctl
run tarball "/$tarball_bin/psctl"
log "PASSED"
