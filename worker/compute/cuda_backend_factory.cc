#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/compute/cuda_backend.h"
#include "worker/compute/cuda_plugin.h"

namespace ps {

absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCudaBackend(int device_index) {
  if (device_index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda:", device_index, ": a GPU index is 0 or more"));
  }
#ifdef PS_WITH_CUDA
  std::string error;
  const CudaPlugin* plugin = LoadCudaPlugin(&error);
  std::unique_ptr<ComputeBackend> backend(
      plugin == nullptr ? nullptr : plugin->new_backend(device_index, &error));
  if (backend == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot compute on cuda:", device_index, ": ", error, "; use --device=cpu"));
  }
  return backend;
#else
  return absl::FailedPreconditionError(
      absl::StrCat("cannot compute on cuda:", device_index,
                   ": this binary was built without CUDA (nvcc was not found when "
                   "tools/setup.sh ran); use --device=cpu"));
#endif
}

}  // namespace ps
