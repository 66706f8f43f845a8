// The job's optimizer run by a worker on its own copy of the model (ALLREDUCE, LOCAL_SGD, EASGD):
// the same code the ps runs (common/job/optimizer.h), with the worker's own slots (momentum, Adam's
// moments), at the schedule's rate for the steps the copy has taken.
#ifndef PS_WORKER_EXCHANGE_LOCAL_OPTIMIZER_H_
#define PS_WORKER_EXCHANGE_LOCAL_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job/optimizer.h"
#include "proto/parameter.pb.h"
#include "worker/host_variables.h"

namespace ps {

// Not thread-safe.
class LocalOptimizer {
 public:
  // For a model of `variables`, whose copy has taken `first_step` steps (a resumed run's); the
  // slots start afresh. INVALID_ARGUMENT for an optimizer Optimizer::Create refuses.
  static absl::StatusOr<std::unique_ptr<LocalOptimizer>> Create(
      const OptimizerConfig& optimizer, const LearningRateSchedule& schedule,
      const std::vector<VariableDef>& variables, int64_t first_step);

  // One update of `weights` with `gradient` (one array per variable, as HostVariables holds
  // them) at the schedule's rate for step updates().
  void Apply(const std::vector<std::vector<float>>& gradient, HostVariables* weights);
  // The steps the copy has taken, first_step included.
  int64_t updates() const { return updates_; }

 private:
  LocalOptimizer(std::unique_ptr<Optimizer> optimizer, const LearningRateSchedule& schedule,
                 const std::vector<VariableDef>& variables, int64_t first_step);

  const std::unique_ptr<Optimizer> optimizer_;
  const LearningRateSchedule schedule_;
  const int64_t first_step_;
  std::vector<std::vector<std::vector<float>>> slots_;  // Per variable, the optimizer's slots.
  int64_t updates_;
};

}  // namespace ps

#endif  // PS_WORKER_EXCHANGE_LOCAL_OPTIMIZER_H_
