#include "worker/exchange/ring_exchange.h"

#include <algorithm>
#include <utility>

#include "common/job/consistency_modes.h"
#include "worker/allreduce/ring_allreduce.h"

namespace ps {

absl::StatusOr<std::unique_ptr<RingExchange>> RingExchange::Create(
    std::unique_ptr<WorkerSession> session, RingLink* ring,
    const std::vector<VariableDef>& variables, const JobSpec& spec, int worker,
    int64_t first_step) {
  if (ring == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        ConsistencyConfig::Mode_Name(spec.consistency().mode()),
        " needs links to the other workers, which this worker was started without"));
  }
  absl::StatusOr<std::unique_ptr<LocalOptimizer>> optimizer =
      LocalOptimizer::Create(spec.optimizer(), spec.learning_rate(), variables, first_step);
  if (!optimizer.ok()) return optimizer.status();
  return std::unique_ptr<RingExchange>(new RingExchange(
      std::move(session), ring, variables, spec, worker, first_step, *std::move(optimizer)));
}

RingExchange::RingExchange(std::unique_ptr<WorkerSession> session, RingLink* ring,
                           const std::vector<VariableDef>& variables, const JobSpec& spec,
                           int worker, int64_t first_step,
                           std::unique_ptr<LocalOptimizer> optimizer)
    : session_(std::move(session)),
      ring_(ring),
      spec_(spec),
      worker_(worker),
      optimizer_(std::move(optimizer)),
      weights_(variables),
      own_copies_(ModeTraitsOf(spec.consistency().mode()).staleness == Staleness::kOwnCopies),
      averaged_at_(first_step) {
  for (const std::vector<float>& array : weights_.arrays()) mean_.emplace_back(array.size());
}

absl::Status RingExchange::BeforeCompute(int64_t step) {
  (void)step;
  if (pulled_) return absl::OkStatus();
  // Every worker starts from the shards' values (the initial ones, or a checkpoint's), as in the
  // ps modes.
  absl::StatusOr<WorkerSession::PullResult> pulled =
      session_->Pull(WorkerSession::PullOptions(), weights_.mutable_view());
  if (!pulled.ok()) return pulled.status();
  pulled_ = true;
  return absl::OkStatus();
}

absl::Status RingExchange::AverageOverRing(uint64_t tag,
                                           std::vector<std::vector<float>>* arrays) {
  flat_.clear();
  for (const std::vector<float>& array : *arrays) {
    flat_.insert(flat_.end(), array.begin(), array.end());
  }
  absl::Status status = RingAllReduceMean(ring_, tag, absl::MakeSpan(flat_));
  if (!status.ok()) return status;
  size_t offset = 0;
  for (std::vector<float>& array : *arrays) {
    std::copy(flat_.begin() + offset, flat_.begin() + offset + array.size(), array.begin());
    offset += array.size();
  }
  return absl::OkStatus();
}

absl::Status RingExchange::AfterCompute(int64_t step, const HostVariables& gradients) {
  (void)step;
  if (!own_copies_) {
    mean_ = gradients.arrays();
    absl::Status averaged = AverageOverRing(ring_calls_++, &mean_);
    if (!averaged.ok()) return averaged;
    optimizer_->Apply(mean_, &weights_);
    return MaybePublish(/*final=*/false);
  }
  optimizer_->Apply(gradients.arrays(), &weights_);
  const int64_t updates = optimizer_->updates();
  if (updates - averaged_at_ < spec_.consistency().local_steps()) return absl::OkStatus();
  averaged_at_ = updates;
  absl::Status averaged = AverageOverRing(ring_calls_++, &weights_.arrays());
  if (!averaged.ok()) return averaged;
  return MaybePublish(/*final=*/false);
}

absl::Status RingExchange::MaybePublish(bool final) {
  const int64_t every = spec_.checkpoint().every_steps();
  const int64_t updates = optimizer_->updates();
  if (worker_ != 0 || published_at_ == updates) return absl::OkStatus();
  if (!final && (every <= 0 || updates % every != 0)) return absl::OkStatus();
  // PublishRule: the values replace the shards'; the steps become their clock.
  WorkerSession::PushOptions options;
  options.step = updates;
  absl::Status published = session_->Push(options, weights_.const_view()).status();
  if (published.ok()) published_at_ = updates;
  return published;
}

absl::Status RingExchange::Finish() {
  if (own_copies_ && optimizer_->updates() > averaged_at_) {
    // The steps since the last averaging: every worker ends with the same model.
    averaged_at_ = optimizer_->updates();
    absl::Status averaged = AverageOverRing(ring_calls_++, &weights_.arrays());
    if (!averaged.ok()) return averaged;
  }
  return MaybePublish(/*final=*/true);
}

int64_t RingExchange::bytes_sent() const { return session_->bytes_sent() + ring_->bytes_sent(); }

int64_t RingExchange::bytes_received() const {
  return session_->bytes_received() + ring_->bytes_received();
}

}  // namespace ps
