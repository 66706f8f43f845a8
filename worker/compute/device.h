// Which device a worker computes on: the --device flag ("auto", "cpu", "cuda:N").
#ifndef PS_WORKER_COMPUTE_DEVICE_H_
#define PS_WORKER_COMPUTE_DEVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/compute/compute_backend.h"
#include "worker/compute/cuda_device_query.h"

namespace ps {

struct Device {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int cuda_index = -1;  // For kCuda.
  // One line for the log: what was chosen and why ("cuda:0 (NVIDIA H100, 80 GiB)", or
  // "cpu (auto: the CUDA runtime found no usable GPU: ...)").
  std::string description;
};

// True when this binary was built with the CUDA backend (--config=cuda).
bool BuiltWithCuda();

// The GPUs this binary can use: the CUDA plugin's QueryCudaGpus() in a CUDA build, else none,
// with the reason (also where the plugin or CUDA's libraries cannot be loaded: cuda_plugin.h).
GpuQueryResult QueryUsableGpus();

// Chooses the device for `flag` given the GPUs found. "auto" takes GPU 0 when there is one and
// the CPU otherwise; "cuda:N" with no GPU N is FAILED_PRECONDITION naming the problem and the
// fix; anything else is INVALID_ARGUMENT.
absl::StatusOr<Device> SelectDevice(absl::string_view flag, const GpuQueryResult& gpus);

// The compute backend of `device`: the CPU backend, or the CUDA backend on its GPU
// (FAILED_PRECONDITION, saying why, when that GPU cannot be used).
absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateBackend(const Device& device);

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_DEVICE_H_
