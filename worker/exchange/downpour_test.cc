#include "worker/exchange/downpour.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ps {
namespace {

using ::testing::ElementsAre;

JobSpec SpecOf(ConsistencyConfig::Mode mode) {
  JobSpec spec;
  spec.mutable_consistency()->set_mode(mode);
  spec.mutable_downpour()->set_n_fetch(3);
  spec.mutable_downpour()->set_n_push(2);
  spec.mutable_downpour()->set_local_learning_rate(0.5f);
  return spec;
}

TEST(DownpourScheduleTest, AsyncTakesTheSpecsScheduleAndOtherModesExchangeEveryStep) {
  DownpourSchedule async = DownpourSchedule::FromJobSpec(SpecOf(ConsistencyConfig::ASYNC));
  EXPECT_EQ(async.n_fetch, 3);
  EXPECT_EQ(async.n_push, 2);
  EXPECT_EQ(async.local_learning_rate, 0.5f);
  EXPECT_TRUE(async.accumulate);
  EXPECT_TRUE(async.PullsBefore(3));
  EXPECT_FALSE(async.PullsBefore(4));
  EXPECT_TRUE(async.PushesAfter(1));
  EXPECT_FALSE(async.PushesAfter(2));

  DownpourSchedule sync = DownpourSchedule::FromJobSpec(SpecOf(ConsistencyConfig::SYNC));
  EXPECT_EQ(sync.n_fetch, 1);
  EXPECT_EQ(sync.n_push, 1);
  EXPECT_EQ(sync.local_learning_rate, 0.0f);
  EXPECT_FALSE(sync.accumulate);
}

TEST(DownpourScheduleTest, ZeroMeansEveryStep) {
  JobSpec spec = SpecOf(ConsistencyConfig::ASYNC);
  spec.clear_downpour();
  DownpourSchedule schedule = DownpourSchedule::FromJobSpec(spec);
  EXPECT_EQ(schedule.n_fetch, 1);
  EXPECT_EQ(schedule.n_push, 1);
}

TEST(AccrueTest, AddsTheGradientOverNPushAndAppliesTheLocalRate) {
  VariableDef w;
  w.set_name("w");
  w.add_shape(2);
  HostVariables gradients({w}), accumulated({w}), weights({w});
  gradients.arrays()[0] = {1.0f, -2.0f};
  accumulated.arrays()[0] = {0.5f, 0.5f};
  weights.arrays()[0] = {1.0f, 1.0f};
  DownpourSchedule schedule;
  schedule.n_push = 2;
  schedule.local_learning_rate = 0.25f;
  Accrue(schedule, gradients, &accumulated, &weights);
  EXPECT_THAT(accumulated.arrays()[0], ElementsAre(1.0f, -0.5f));
  EXPECT_THAT(weights.arrays()[0], ElementsAre(0.75f, 1.5f));
  schedule.local_learning_rate = 0;
  Accrue(schedule, gradients, &accumulated, &weights);
  EXPECT_THAT(weights.arrays()[0], ElementsAre(0.75f, 1.5f));
}

}  // namespace
}  // namespace ps
