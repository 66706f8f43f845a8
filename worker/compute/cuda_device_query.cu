#include "worker/compute/cuda_device_query.h"

#include <cuda_runtime.h>

namespace ps {

GpuQueryResult QueryCudaGpus() {
  GpuQueryResult result;
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    result.problem = std::string("the CUDA runtime found no usable GPU: ") +
                     cudaGetErrorString(error) + " (" + cudaGetErrorName(error) + ")";
    cudaGetLastError();  // Clears the sticky error so later calls start clean.
    return result;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp properties;
    error = cudaGetDeviceProperties(&properties, i);
    if (error != cudaSuccess) {
      result.problem = std::string("cannot read the properties of GPU ") + std::to_string(i) +
                       ": " + cudaGetErrorString(error);
      continue;
    }
    GpuInfo info;
    info.index = i;
    info.name = properties.name;
    info.total_memory_bytes = static_cast<int64_t>(properties.totalGlobalMem);
    info.compute_capability_major = properties.major;
    info.compute_capability_minor = properties.minor;
    result.gpus.push_back(info);
  }
  if (result.gpus.empty() && result.problem.empty()) {
    result.problem = "the CUDA runtime reports no GPU on this machine";
  }
  return result;
}

}  // namespace ps
