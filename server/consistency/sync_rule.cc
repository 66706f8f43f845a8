#include "server/consistency/sync_rule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job/learning_rate.h"

namespace ps {

SyncRule::SyncRule(const ConsistencyConfig& consistency, int num_workers)
    : ConsistencyRule(num_workers),
      replicas_to_aggregate_(consistency.replicas_to_aggregate()) {}

int SyncRule::ReplicasToAggregate() const {
  return replicas_to_aggregate_ > 0 ? replicas_to_aggregate_ : num_workers();
}

PushDecision SyncRule::Admit(const PushRequestHeader& header, int64_t staleness) {
  (void)staleness;
  const int worker = header.worker();
  if (header.step() > step_) {
    return PushDecision::Reject(
        "future_step",
        absl::FailedPreconditionError(absl::StrCat(
            "worker ", worker, " pushed for step ", header.step(), " but the shard is at step ",
            step_, ": pull for a step before pushing for it")));
  }
  if (header.step() < step_) return PushDecision::Drop("stale_step");
  for (const Contribution& c : open_aggregate_) {
    if (c.worker == worker) {
      return PushDecision::Reject(
          "repeated_step",
          absl::FailedPreconditionError(absl::StrCat("worker ", worker, " already pushed for step ",
                                                     step_, ": push once per step")));
    }
  }
  open_aggregate_.push_back({worker, header.read_version()});
  return PushDecision::Of(static_cast<int>(open_aggregate_.size()) >= AggregateSize()
                              ? PushDecision::kApplyAggregate
                              : PushDecision::kAccumulate);
}

PushDecision SyncRule::AdmitRepeat(const PushRequestHeader& header, int64_t staleness) {
  PushDecision decision = Admit(header, staleness);
  if (decision.action != PushDecision::kAccumulate &&
      decision.action != PushDecision::kApplyAggregate) {
    return decision;
  }
  // AggregateSize() counts every giver, this worker among them: below R, the step needs them all.
  if (ReplicasToAggregate() < Givers()) {
    open_aggregate_.pop_back();
    return PushDecision::Drop("batch_seen");
  }
  open_aggregate_.back().repeat = true;
  return decision;
}

float SyncRule::LearningRate(const LearningRateSchedule& schedule, int64_t updates_started,
                             int64_t staleness) const {
  (void)updates_started;
  (void)staleness;
  return LearningRateAt(schedule, step_);
}

std::vector<Contribution> SyncRule::TakeAggregate() {
  ++step_;
  return ConsistencyRule::TakeAggregate();
}

int SyncRule::Givers() const {
  std::vector<bool> can_give(left_.size());
  for (size_t w = 0; w < left_.size(); ++w) can_give[w] = !left_[w];
  for (const Contribution& c : open_aggregate_) can_give[c.worker] = true;
  return static_cast<int>(std::count(can_give.begin(), can_give.end(), true));
}

int SyncRule::AggregateSize() const {
  return std::max(1, std::min(ReplicasToAggregate(), Givers()));
}

bool SyncRule::Leave(int worker) {
  left_[worker] = true;
  return !open_aggregate_.empty() && static_cast<int>(open_aggregate_.size()) >= AggregateSize();
}

void SyncRule::SaveState(ShardCheckpointState* state) const {
  ConsistencyRule::SaveState(state);
  state->set_step(step_);
}

absl::Status SyncRule::RestoreState(const ShardCheckpointState& state) {
  if (state.step() < 0) return absl::DataLossError("the checkpoint's step is below zero");
  step_ = state.step();
  return ConsistencyRule::RestoreState(state);
}

bool SyncRule::PullReady(const PullRequest& request) const { return step_ >= request.step(); }

std::vector<int> SyncRule::WaitingFor() const {
  std::vector<bool> arrived(left_.size(), false);
  for (const Contribution& c : open_aggregate_) arrived[c.worker] = true;
  std::vector<int> missing;
  for (size_t w = 0; w < left_.size(); ++w) {
    if (!arrived[w] && !left_[w]) missing.push_back(static_cast<int>(w));
  }
  return missing;
}

std::string SyncRule::WaitReason(const PullRequest& request) const {
  return absl::StrCat("pull for step ", request.step(), " is waiting for step ", step_,
                      ", which has ", open_aggregate_.size(), " of ", AggregateSize(),
                      " gradients; still missing workers ", absl::StrJoin(WaitingFor(), ", "),
                      " (a worker that died or is a straggler; fewer replicas_to_aggregate "
                      "than workers tolerates that)");
}

}  // namespace ps
