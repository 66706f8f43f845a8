// ASYNC with downpour.overlap_communication: a step's push and the pull that goes with it (one
// PushPull) run on a background thread while the next step computes on the weights the
// exchange before brought; that exchange is finished after the next step's compute, and its
// pulled weights are swapped in. Pushes are tagged with the versions the gradient was computed
// from, so their staleness counts the overlap. The weights and the accumulated gradients are
// double-buffered: the background reads and writes the spares. Otherwise as PsExchange
// (n_fetch, n_push, accumulation, local learning rate); only step 0 pulls on the training
// thread.
#ifndef PS_WORKER_EXCHANGE_OVERLAPPED_PS_EXCHANGE_H_
#define PS_WORKER_EXCHANGE_OVERLAPPED_PS_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/client/worker_session.h"
#include "worker/background_task.h"
#include "worker/exchange/downpour.h"
#include "worker/exchange/exchange.h"
#include "worker/exchange/ps_progress.h"
#include "worker/host_variables.h"

namespace ps {

class OverlappedPsExchange : public Exchange {
 public:
  // `step_limit`: the loop's last step is step_limit - 1, whose push is finished before
  // AfterCompute returns.
  OverlappedPsExchange(std::unique_ptr<WorkerSession> session,
                       const std::vector<VariableDef>& variables,
                       const DownpourSchedule& downpour, int64_t step_limit,
                       StepBatches* step_batches = nullptr);

  absl::Status BeforeCompute(int64_t step) override;
  absl::Status AfterCompute(int64_t step, const HostVariables& gradients) override;
  // Ends the exchange in flight; with data handed out, then pushes what the steps since the
  // last push summed (n_push), so that their batches are trained on.
  absl::Status Finish() override;
  const HostVariables& weights() const override { return *weights_; }
  int64_t global_step() const override { return progress_.global_step(); }
  double mean_staleness() const override { return progress_.mean_staleness(); }
  absl::Duration parked_time() const override { return progress_.parked_time(); }
  int64_t bytes_sent() const override { return session_->bytes_sent(); }
  int64_t bytes_received() const override { return session_->bytes_received(); }

 private:
  // Waits for the exchange in flight (if any), takes the weights it pulled and counts the
  // staleness of what it pushed.
  absl::Status FinishInFlight();
  // Starts the exchange for `push` (null: nothing to push) and `pull` (null: nothing to pull).
  void StartInFlight(const WorkerSession::PushOptions& push, const ConstVariables* pushing,
                     const WorkerSession::PullOptions& pull, const MutableVariables* pulling);

  const std::unique_ptr<WorkerSession> session_;
  const DownpourSchedule downpour_;
  const int64_t step_limit_;
  StepBatches* const step_batches_;  // Not owned; null unless the data is handed out.
  int64_t last_step_ = 0;            // The last AfterCompute's.
  // What steps compute on, and the spare a background pull lands in.
  HostVariables weights_storage_, spare_weights_storage_;
  HostVariables* weights_ = &weights_storage_;
  HostVariables* spare_weights_ = &spare_weights_storage_;
  // Where gradients add up between pushes, and the spare a background push reads.
  HostVariables accumulated_storage_, spare_accumulated_storage_;
  HostVariables* accumulated_ = &accumulated_storage_;
  HostVariables* spare_accumulated_ = &spare_accumulated_storage_;
  std::vector<int64_t> weights_versions_;  // Per shard, the versions *weights_ holds.
  PsProgress progress_{/*counts_steps=*/false};
  // What the exchange in the background returned; written by it, read once it is finished.
  std::vector<PushResponse> in_flight_pushed_;
  std::optional<WorkerSession::PullResult> in_flight_pulled_;
  // Declared last: destroyed first, so that it waits for the exchange before what it uses goes.
  BackgroundTask in_flight_;
};

}  // namespace ps

#endif  // PS_WORKER_EXCHANGE_OVERLAPPED_PS_EXCHANGE_H_
