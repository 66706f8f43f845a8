// EASGD (Zhang, Choromanska and LeCun 2015), its asynchronous form: each worker trains a copy
// of its own with the job's optimizer (LocalOptimizer) and, every easgd_period steps, pulls the
// center x~ (the shards' values), moves its copy by the elastic difference
// d = easgd_alpha * (x - x~) towards the center, x <- x - d, and pushes d, which each shard adds
// to the center as it arrives (the ps runs SGD at rate 1 on -d: common/job/job_spec.h's
// ToParameterSpec). Workers that drift far from the center are pulled back, and the center
// follows the workers, each at its own pace: no worker waits for another. The center is the
// model the results read.
#ifndef PS_WORKER_EXCHANGE_EASGD_EXCHANGE_H_
#define PS_WORKER_EXCHANGE_EASGD_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "common/client/worker_session.h"
#include "proto/job.pb.h"
#include "worker/exchange/exchange.h"
#include "worker/exchange/local_optimizer.h"
#include "worker/exchange/ps_progress.h"
#include "worker/host_variables.h"

namespace ps {

class EasgdExchange : public Exchange {
 public:
  // INVALID_ARGUMENT for an optimizer the spec's config does not make.
  static absl::StatusOr<std::unique_ptr<EasgdExchange>> Create(
      std::unique_ptr<WorkerSession> session, const std::vector<VariableDef>& variables,
      const JobSpec& spec);

  absl::Status BeforeCompute(int64_t step) override;
  absl::Status AfterCompute(int64_t step, const HostVariables& gradients) override;
  absl::Status Finish() override { return absl::OkStatus(); }
  const HostVariables& weights() const override { return weights_; }
  int64_t global_step() const override { return progress_.global_step(); }
  double mean_staleness() const override { return progress_.mean_staleness(); }
  absl::Duration parked_time() const override { return progress_.parked_time(); }
  int64_t bytes_sent() const override { return session_->bytes_sent(); }
  int64_t bytes_received() const override { return session_->bytes_received(); }

 private:
  EasgdExchange(std::unique_ptr<WorkerSession> session, const std::vector<VariableDef>& variables,
                const JobSpec& spec, std::unique_ptr<LocalOptimizer> optimizer);

  const std::unique_ptr<WorkerSession> session_;
  const float alpha_;
  const int period_;
  const std::unique_ptr<LocalOptimizer> optimizer_;
  HostVariables weights_;      // The worker's copy.
  HostVariables center_;       // The center as last pulled, then the elastic difference sent.
  PsProgress progress_{/*counts_steps=*/false};
  bool started_ = false;       // The copy has been set from the center.
};

}  // namespace ps

#endif  // PS_WORKER_EXCHANGE_EASGD_EXCHANGE_H_
