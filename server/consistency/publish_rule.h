// ALLREDUCE and LOCAL_SGD: the workers train on copies of their own and average among
// themselves (worker/exchange/ring_exchange.h); a shard holds the initial values they pull
// once, and the model the chief (worker 0) publishes, whose values replace the shard's
// (kAssign): every checkpoint.every_steps steps (a checkpoint is taken right after) and when
// the job ends. A push from another worker is refused, as it would overwrite the chief's model.
//
// Clock: a publish carries the steps its model has taken (PushRequestHeader.step), which
// become the shard's step and its checkpoint clock; every shard gets the same publishes, so
// their clocks agree, as SYNC's steps do, and a checkpoint armed at step S is the model after
// S steps on every shard.
#ifndef PS_SERVER_CONSISTENCY_PUBLISH_RULE_H_
#define PS_SERVER_CONSISTENCY_PUBLISH_RULE_H_

#include <cstdint>

#include "server/consistency/consistency_rule.h"

namespace ps {

class PublishRule : public ConsistencyRule {
 public:
  explicit PublishRule(int num_workers) : ConsistencyRule(num_workers) {}

  // The chief's publish of a model of at least the last one's steps: kAssign. Another worker's
  // push, or a publish of fewer steps than the last, is refused (FAILED_PRECONDITION).
  PushDecision Admit(const PushRequestHeader& header, int64_t staleness) override;
  void Applied(const PushRequestHeader& header) override { step_ = header.step(); }
  int64_t step() const override { return step_; }
  int64_t checkpoint_clock(int64_t version) const override {
    (void)version;
    return step_;
  }
  bool agreed_checkpoint_clock() const override { return true; }
  void SaveState(ShardCheckpointState* state) const override;
  absl::Status RestoreState(const ShardCheckpointState& state) override;

 private:
  int64_t step_ = 0;  // The steps of the model last published (0: the initial values).
};

}  // namespace ps

#endif  // PS_SERVER_CONSISTENCY_PUBLISH_RULE_H_
