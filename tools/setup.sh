#!/usr/bin/env bash
# Installs every Debian package that building, running and testing need, idempotently: quiet
# when all is there, and says what it installs otherwise. Then turns the CUDA build on in
# .bazelrc.user where nvcc exists (off elsewhere, so the CPU path still builds and tests).
#
# Usage: tools/setup.sh        (run by tools/local.sh and tools/test.sh; safe to run again)
set -euo pipefail

cd "$(dirname "$0")/.."

PACKAGES=(
  # Build: Bazel 4 and the C++ toolchain.
  bazel-bootstrap bazel-rules-java g++
  # Libraries (see third_party/BUILD).
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgoogle-glog-dev libgflags-dev libgtest-dev libgmock-dev
  libopenblas-dev nlohmann-json3-dev libssl-dev libc-ares-dev libre2-dev zlib1g-dev
  libxxhash-dev
  # /metrics' HTTP server (common/net/metrics_http_server.h).
  libcpp-httplib-dev
  # Multi-host tests (network namespaces) and process control in tests.
  iproute2 procps
  # psctl report's plots (tools/report.py); numpy reads exported checkpoints in tests.
  python3 python3-matplotlib python3-numpy
  # Python and PyTorch workers (python/ps): the pybind11 binding against Debian's Python 3, and
  # PyTorch for ps.pytorch, its tests and examples.
  python3-dev pybind11-dev python3-torch
  # Fashion-MNIST's 70,000 images (IDX), the PyTorch CNN example's data
  # (examples/pytorch/fashion_mnist_cnn.py, tests/pytorch_fashion_mnist_test.sh).
  dataset-fashion-mnist
  # Real data for the experiments: scikit-learn's copy of the UCI handwritten digits
  # (tools/prepare_digits.py).
  python3-sklearn
  # LIBLINEAR and its heart_scale, the sparse logistic regression's reference
  # (tests/liblinear_reference_test).
  liblinear-tools
  # Real categorical and text data sets for the sparse models, from weka's examples
  # (tools/prepare_weka_data.py, tests/weka_data_test.sh).
  weka
  # psctl certs (the cluster's CA and certificates for mutual TLS).
  openssl
  # systemd-analyze checks deploy/systemd's units (tests/systemd_units_test.sh).
  systemd
  # The fuzz targets (tools/fuzz.sh, --config=fuzz): clang with libFuzzer and the sanitizers.
  clang-14 libclang-rt-14-dev
  # The container image and its test (deploy/container, tests/container_test.sh).
  podman runc
  # psctl dashboard's page in a real browser (tests/dashboard_chromium_test.sh).
  chromium
  # psctl top on a real terminal (tests/psctl_top_test.sh).
  tmux
  # OpenMPI's MPI_Allreduce, the ring all-reduce's yardstick (bench/allreduce_bench.sh).
  openmpi-bin libopenmpi-dev
  # The real Prometheus that scrapes a local cluster (tests/prometheus_test.sh); the test runs
  # its own server, so the package's service is kept from starting (below).
  prometheus
)
# The Kubernetes manifests' validator (tests/kubernetes_manifests_test.sh) runs on Node.js and
# installs its checkers with npm. Any Node.js with npm will do (some machines have NodeSource's,
# whose nodejs holds npm and conflicts with Debian's npm), so Debian's only where there is none.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  PACKAGES+=(nodejs npm)
fi

missing=()
for package in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install packages" >&2; exit 1; }
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  # No package's service starts as it is installed (prometheus's would take port 9090): Debian's
  # policy-rc.d, for the install only, unless the machine has its own.
  policy_rc_d=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    policy_rc_d=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy_rc_d" >/dev/null
    "${sudo[@]}" chmod +x "$policy_rc_d"
  fi
  status=0
  { "${sudo[@]}" apt-get update -qq &&
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } ||
    status=$?
  [[ -z "$policy_rc_d" ]] || "${sudo[@]}" rm -f "$policy_rc_d"
  ((status == 0)) || { echo "setup: apt-get install failed (exit $status)" >&2; exit "$status"; }
  echo "setup: installed ${#missing[@]} package(s)"
fi

# CUDA: on where nvcc exists. CUDA_HOME wins, then nvcc on PATH, then /usr/local/cuda.
cuda_home=""
if [[ -n "${CUDA_HOME:-}" && -x "${CUDA_HOME}/bin/nvcc" ]]; then
  cuda_home="$CUDA_HOME"
elif command -v nvcc >/dev/null; then
  cuda_home="$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")"
elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
  cuda_home=/usr/local/cuda
fi
if [[ -n "$cuda_home" ]]; then
  user_rc="# Written by tools/setup.sh: nvcc found in $cuda_home.
build --config=cuda --define=CUDA_HOME=$cuda_home"
else
  user_rc="# Written by tools/setup.sh: no nvcc found, so the CUDA backend is not built."
fi
if [[ ! -f .bazelrc.user || "$(cat .bazelrc.user)" != "$user_rc" ]]; then
  printf '%s\n' "$user_rc" > .bazelrc.user
  if [[ -n "$cuda_home" ]]; then
    echo "setup: CUDA build on (nvcc in $cuda_home)"
  else
    echo "setup: CUDA build off (no nvcc found); building the CPU path only"
  fi
fi
