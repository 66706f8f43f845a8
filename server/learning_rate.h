// Learning-rate schedules (proto/parameter.proto's LearningRateSchedule) and the staleness
// rule for asynchronous updates.
#ifndef PS_SERVER_LEARNING_RATE_H_
#define PS_SERVER_LEARNING_RATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "proto/parameter.pb.h"

namespace ps {

// INVALID_ARGUMENT naming the field: base <= 0 or not finite; STEP_DECAY without decay_steps
// > 0 or with decay_factor outside (0, 1]; LINEAR_WARMUP without warmup_steps > 0.
absl::Status ValidateLearningRateSchedule(const LearningRateSchedule& schedule);

// The learning rate for the update numbered `step` (0 for the first update of the job on this
// shard). REQUIRES: ValidateLearningRateSchedule(schedule).ok(), step >= 0.
float LearningRateAt(const LearningRateSchedule& schedule, int64_t step);

// The learning rate for a gradient of staleness `staleness` under `rule`: unchanged for NONE
// or staleness 0, divided by the staleness for INVERSE (Zhang et al. 2016).
float StalenessAdjustedLearningRate(float learning_rate,
                                    ConsistencyConfig::StalenessLearningRate rule,
                                    int64_t staleness);

}  // namespace ps

#endif  // PS_SERVER_LEARNING_RATE_H_
