#include "common/job/learning_rate.h"

#include <gtest/gtest.h>

#include "common/job/job_schema.h"
#include "common/testing/schedules.h"

namespace ps {
namespace {

using testing_schedules::Constant;
using testing_schedules::LinearWarmup;
using testing_schedules::StepDecay;

TEST(LearningRateTest, ConstantIgnoresTheStep) {
  const LearningRateSchedule schedule = Constant(0.25f);
  ASSERT_TRUE(ValidateLearningRateSchedule(schedule).ok());
  for (int64_t step : {0, 1, 99, 1000000}) {
    EXPECT_FLOAT_EQ(LearningRateAt(schedule, step), 0.25f) << step;
  }
}

TEST(LearningRateTest, StepDecayMultipliesByTheFactorEveryDecaySteps) {
  const LearningRateSchedule schedule = StepDecay(1.0f, 10, 0.5f);
  ASSERT_TRUE(ValidateLearningRateSchedule(schedule).ok());
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 0), 1.0f);
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 9), 1.0f);
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 10), 0.5f);
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 19), 0.5f);
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 20), 0.25f);
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 35), 0.125f);
}

TEST(LearningRateTest, StepDecayWithFactorOneIsConstant) {
  const LearningRateSchedule schedule = StepDecay(0.1f, 3, 1.0f);
  ASSERT_TRUE(ValidateLearningRateSchedule(schedule).ok());
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 0), 0.1f);
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 300), 0.1f);
}

TEST(LearningRateTest, LinearWarmupRisesToTheBaseAndStays) {
  const LearningRateSchedule schedule = LinearWarmup(0.8f, 4);
  ASSERT_TRUE(ValidateLearningRateSchedule(schedule).ok());
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 0), 0.2f);
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 1), 0.4f);
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 2), 0.6f);
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 3), 0.8f);
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 4), 0.8f);
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 1000), 0.8f);
}

TEST(LearningRateTest, LinearWarmupOfOneStepIsConstant) {
  const LearningRateSchedule schedule = LinearWarmup(0.5f, 1);
  ASSERT_TRUE(ValidateLearningRateSchedule(schedule).ok());
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 0), 0.5f);
  EXPECT_FLOAT_EQ(LearningRateAt(schedule, 7), 0.5f);
}

TEST(LearningRateTest, StalenessRuleNoneLeavesTheRate) {
  for (int64_t staleness : {0, 1, 5, 100}) {
    EXPECT_FLOAT_EQ(StalenessAdjustedLearningRate(0.3f, ConsistencyConfig::NONE, staleness),
                    0.3f);
  }
}

TEST(LearningRateTest, StalenessRuleInverseDividesByPositiveStaleness) {
  EXPECT_FLOAT_EQ(StalenessAdjustedLearningRate(0.3f, ConsistencyConfig::INVERSE, 0), 0.3f);
  EXPECT_FLOAT_EQ(StalenessAdjustedLearningRate(0.3f, ConsistencyConfig::INVERSE, 1), 0.3f);
  EXPECT_FLOAT_EQ(StalenessAdjustedLearningRate(0.3f, ConsistencyConfig::INVERSE, 3), 0.1f);
  EXPECT_FLOAT_EQ(StalenessAdjustedLearningRate(0.3f, ConsistencyConfig::INVERSE, 10), 0.03f);
}

}  // namespace
}  // namespace ps
