#!/usr/bin/env bash
# tools/package.sh packs this build's programs (unoptimized here; tools/release.sh packs the
# release build) into a tarball and a Debian package that work: the package lists its
# programs, units and configs and depends on the libraries' packages, and the programs
# unpacked from it (dpkg -x) run the default job from the installed layout (/usr/bin and
# /usr/share/ps, with no Bazel tree around).
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

out="${TEST_TMPDIR}/dist"
PACKAGE_UNRELEASED=1 "${RUNFILES}/tools/package.sh" "$RUNFILES" "$out"

deb="$(ls "$out"/ps_*.deb)"
tarball="$(ls "$out"/ps-*-linux-*.tar.gz)"

info="$(dpkg-deb --info "$deb")"
for dependency in libgrpc++ libprotobuf libabsl libgoogle-glog libopenblas libc6 python3-numpy; do
  grep -q "Depends:.*${dependency}" <<<"$info" || fail "Depends lacks ${dependency}: ${info}"
done
contents="$(dpkg-deb --contents "$deb")"
for file in ./usr/bin/ps_server ./usr/bin/ps_worker ./usr/bin/psctl \
  ./lib/systemd/system/ps_server@.service ./lib/systemd/system/ps_worker@.service \
  ./usr/share/ps/config/jobs/default.json ./usr/share/ps/tools/report.py \
  ./usr/share/ps/systemd/ps_worker.env.example ./usr/share/ps/slurm/ps_job.sbatch \
  ./usr/share/ps/slurm/ps_task.sh ./usr/lib/python3/dist-packages/ps/_client.so \
  ./usr/lib/python3/dist-packages/ps/pytorch.py ./usr/share/ps/examples/numpy/linear_regression.py \
  ./usr/share/ps/examples/pytorch/fashion_mnist_cnn.py ./usr/share/doc/ps/docs/REFERENCE.md; do
  grep -q " ${file}\$" <<<"$contents" || fail "the package lacks ${file}"
done
grep -q "root/root .* ./usr/bin/psctl$" <<<"$contents" || fail "files are not owned by root"
listing="$(tar -tzf "$tarball")"
grep -qx "ps-[0-9.]*/bin/psctl" <<<"$listing" || fail "the tarball lacks bin/psctl: $listing"
log "ok: the package and the tarball hold what a release needs"

root="${TEST_TMPDIR}/installed"
dpkg -x "$deb" "$root"
"$root/usr/bin/psctl" --version | grep -q "^psctl version " || fail "psctl --version"
# Away from the runfiles tree (which holds server/ps_server too): psctl must find the daemons
# beside itself, as installed.
cd "${TEST_TMPDIR}"
"$root/usr/bin/psctl" local --job="$root/usr/share/ps/config/jobs/default.json" \
  --results="${TEST_TMPDIR}/results" --device=cpu >"${TEST_TMPDIR}/local.log" 2>&1 ||
  { cat "${TEST_TMPDIR}/local.log"; fail "psctl local from the unpacked package"; }
grep -q '"state": *"DONE"' "${TEST_TMPDIR}/results/summary.json" ||
  fail "the job did not end DONE: $(cat "${TEST_TMPDIR}/results/summary.json")"
log "ok: the unpacked programs ran the default job to DONE"

# One package for every host (issue 36): no program links a CUDA library; a CUDA build's GPU
# plugin sits in /usr/lib/ps and alone needs CUDA's libraries. On a host without them (here:
# this one, with the directory that holds cuBLAS hidden under an empty tmpfs in a mount
# namespace of its own), --device=auto runs the default job on the CPU and says why.
for program in psctl ps_server ps_worker; do
  if ldd "$root/usr/bin/$program" | grep -qE 'libcu(blas|dart)'; then
    fail "$program links CUDA's libraries: $(ldd "$root/usr/bin/$program" | grep libcu)"
  fi
done
plugin="$root/usr/lib/ps/libps_cuda.so"
if [[ ! -f "$plugin" ]]; then
  log "ok: the programs link no CUDA library (this build has no GPU plugin: built without CUDA)"
elif [[ "$(id -u)" != 0 ]] || ! unshare --mount true 2>/dev/null; then
  log "ok: the programs link no CUDA library; the run without CUDA skipped: hiding CUDA's" \
    "libraries needs root and a mount namespace"
else
  cuda_lib_dir="$(ldd "$plugin" | sed -n 's/.*libcublas\.so[^ ]* => \(\/[^ ]*\)\/libcublas\.so.*/\1/p')"
  [[ -n "$cuda_lib_dir" ]] || fail "the plugin does not find cuBLAS here: $(ldd "$plugin")"
  # cuBLAS from a system library directory (a Debian package): hiding it hides libc too.
  if ldd "$root/usr/bin/psctl" | grep -q " => $cuda_lib_dir/"; then
    log "ok: the programs link no CUDA library; the run without CUDA skipped: cuBLAS is in" \
      "$cuda_lib_dir, beside the programs' own libraries"
    cuda_lib_dir=""
  fi
fi
if [[ -f "$plugin" && -n "${cuda_lib_dir:-}" ]]; then
  unshare --mount bash -c "
    mount -t tmpfs none '$cuda_lib_dir' || exit 3
    ldd '$plugin' | grep -q 'libcublas.*not found' || exit 4
    '$root/usr/bin/psctl' local --job='$root/usr/share/ps/config/jobs/default.json' \
      --results='${TEST_TMPDIR}/no_cuda' --device=auto" >"${TEST_TMPDIR}/no_cuda.log" 2>&1 ||
    { cat "${TEST_TMPDIR}/no_cuda.log"; fail "psctl local --device=auto without CUDA's libraries"; }
  grep -q '"state": *"DONE"' "${TEST_TMPDIR}/no_cuda/summary.json" ||
    fail "the job without CUDA did not end DONE"
  grep -q "started job default on cpu (auto: cannot load the CUDA backend .*libcublas" \
    "${TEST_TMPDIR}/no_cuda.log" ||
    fail "the workers did not say why they run on the CPU: $(cat "${TEST_TMPDIR}/no_cuda.log")"
  log "ok: without CUDA's libraries the packaged programs ran the default job on the CPU:" \
    "$(grep -m1 'started job default on cpu' "${TEST_TMPDIR}/no_cuda.log")"
fi

# The Python package as installed: Debian's python3 imports it from dist-packages (here under
# the unpacked root), and a program job of the installed NumPy example runs to DONE.
grep -q '"python3", "/usr/share/ps/examples/numpy/linear_regression.py"' \
  "$root/usr/share/ps/config/jobs/numpy_linear.json" ||
  fail "the installed numpy_linear.json does not run the installed example"
export PYTHONPATH="$root/usr/lib/python3/dist-packages"
/usr/bin/python3 -c "import numpy" 2>/dev/null || skip "Debian's python3 lacks numpy"
/usr/bin/python3 -c "import ps; assert ps.__file__.startswith('$root')" ||
  fail "python3 cannot import the packaged ps"
sed "s|/usr/share/ps/examples|$root/usr/share/ps/examples|; s|\"python3\"|\"/usr/bin/python3\"|" \
  "$root/usr/share/ps/config/jobs/numpy_linear.json" > "${TEST_TMPDIR}/numpy_linear.json"
"$root/usr/bin/psctl" local --job="${TEST_TMPDIR}/numpy_linear.json" --workers=2 \
  --results="${TEST_TMPDIR}/numpy_results" >"${TEST_TMPDIR}/numpy.log" 2>&1 ||
  { cat "${TEST_TMPDIR}/numpy.log"; fail "psctl local of the packaged NumPy example"; }
grep -q '"state": *"DONE"' "${TEST_TMPDIR}/numpy_results/summary.json" ||
  fail "the NumPy job did not end DONE: $(cat "${TEST_TMPDIR}/numpy_results/summary.json")"
log "ok: the packaged Python package ran the packaged NumPy example to DONE"
