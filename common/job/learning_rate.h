// Learning-rate schedules (proto/parameter.proto's LearningRateSchedule) and the staleness
// rule for asynchronous updates. Their settings are checked in common/job/job_schema.h.
#ifndef PS_COMMON_JOB_LEARNING_RATE_H_
#define PS_COMMON_JOB_LEARNING_RATE_H_

#include <cstdint>

#include "proto/parameter.pb.h"

namespace ps {

// The learning rate for the update numbered `step` (0 for the first update of the job on this
// shard). REQUIRES: ValidateLearningRateSchedule(schedule).ok() (common/job/job_schema.h),
// step >= 0.
float LearningRateAt(const LearningRateSchedule& schedule, int64_t step);

// The learning rate for a gradient of staleness `staleness` under `rule`: unchanged for NONE
// or staleness 0, divided by the staleness for INVERSE (Zhang et al. 2016).
float StalenessAdjustedLearningRate(float learning_rate,
                                    ConsistencyConfig::StalenessLearningRate rule,
                                    int64_t staleness);

}  // namespace ps

#endif  // PS_COMMON_JOB_LEARNING_RATE_H_
