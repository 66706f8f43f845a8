#include "worker/compute/available_backends.h"

#include "worker/compute/cuda_backend.h"
#include "worker/compute/device.h"

namespace ps {

std::vector<BackendFactory> AvailableBackends() {
  std::vector<BackendFactory> backends = {{"Cpu", [] { return CreateCpuBackend(); }, ""}};
  if (BuiltWithCuda()) {
    const GpuQueryResult gpus = QueryUsableGpus();
    backends.push_back({"Cuda", [] { return CreateCudaBackend(0); },
                        gpus.gpus.empty() ? "no GPU: " + gpus.problem : ""});
  }
  return backends;
}

}  // namespace ps
