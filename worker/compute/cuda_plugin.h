// The CUDA backend as a plugin: libps_cuda.so holds the CUDA kernels and cuBLAS calls and links
// CUDA's libraries; the programs load it when a GPU is asked for (dlopen), as TensorFlow and
// PyTorch load CUDA, so one build runs on hosts without CUDA (--device=auto then picks the CPU,
// saying why) and psctl never needs it.
//
// The plugin's two entry points have C names (their types are the project's, built by the same
// compiler in the same build).
#ifndef PS_WORKER_COMPUTE_CUDA_PLUGIN_H_
#define PS_WORKER_COMPUTE_CUDA_PLUGIN_H_

#include <string>

#include "worker/compute/compute_backend.h"
#include "worker/compute/cuda_device_query.h"

extern "C" {
// QueryCudaGpus() into `*result`.
void PsCudaQueryGpus(ps::GpuQueryResult* result);
// NewCudaBackend(device, error), released to the caller (nullptr with `*error` set).
ps::ComputeBackend* PsCudaNewBackend(int device, std::string* error);
}

namespace ps {

struct CudaPlugin {
  void (*query_gpus)(GpuQueryResult* result) = nullptr;
  ComputeBackend* (*new_backend)(int device, std::string* error) = nullptr;
};

// The plugin, loaded on the first call (thread-safe), or nullptr with `*error` saying why and
// what to do ("libcublas.so.13: cannot open shared object file ..."). It is looked for at
// $PS_CUDA_LIBRARY when set (only there), else beside the installed programs (../lib/ps/ from
// the running program's directory: /usr/lib/ps for /usr/bin), else in the Bazel runfiles of the
// running program or test (worker/compute/libps_cuda.so).
const CudaPlugin* LoadCudaPlugin(std::string* error);

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_CUDA_PLUGIN_H_
