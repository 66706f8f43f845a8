// Lists the machine's CUDA GPUs. Plain C++ so that host code includes it without CUDA's
// headers; implemented by cuda_device_query.cu, built only under --config=cuda.
#ifndef PS_WORKER_COMPUTE_CUDA_DEVICE_QUERY_H_
#define PS_WORKER_COMPUTE_CUDA_DEVICE_QUERY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ps {

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t total_memory_bytes = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
};

struct GpuQueryResult {
  std::vector<GpuInfo> gpus;
  // Why no GPU can be used (no driver, no device, a CUDA error), when `gpus` is empty.
  std::string problem;
};

// Asks the CUDA runtime. Never crashes or hangs on a machine with the toolkit but no GPU or
// driver: that is reported in `problem`. Thread-safe.
GpuQueryResult QueryCudaGpus();

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_CUDA_DEVICE_QUERY_H_
