// SYNC: a barrier per step, with SyncReplicasOptimizer's semantics. Every push is tagged with
// the step it is for; the shard aggregates the gradients of the open step and, once R of them
// (replicas_to_aggregate, R <= N; 0 means N) have arrived, applies their mean and opens the next
// step. A gradient for an older step is dropped ("stale_step": R < N makes backup workers); one
// for a future step, or a second one from a worker for the open step, is refused. A pull for
// step t waits until the shard has applied t steps. A worker that leaves no longer holds a step
// back: a step needs R gradients or as many as can still come (see AggregateSize).
#ifndef PS_SERVER_CONSISTENCY_SYNC_RULE_H_
#define PS_SERVER_CONSISTENCY_SYNC_RULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/consistency/consistency_rule.h"

namespace ps {

class SyncRule : public ConsistencyRule {
 public:
  SyncRule(const ConsistencyConfig& consistency, int num_workers);

  bool aggregates() const override { return true; }
  PushDecision Admit(const PushRequestHeader& header, int64_t staleness) override;
  // A repeat joins the open step only when the step needs every worker that can still give
  // (R at least their number); with backup workers it is dropped, and R other gradients
  // complete the step.
  PushDecision AdmitRepeat(const PushRequestHeader& header, int64_t staleness) override;
  // The schedule counts steps: every gradient of a step gets the step's rate.
  float LearningRate(const LearningRateSchedule& schedule, int64_t updates_started,
                     int64_t staleness) const override;
  std::vector<Contribution> TakeAggregate() override;
  bool Leave(int worker) override;
  bool PullReady(const PullRequest& request) const override;
  std::string WaitReason(const PullRequest& request) const override;
  int64_t step() const override { return step_; }
  int64_t checkpoint_clock(int64_t version) const override {
    (void)version;
    return step_;
  }
  bool agreed_checkpoint_clock() const override { return true; }
  std::vector<int> WaitingFor() const override;
  void SaveState(ShardCheckpointState* state) const override;
  absl::Status RestoreState(const ShardCheckpointState& state) override;

  // How many gradients complete the open step: R, down to the number of workers that can still
  // give one to it (those in the job, and those that left after giving theirs), so that the
  // others do not wait for one that stopped. At least 1.
  int AggregateSize() const;

 private:
  // The workers that can still give a gradient to the open step: those in the job, and those
  // that left after giving theirs.
  int Givers() const;

  // R: ConsistencyConfig.replicas_to_aggregate, or every worker of the job (as it grows) when
  // that is unset.
  int ReplicasToAggregate() const;

  const int replicas_to_aggregate_;  // As configured; 0: every worker.
  int64_t step_ = 0;  // Steps applied.
};

}  // namespace ps

#endif  // PS_SERVER_CONSISTENCY_SYNC_RULE_H_
