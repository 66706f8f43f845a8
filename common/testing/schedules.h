// Learning-rate schedules (proto/parameter.proto) for tests, one line each.
#ifndef PS_COMMON_TESTING_SCHEDULES_H_
#define PS_COMMON_TESTING_SCHEDULES_H_

#include <cstdint>

#include "proto/parameter.pb.h"

namespace ps {
namespace testing_schedules {

inline LearningRateSchedule Constant(float base) {
  LearningRateSchedule schedule;
  schedule.set_kind(LearningRateSchedule::CONSTANT);
  schedule.set_base(base);
  return schedule;
}

inline LearningRateSchedule StepDecay(float base, int64_t decay_steps, float decay_factor) {
  LearningRateSchedule schedule;
  schedule.set_kind(LearningRateSchedule::STEP_DECAY);
  schedule.set_base(base);
  schedule.set_decay_steps(decay_steps);
  schedule.set_decay_factor(decay_factor);
  return schedule;
}

inline LearningRateSchedule LinearWarmup(float base, int64_t warmup_steps) {
  LearningRateSchedule schedule;
  schedule.set_kind(LearningRateSchedule::LINEAR_WARMUP);
  schedule.set_base(base);
  schedule.set_warmup_steps(warmup_steps);
  return schedule;
}

}  // namespace testing_schedules
}  // namespace ps

#endif  // PS_COMMON_TESTING_SCHEDULES_H_
