// ASYNC: Downpour SGD (Dean et al. 2012). Each gradient is applied when it arrives; pulls never
// wait. Options: max_staleness (> 0) drops gradients staler than it ("max_staleness"), and the
// staleness learning-rate rule (INVERSE: the rate divided by the staleness, Zhang et al. 2016).
#ifndef PS_SERVER_CONSISTENCY_ASYNC_RULE_H_
#define PS_SERVER_CONSISTENCY_ASYNC_RULE_H_

#include <cstdint>

#include "server/consistency/consistency_rule.h"

namespace ps {

class AsyncRule : public ConsistencyRule {
 public:
  AsyncRule(const ConsistencyConfig& consistency, int num_workers);

  PushDecision Admit(const PushRequestHeader& header, int64_t staleness) override;
  float LearningRate(const LearningRateSchedule& schedule, int64_t updates_started,
                     int64_t staleness) const override;

 private:
  const int max_staleness_;  // 0: no bound.
  const ConsistencyConfig::StalenessLearningRate staleness_learning_rate_;
};

}  // namespace ps

#endif  // PS_SERVER_CONSISTENCY_ASYNC_RULE_H_
