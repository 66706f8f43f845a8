#include "server/consistency/consistency_rule.h"

#include <utility>

#include "server/learning_rate.h"

namespace ps {

PushDecision PushDecision::Reject(std::string reason, absl::Status status) {
  PushDecision decision;
  decision.action = kReject;
  decision.reason = std::move(reason);
  decision.status = std::move(status);
  return decision;
}

PushDecision PushDecision::Drop(std::string reason) {
  PushDecision decision;
  decision.action = kDrop;
  decision.reason = std::move(reason);
  return decision;
}

PushDecision PushDecision::Of(Action action) {
  PushDecision decision;
  decision.action = action;
  return decision;
}

float ConsistencyRule::LearningRate(const LearningRateSchedule& schedule, int64_t updates_started,
                                    int64_t staleness) const {
  (void)staleness;
  return LearningRateAt(schedule, updates_started);
}

std::vector<Contribution> ConsistencyRule::TakeAggregate() {
  std::vector<Contribution> taken;
  taken.swap(open_aggregate_);
  return taken;
}

bool ConsistencyRule::Leave(int worker) {
  left_[worker] = true;
  return false;
}

std::string ConsistencyRule::WaitReason(const PullRequest& request) const {
  (void)request;
  return "pull is not waiting for anything";
}

}  // namespace ps
