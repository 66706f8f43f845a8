#!/usr/bin/env bash
# Packs what the GPU checks (tools/gpu_checks.sh) run into .gpu/ (git-ignored), for a machine
# with an NVIDIA GPU that has the CUDA runtime and cuBLAS but none of this project's Debian
# libraries: the CUDA build's test and benchmark binaries, psctl, ps_server and ps_worker,
# stripped, with the shared libraries they need beside them (not glibc, libstdc++ or CUDA's:
# those come from the GPU machine), and config/jobs/default.json's inputs (none: synthetic).
# Needs the CUDA build on (tools/setup.sh turns it on where nvcc exists).
#
#   tools/gpu_bundle.sh && du -sh .gpu     # then carry .gpu to the GPU machine
set -euo pipefail
cd "$(dirname "$0")/.."

tests=(//worker/compute:compute_backend_test //worker/compute:cuda_backend_test
       //worker/compute:device_test //worker/model:model_test //worker/model:sparse_model_test)
binaries=(//bench:gemm_bench //bench:worker_bench //server:ps_server //worker:ps_worker //ctl:psctl)
# Linked statically (the tests otherwise load one shared library per target from bazel-bin).
bazel build --dynamic_mode=off "${tests[@]}" >/dev/null
bazel build -c opt "${binaries[@]}" >/dev/null
fastbuild="$(bazel info --dynamic_mode=off bazel-bin 2>/dev/null)"
opt="$(bazel info -c opt bazel-bin 2>/dev/null)"

rm -rf .gpu
mkdir -p .gpu/bin .gpu/lib
for target in "${tests[@]}"; do
  path="${target#//}"; cp "$fastbuild/${path/://}" .gpu/bin/
done
for target in "${binaries[@]}"; do
  path="${target#//}"; cp "$opt/${path/://}" .gpu/bin/
done
chmod u+w .gpu/bin/*
strip .gpu/bin/*
# The GPU plugin, where programs in bin/ look for it: lib/ps/ (worker/compute/cuda_plugin.h).
mkdir -p .gpu/lib/ps
cp "$opt/worker/compute/libps_cuda.so" .gpu/lib/ps/
chmod u+w .gpu/lib/ps/libps_cuda.so
# Every shared library the binaries load, but the C and C++ runtimes and CUDA's own.
ldd .gpu/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt)\.so' |
  while read -r lib; do cp -L "$lib" .gpu/lib/; done
strip --strip-unneeded .gpu/lib/* 2>/dev/null || true
tar -C .gpu -cJf .gpu.tar.xz bin lib
rm -rf .gpu && mkdir .gpu && mv .gpu.tar.xz .gpu/bundle.tar.xz
du -sh .gpu
