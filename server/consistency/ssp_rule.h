// SSP: stale synchronous parallel with bound s (Ho et al. 2013). Each worker has a clock, the
// number of pushes it has completed; it pushes once per clock, in order ("clock" rejects
// anything else), and each gradient is applied when it arrives. A pull at clock c waits while c
// is more than s ahead of the slowest worker still in the job; s = 0 is lockstep without
// averaging.
#ifndef PS_SERVER_CONSISTENCY_SSP_RULE_H_
#define PS_SERVER_CONSISTENCY_SSP_RULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/consistency/consistency_rule.h"

namespace ps {

class SspRule : public ConsistencyRule {
 public:
  SspRule(const ConsistencyConfig& consistency, int num_workers);

  PushDecision Admit(const PushRequestHeader& header, int64_t staleness) override;
  void Applied(const PushRequestHeader& header) override;
  bool PullReady(const PullRequest& request) const override;
  std::string WaitReason(const PullRequest& request) const override;
  int64_t clock(int worker) const override { return clocks_[worker]; }
  void Rejoin(int worker, int64_t clock) override;
  void AddWorkers(int num_workers) override;  // A new worker's clock is set as it joins.
  // The slowest clock of the workers still in the job; once all have left, the furthest.
  int64_t checkpoint_clock(int64_t version) const override;
  bool agreed_checkpoint_clock() const override { return true; }
  void SaveState(ShardCheckpointState* state) const override;
  absl::Status RestoreState(const ShardCheckpointState& state) override;

 private:
  // The slowest clock among the workers in the job; very large when all have left.
  int64_t MinClock() const;

  const int64_t bound_;
  std::vector<int64_t> clocks_;  // Per worker.
};

}  // namespace ps

#endif  // PS_SERVER_CONSISTENCY_SSP_RULE_H_
