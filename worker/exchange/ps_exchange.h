// The ps modes' exchange, every step on the training thread: SYNC, SSP, SOFTSYNC and ASYNC
// (Downpour without overlap). Before a step it pulls (ASYNC: every n_fetch steps), for the
// job's next step (SYNC: waits at the barrier) and at the worker's clock (SSP); after it pushes
// (ASYNC: every n_push steps, the mean of the gradients accumulated since the last push),
// tagged with the step and clock. When the next step begins with a pull, the pull goes with
// the push in one round trip (PushPull) and that step starts from the values it brought.
#ifndef PS_WORKER_EXCHANGE_PS_EXCHANGE_H_
#define PS_WORKER_EXCHANGE_PS_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/client/worker_session.h"
#include "worker/exchange/downpour.h"
#include "worker/exchange/exchange.h"
#include "worker/exchange/ps_progress.h"
#include "worker/host_variables.h"

namespace ps {

struct PsExchangeOptions {
  DownpourSchedule downpour;
  // SYNC: pushes are tagged with the step their values began, and pulls ask for the next step.
  bool counts_steps = false;
  // The loop's last step is step_limit - 1: no pull goes with its push.
  int64_t step_limit = 0;
  // A sparse model's rows (exchange.h), pulled before and pushed after every step; not owned.
  // REQUIRES: a schedule that pulls and pushes every step. A step's pull then goes on its own,
  // not with the previous push: its keys are known only once its batch is read.
  SparseStepRows* sparse = nullptr;
  // A job whose data is handed out: its step batches (exchange.h), sent with each push; not
  // owned. Null otherwise.
  StepBatches* step_batches = nullptr;
};

class PsExchange : public Exchange {
 public:
  // `session`: the worker's pulls and pushes for the job; `variables`: the model's.
  PsExchange(std::unique_ptr<WorkerSession> session, const std::vector<VariableDef>& variables,
             const PsExchangeOptions& options);

  absl::Status BeforeCompute(int64_t step) override;
  absl::Status AfterCompute(int64_t step, const HostVariables& gradients) override;
  // Data handed out: pushes what the steps since the last push summed (n_push), so that their
  // batches are trained on.
  absl::Status Finish() override;
  const HostVariables& weights() const override { return weights_; }
  int64_t job_step() const override { return options_.counts_steps ? step_tag_ : -1; }
  int64_t global_step() const override { return progress_.global_step(); }
  double mean_staleness() const override { return progress_.mean_staleness(); }
  absl::Duration parked_time() const override { return progress_.parked_time(); }
  int64_t bytes_sent() const override { return session_->bytes_sent(); }
  int64_t bytes_received() const override { return session_->bytes_received(); }

 private:
  // The step's sparse rows as the session takes them (none without options_.sparse).
  std::vector<WorkerSession::SparsePull> SparsePulls();
  std::vector<WorkerSession::SparsePush> SparsePushes() const;

  const std::unique_ptr<WorkerSession> session_;
  const PsExchangeOptions options_;
  HostVariables weights_;
  HostVariables accumulated_;  // Sized only when the schedule accumulates.
  PsProgress progress_;
  int64_t step_tag_ = 0;   // The step of the job the last pull's values began (SYNC).
  int64_t next_step_ = 0;  // SYNC: the step to pull for next.
  int64_t last_step_ = 0;  // The last AfterCompute's.
  // The values of the next step's pull, when they came with this step's push (PushPull).
  std::optional<WorkerSession::PullResult> prefetched_;
};

}  // namespace ps

#endif  // PS_WORKER_EXCHANGE_PS_EXCHANGE_H_
