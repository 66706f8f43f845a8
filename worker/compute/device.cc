#include "worker/compute/device.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "worker/compute/cuda_backend.h"
#include "worker/compute/cuda_plugin.h"

namespace ps {
namespace {

std::string DescribeGpu(const GpuInfo& gpu) {
  return absl::StrCat("cuda:", gpu.index, " (", gpu.name, ", ",
                      gpu.total_memory_bytes / (int64_t{1} << 30), " GiB, compute capability ",
                      gpu.compute_capability_major, ".", gpu.compute_capability_minor, ")");
}

}  // namespace

bool BuiltWithCuda() {
#ifdef PS_WITH_CUDA
  return true;
#else
  return false;
#endif
}

GpuQueryResult QueryUsableGpus() {
#ifdef PS_WITH_CUDA
  GpuQueryResult result;
  const CudaPlugin* plugin = LoadCudaPlugin(&result.problem);
  if (plugin != nullptr) plugin->query_gpus(&result);
  return result;
#else
  GpuQueryResult none;
  none.problem =
      "this binary was built without CUDA (nvcc was not found when tools/setup.sh ran)";
  return none;
#endif
}

absl::StatusOr<Device> SelectDevice(absl::string_view flag, const GpuQueryResult& gpus) {
  Device device;
  if (flag == "cpu") {
    device.description = "cpu";
    return device;
  }
  if (flag == "auto") {
    if (gpus.gpus.empty()) {
      device.description = absl::StrCat("cpu (auto: ", gpus.problem, ")");
      return device;
    }
    device.kind = Device::Kind::kCuda;
    device.cuda_index = gpus.gpus.front().index;
    device.description = absl::StrCat(DescribeGpu(gpus.gpus.front()), " (auto)");
    return device;
  }
  int index = -1;
  if (!absl::StartsWith(flag, "cuda:") || !absl::SimpleAtoi(flag.substr(5), &index) ||
      index < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device=", flag, ": expected auto, cpu or cuda:N (for example cuda:0)"));
  }
  for (const GpuInfo& gpu : gpus.gpus) {
    if (gpu.index == index) {
      device.kind = Device::Kind::kCuda;
      device.cuda_index = index;
      device.description = DescribeGpu(gpu);
      return device;
    }
  }
  std::string found = gpus.gpus.empty()
                          ? gpus.problem
                          : absl::StrCat("this machine has ", gpus.gpus.size(), " GPU(s)");
  return absl::FailedPreconditionError(absl::StrCat("--device=", flag, ": no such GPU: ", found,
                                                    "; use --device=cpu or --device=auto"));
}

absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateBackend(const Device& device) {
  if (device.kind == Device::Kind::kCpu) return CreateCpuBackend();
  return CreateCudaBackend(device.cuda_index);
}

}  // namespace ps
