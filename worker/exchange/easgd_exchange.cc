#include "worker/exchange/easgd_exchange.h"

#include <utility>

namespace ps {

absl::StatusOr<std::unique_ptr<EasgdExchange>> EasgdExchange::Create(
    std::unique_ptr<WorkerSession> session, const std::vector<VariableDef>& variables,
    const JobSpec& spec) {
  absl::StatusOr<std::unique_ptr<LocalOptimizer>> optimizer =
      LocalOptimizer::Create(spec.optimizer(), spec.learning_rate(), variables, 0);
  if (!optimizer.ok()) return optimizer.status();
  return std::unique_ptr<EasgdExchange>(
      new EasgdExchange(std::move(session), variables, spec, *std::move(optimizer)));
}

EasgdExchange::EasgdExchange(std::unique_ptr<WorkerSession> session,
                             const std::vector<VariableDef>& variables, const JobSpec& spec,
                             std::unique_ptr<LocalOptimizer> optimizer)
    : session_(std::move(session)),
      alpha_(spec.consistency().easgd_alpha()),
      period_(spec.consistency().easgd_period()),
      optimizer_(std::move(optimizer)),
      weights_(variables),
      center_(variables) {}

absl::Status EasgdExchange::BeforeCompute(int64_t step) {
  (void)step;
  if (started_) return absl::OkStatus();
  // Every copy starts at the center (the shards' initial values).
  absl::StatusOr<WorkerSession::PullResult> pulled =
      session_->Pull(WorkerSession::PullOptions(), weights_.mutable_view());
  if (!pulled.ok()) return pulled.status();
  progress_.Pulled(*pulled);
  progress_.Answered(*pulled);
  started_ = true;
  return absl::OkStatus();
}

absl::Status EasgdExchange::AfterCompute(int64_t step, const HostVariables& gradients) {
  (void)step;
  optimizer_->Apply(gradients.arrays(), &weights_);
  if (optimizer_->updates() % period_ != 0) return absl::OkStatus();
  absl::StatusOr<WorkerSession::PullResult> pulled =
      session_->Pull(WorkerSession::PullOptions(), center_.mutable_view());
  if (!pulled.ok()) return pulled.status();
  progress_.Pulled(*pulled);
  progress_.Answered(*pulled);
  // d = alpha (x - center): the copy moves by -d, the center (on the shards) by +d, which they
  // apply as SGD at rate 1 on the "gradient" -d, held in center_.
  for (size_t v = 0; v < weights_.arrays().size(); ++v) {
    std::vector<float>& x = weights_.arrays()[v];
    std::vector<float>& c = center_.arrays()[v];
    for (size_t i = 0; i < x.size(); ++i) {
      const float d = alpha_ * (x[i] - c[i]);
      x[i] -= d;
      c[i] = -d;
    }
  }
  absl::StatusOr<std::vector<PushResponse>> pushed =
      session_->Push(WorkerSession::PushOptions(), center_.const_view());
  if (!pushed.ok()) return pushed.status();
  progress_.Pushed(*pushed);
  return absl::OkStatus();
}

}  // namespace ps
