#include "server/consistency/async_rule.h"

#include "common/job/learning_rate.h"

namespace ps {

AsyncRule::AsyncRule(const ConsistencyConfig& consistency, int num_workers)
    : ConsistencyRule(num_workers),
      max_staleness_(consistency.max_staleness()),
      staleness_learning_rate_(consistency.staleness_learning_rate()) {}

PushDecision AsyncRule::Admit(const PushRequestHeader& header, int64_t staleness) {
  (void)header;
  if (max_staleness_ > 0 && staleness > max_staleness_) {
    return PushDecision::Drop("max_staleness");
  }
  return PushDecision::Of(PushDecision::kApply);
}

float AsyncRule::LearningRate(const LearningRateSchedule& schedule, int64_t updates_started,
                              int64_t staleness) const {
  return StalenessAdjustedLearningRate(LearningRateAt(schedule, updates_started),
                                       staleness_learning_rate_, staleness);
}

}  // namespace ps
