#include "server/consistency/consistency_rule.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

#include "common/job/learning_rate.h"

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

PushDecision ConsistencyRule::AdmitRepeat(const PushRequestHeader& header, int64_t staleness) {
  PushDecision decision = Admit(header, staleness);
  if (decision.action != PushDecision::kApply) return decision;
  Applied(header);
  return PushDecision::Drop("batch_seen");
}

int ConsistencyRule::SummedContributions() const {
  return static_cast<int>(std::count_if(open_aggregate_.begin(), open_aggregate_.end(),
                                        [](const Contribution& c) { return !c.repeat; }));
}

bool ConsistencyRule::Leave(int worker) {
  left_[worker] = true;
  return false;
}

void ConsistencyRule::Rejoin(int worker, int64_t clock) {
  (void)clock;
  left_[worker] = false;
}

void ConsistencyRule::AddWorkers(int num_workers) { left_.resize(num_workers, true); }

void ConsistencyRule::SaveState(ShardCheckpointState* state) const {
  for (bool left : left_) state->add_left(left);
  for (const Contribution& c : open_aggregate_) {
    OpenContribution* open = state->add_open_aggregate();
    open->set_worker(c.worker);
    open->set_read_version(c.read_version);
    open->set_repeat(c.repeat);
  }
}

absl::Status ConsistencyRule::RestoreState(const ShardCheckpointState& state) {
  if (state.left_size() != num_workers()) {
    return absl::DataLossError(absl::StrCat("the checkpoint has ", state.left_size(),
                                            " workers; the job has ", num_workers()));
  }
  for (int w = 0; w < num_workers(); ++w) left_[w] = state.left(w);
  open_aggregate_.clear();
  for (const OpenContribution& open : state.open_aggregate()) {
    if (open.worker() < 0 || open.worker() >= num_workers()) {
      return absl::DataLossError(absl::StrCat("the open aggregate names worker ", open.worker()));
    }
    open_aggregate_.push_back({open.worker(), open.read_version(), open.repeat()});
  }
  return absl::OkStatus();
}

std::string ConsistencyRule::WaitReason(const PullRequest& request) const {
  (void)request;
  return "pull is not waiting for anything";
}

}  // namespace ps
