// For tests: every compute backend this binary can build, so that one test runs on each (the
// CPU always; the CUDA backend on GPU 0 in a CUDA build, skipped where no GPU is usable and
// failing where one is but the backend cannot start on it).
#ifndef PS_WORKER_COMPUTE_AVAILABLE_BACKENDS_H_
#define PS_WORKER_COMPUTE_AVAILABLE_BACKENDS_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/compute/compute_backend.h"

namespace ps {

struct BackendFactory {
  std::string name;  // "Cpu" or "Cuda": usable in a test's name.
  std::function<absl::StatusOr<std::unique_ptr<ComputeBackend>>()> create;
  // Why this backend cannot run on this machine (its tests are skipped); empty when it can.
  std::string unavailable;
};

inline void PrintTo(const BackendFactory& factory, std::ostream* out) { *out << factory.name; }

std::vector<BackendFactory> AvailableBackends();

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_AVAILABLE_BACKENDS_H_
