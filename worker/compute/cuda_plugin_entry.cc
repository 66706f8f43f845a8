// libps_cuda.so's entry points (cuda_plugin.h), over the nvcc-built backend and query.
#include <memory>

#include <string>

#include "common/process/version.h"
#include "worker/compute/cuda_backend_impl.h"
#include "worker/compute/cuda_plugin.h"

extern "C" {

const char* PsCudaPluginVersion() {
  static const std::string* const version =
      new std::string(std::string(ps::kVersion) + "/" + ps::kCudaPluginInterface);
  return version->c_str();
}

void PsCudaQueryGpus(ps::GpuQueryResult* result) { *result = ps::QueryCudaGpus(); }

ps::ComputeBackend* PsCudaNewBackend(int device, std::string* error) {
  return ps::NewCudaBackend(device, error).release();
}

}  // extern "C"
