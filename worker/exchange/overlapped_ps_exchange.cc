#include "worker/exchange/overlapped_ps_exchange.h"

#include <utility>

namespace ps {

OverlappedPsExchange::OverlappedPsExchange(std::unique_ptr<WorkerSession> session,
                                           const std::vector<VariableDef>& variables,
                                           const DownpourSchedule& downpour, int64_t step_limit,
                                           StepBatches* step_batches)
    : session_(std::move(session)),
      downpour_(downpour),
      step_limit_(step_limit),
      step_batches_(step_batches),
      weights_storage_(variables),
      spare_weights_storage_(variables),
      accumulated_storage_(variables),
      spare_accumulated_storage_(variables) {}

absl::Status OverlappedPsExchange::BeforeCompute(int64_t step) {
  // Every pull after the first comes with the background exchanges.
  if (step != 0) return absl::OkStatus();
  WorkerSession::PullOptions pull;
  absl::StatusOr<WorkerSession::PullResult> pulled = session_->Pull(pull, weights_->mutable_view());
  if (!pulled.ok()) return pulled.status();
  weights_versions_ = pulled->versions;
  progress_.Answered(*pulled);
  progress_.Pulled(*pulled);
  return absl::OkStatus();
}

absl::Status OverlappedPsExchange::AfterCompute(int64_t step, const HostVariables& gradients) {
  last_step_ = step;
  Accrue(downpour_, gradients, accumulated_, weights_);
  const bool push_now = downpour_.PushesAfter(step);
  const bool pull_next = step + 1 < step_limit_ && downpour_.PullsBefore(step + 1);
  WorkerSession::PushOptions push;
  push.clock = step;
  push.read_versions = weights_versions_;  // What this step computed on.
  if (push_now && step_batches_ != nullptr) push.batches.swap(*step_batches_);
  absl::Status finished = FinishInFlight();  // The previous step's, which this one hid.
  if (!finished.ok()) return finished;
  WorkerSession::PullOptions next;
  next.clock = step + 1;
  if (push_now) {
    // The spare was pushed by the exchange just finished; gradients add up there next.
    std::swap(accumulated_, spare_accumulated_);
    accumulated_->SetToZero();
  }
  StartInFlight(push, push_now ? &spare_accumulated_->const_view() : nullptr, next,
                pull_next ? &spare_weights_->mutable_view() : nullptr);
  if (step + 1 == step_limit_) return FinishInFlight();  // The last push is in before the end.
  return absl::OkStatus();
}

void OverlappedPsExchange::StartInFlight(const WorkerSession::PushOptions& push,
                                         const ConstVariables* pushing,
                                         const WorkerSession::PullOptions& pull,
                                         const MutableVariables* pulling) {
  in_flight_pushed_.clear();
  in_flight_pulled_.reset();
  if (pushing == nullptr && pulling == nullptr) return;
  in_flight_.Start([this, push, pull, pushing, pulling]() -> absl::Status {
    if (pushing != nullptr && pulling != nullptr) {
      absl::StatusOr<WorkerSession::PushPullResult> both =
          session_->PushPull(push, *pushing, pull, *pulling);
      if (!both.ok()) return both.status();
      in_flight_pushed_ = std::move(both->pushed);
      in_flight_pulled_ = std::move(both->pulled);
    } else if (pushing != nullptr) {
      absl::StatusOr<std::vector<PushResponse>> pushed = session_->Push(push, *pushing);
      if (!pushed.ok()) return pushed.status();
      in_flight_pushed_ = *std::move(pushed);
    } else {
      absl::StatusOr<WorkerSession::PullResult> pulled = session_->Pull(pull, *pulling);
      if (!pulled.ok()) return pulled.status();
      in_flight_pulled_ = *std::move(pulled);
    }
    return absl::OkStatus();
  });
}

absl::Status OverlappedPsExchange::Finish() {
  std::vector<int64_t> computed_on = weights_versions_;  // Before the last pull lands.
  absl::Status finished = FinishInFlight();
  if (!finished.ok() || step_batches_ == nullptr || step_batches_->empty()) return finished;
  WorkerSession::PushOptions push;
  push.clock = last_step_;
  push.read_versions = std::move(computed_on);
  push.batches.swap(*step_batches_);
  absl::StatusOr<std::vector<PushResponse>> pushed =
      session_->Push(push, accumulated_->const_view());
  if (!pushed.ok()) return pushed.status();
  progress_.Pushed(*pushed);
  return absl::OkStatus();
}

absl::Status OverlappedPsExchange::FinishInFlight() {
  if (!in_flight_.busy()) return absl::OkStatus();
  absl::Status status = in_flight_.Wait();
  if (!status.ok()) return status;
  progress_.Pushed(in_flight_pushed_);
  if (in_flight_pulled_.has_value()) {
    std::swap(weights_, spare_weights_);
    weights_versions_ = in_flight_pulled_->versions;
    progress_.Answered(*in_flight_pulled_);
    progress_.Pulled(*in_flight_pulled_);
  }
  return absl::OkStatus();
}

}  // namespace ps
