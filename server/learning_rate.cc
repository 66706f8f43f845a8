#include "server/learning_rate.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace ps {

absl::Status ValidateLearningRateSchedule(const LearningRateSchedule& schedule) {
  if (!(schedule.base() > 0) || !std::isfinite(schedule.base())) {
    return absl::InvalidArgumentError(
        absl::StrCat("learning_rate.base must be finite and > 0, got ", schedule.base()));
  }
  switch (schedule.kind()) {
    case LearningRateSchedule::CONSTANT:
      return absl::OkStatus();
    case LearningRateSchedule::STEP_DECAY:
      if (schedule.decay_steps() <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("learning_rate.decay_steps must be > 0 for STEP_DECAY, got ",
                         schedule.decay_steps()));
      }
      if (!(schedule.decay_factor() > 0 && schedule.decay_factor() <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("learning_rate.decay_factor must be in (0, 1] for STEP_DECAY, got ",
                         schedule.decay_factor()));
      }
      return absl::OkStatus();
    case LearningRateSchedule::LINEAR_WARMUP:
      if (schedule.warmup_steps() <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("learning_rate.warmup_steps must be > 0 for LINEAR_WARMUP, got ",
                         schedule.warmup_steps()));
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "learning_rate.kind ", static_cast<int>(schedule.kind()), " is unknown"));
  }
}

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
