#include "server/consistency/ssp_rule.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ps {

SspRule::SspRule(const ConsistencyConfig& consistency, int num_workers)
    : ConsistencyRule(num_workers), bound_(consistency.ssp_bound()), clocks_(num_workers, 0) {}

PushDecision SspRule::Admit(const PushRequestHeader& header, int64_t staleness) {
  (void)staleness;
  const int worker = header.worker();
  if (header.clock() != clocks_[worker]) {
    return PushDecision::Reject(
        "clock", absl::FailedPreconditionError(absl::StrCat(
                     "worker ", worker, " pushed for clock ", header.clock(), " but its clock is ",
                     clocks_[worker], ": push once per clock, in order")));
  }
  return PushDecision::Of(PushDecision::kApply);
}

void SspRule::Applied(const PushRequestHeader& header) {
  clocks_[header.worker()] = header.clock() + 1;
}

void SspRule::SaveState(ShardCheckpointState* state) const {
  ConsistencyRule::SaveState(state);
  for (int64_t clock : clocks_) state->add_clocks(clock);
}

absl::Status SspRule::RestoreState(const ShardCheckpointState& state) {
  if (state.clocks_size() != num_workers()) {
    return absl::DataLossError(absl::StrCat("the checkpoint has ", state.clocks_size(),
                                            " SSP clocks; the job has ", num_workers(), " workers"));
  }
  clocks_.assign(state.clocks().begin(), state.clocks().end());
  return ConsistencyRule::RestoreState(state);
}

void SspRule::Rejoin(int worker, int64_t clock) {
  ConsistencyRule::Rejoin(worker, clock);
  clocks_[worker] = clock;
}

void SspRule::AddWorkers(int num_workers) {
  ConsistencyRule::AddWorkers(num_workers);
  clocks_.resize(num_workers, 0);
}

int64_t SspRule::checkpoint_clock(int64_t version) const {
  (void)version;
  for (size_t w = 0; w < clocks_.size(); ++w) {
    if (!left_[w]) return MinClock();
  }
  return *std::max_element(clocks_.begin(), clocks_.end());  // All gone: the last clock.
}

int64_t SspRule::MinClock() const {
  // Workers that left no longer hold the others back; when all have left, nothing waits.
  int64_t min_clock = std::numeric_limits<int64_t>::max() / 2;
  for (size_t w = 0; w < clocks_.size(); ++w) {
    if (!left_[w]) min_clock = std::min(min_clock, clocks_[w]);
  }
  return min_clock;
}

bool SspRule::PullReady(const PullRequest& request) const {
  return request.clock() <= MinClock() + bound_;
}

std::string SspRule::WaitReason(const PullRequest& request) const {
  const int64_t needed = request.clock() - bound_;
  std::vector<int> behind;
  for (size_t w = 0; w < clocks_.size(); ++w) {
    if (!left_[w] && clocks_[w] < needed) behind.push_back(static_cast<int>(w));
  }
  return absl::StrCat("pull at clock ", request.clock(), " with ssp_bound ", bound_,
                      " is waiting for workers ", absl::StrJoin(behind, ", "), " to reach clock ",
                      needed);
}

}  // namespace ps
