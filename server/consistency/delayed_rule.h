// DELAYED: scheduled delay, for experiments on staleness. Every gradient is applied when it
// arrives, as in ASYNC (no bound, no staleness learning rate), and every pull is served the
// values `delay` updates old (ShardJob keeps that many old copies of each slice), so that a
// worker alone computes each gradient exactly `delay` versions before it is applied: gradient
// descent with a constant delay, x_{t+1} = x_t - lr * g(x_{t - delay}) (x before the first
// update: the initial values).
#ifndef PS_SERVER_CONSISTENCY_DELAYED_RULE_H_
#define PS_SERVER_CONSISTENCY_DELAYED_RULE_H_

#include <cstdint>

#include "server/consistency/consistency_rule.h"

namespace ps {

class DelayedRule : public ConsistencyRule {
 public:
  DelayedRule(int delay, int num_workers) : ConsistencyRule(num_workers), delay_(delay) {}

  // Every push: kApply.
  PushDecision Admit(const PushRequestHeader& header, int64_t staleness) override;
  int served_delay() const override { return delay_; }

 private:
  const int delay_;
};

}  // namespace ps

#endif  // PS_SERVER_CONSISTENCY_DELAYED_RULE_H_
