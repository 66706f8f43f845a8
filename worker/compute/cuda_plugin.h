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

namespace ps {
// What the plugin and the program must agree on: the release (common/process/version.h) and the
// entry points' types below, whose number goes up when they change.
inline constexpr char kCudaPluginInterface[] = "2";
}  // namespace ps

extern "C" {
// The release and interface the plugin was built with: "0.1.0/2".
const char* PsCudaPluginVersion();
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
// what to do ("libcublas.so.13: cannot open shared object file ..."; a plugin of another release
// or interface is refused, naming both). It is looked for at $PS_CUDA_LIBRARY when set (only
// there), else beside the installed programs (../lib/ps/ from the running program's directory:
// /usr/lib/ps for /usr/bin), else in the Bazel runfiles of the running program or test
// (worker/compute/libps_cuda.so). Only absolute paths are tried: a relative one would be looked
// up on the loader's path or in the current directory.
const CudaPlugin* LoadCudaPlugin(std::string* error);

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_CUDA_PLUGIN_H_
