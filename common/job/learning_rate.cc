#include "common/job/learning_rate.h"

#include <algorithm>
#include <cmath>

namespace ps {

float LearningRateAt(const LearningRateSchedule& schedule, int64_t step) {
  const double base = schedule.base();
  switch (schedule.kind()) {
    case LearningRateSchedule::STEP_DECAY: {
      const int64_t decays = step / schedule.decay_steps();
      return static_cast<float>(
          base * std::pow(static_cast<double>(schedule.decay_factor()), static_cast<double>(decays)));
    }
    case LearningRateSchedule::LINEAR_WARMUP: {
      const double fraction = static_cast<double>(step + 1) / schedule.warmup_steps();
      return static_cast<float>(base * std::min(1.0, fraction));
    }
    default:
      return schedule.base();
  }
}

float StalenessAdjustedLearningRate(float learning_rate,
                                    ConsistencyConfig::StalenessLearningRate rule,
                                    int64_t staleness) {
  if (rule == ConsistencyConfig::INVERSE && staleness > 0) {
    return learning_rate / static_cast<float>(staleness);
  }
  return learning_rate;
}

}  // namespace ps
