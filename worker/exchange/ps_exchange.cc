#include "worker/exchange/ps_exchange.h"

#include <utility>

namespace ps {
namespace {

std::vector<VariableDef> NoVariables() { return {}; }

}  // namespace

std::vector<WorkerSession::SparsePull> PsExchange::SparsePulls() {
  SparseStepRows* rows = options_.sparse;
  if (rows == nullptr) return {};
  rows->values.resize(rows->keys.size() * static_cast<size_t>(rows->width));
  return {{rows->table, rows->keys, absl::MakeSpan(rows->values)}};
}

std::vector<WorkerSession::SparsePush> PsExchange::SparsePushes() const {
  const SparseStepRows* rows = options_.sparse;
  if (rows == nullptr) return {};
  return {{rows->table, rows->keys, rows->gradients}};
}

PsExchange::PsExchange(std::unique_ptr<WorkerSession> session,
                       const std::vector<VariableDef>& variables,
                       const PsExchangeOptions& options)
    : session_(std::move(session)),
      options_(options),
      weights_(variables),
      accumulated_(options.downpour.accumulate ? variables : NoVariables()),
      progress_(options.counts_steps) {}

absl::Status PsExchange::BeforeCompute(int64_t step) {
  step_tag_ = 0;
  if (!options_.downpour.PullsBefore(step)) return absl::OkStatus();
  absl::StatusOr<WorkerSession::PullResult> pulled;
  if (prefetched_.has_value()) {
    pulled = *std::move(prefetched_);
    prefetched_.reset();
  } else {
    WorkerSession::PullOptions pull;
    pull.step = next_step_;
    pull.clock = step;
    pulled = session_->Pull(pull, weights_.mutable_view(), SparsePulls());
    if (pulled.ok()) progress_.Answered(*pulled);
  }
  if (!pulled.ok()) return pulled.status();
  step_tag_ = pulled->step;
  progress_.Pulled(*pulled);
  return absl::OkStatus();
}

absl::Status PsExchange::AfterCompute(int64_t step, const HostVariables& gradients) {
  const DownpourSchedule& downpour = options_.downpour;
  last_step_ = step;
  const HostVariables* to_push = &gradients;
  if (downpour.accumulate) {
    Accrue(downpour, gradients, &accumulated_, &weights_);
    to_push = &accumulated_;
  }
  if (downpour.PushesAfter(step)) {
    WorkerSession::PushOptions push;
    push.step = step_tag_;
    push.clock = step;
    if (options_.step_batches != nullptr) push.batches.swap(*options_.step_batches);
    absl::StatusOr<std::vector<PushResponse>> pushed;
    // The next step's pull goes with this push when there is one.
    if (step + 1 < options_.step_limit && downpour.PullsBefore(step + 1) &&
        options_.sparse == nullptr) {
      WorkerSession::PullOptions next;
      next.step = options_.counts_steps ? step_tag_ + 1 : 0;
      next.clock = step + 1;
      absl::StatusOr<WorkerSession::PushPullResult> both =
          session_->PushPull(push, to_push->const_view(), next, weights_.mutable_view());
      if (!both.ok()) return both.status();
      progress_.Answered(both->pulled);
      pushed = std::move(both->pushed);
      prefetched_ = std::move(both->pulled);
    } else {
      pushed = session_->Push(push, to_push->const_view(), SparsePushes());
    }
    if (!pushed.ok()) return pushed.status();
    progress_.Pushed(*pushed);
    if (downpour.accumulate) accumulated_.SetToZero();
  }
  if (options_.counts_steps) next_step_ = step_tag_ + 1;
  return absl::OkStatus();
}

absl::Status PsExchange::Finish() {
  if (options_.step_batches == nullptr || options_.step_batches->empty()) {
    return absl::OkStatus();
  }
  WorkerSession::PushOptions push;
  push.step = step_tag_;
  push.clock = last_step_;
  push.batches.swap(*options_.step_batches);
  absl::StatusOr<std::vector<PushResponse>> pushed =
      session_->Push(push, accumulated_.const_view(), SparsePushes());
  if (!pushed.ok()) return pushed.status();
  progress_.Pushed(*pushed);
  return absl::OkStatus();
}

}  // namespace ps
