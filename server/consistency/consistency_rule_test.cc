// What every rule shares (consistency_rule.cc), through the simplest rule that adds nothing to
// it: the decisions' forms, the schedule's default position, and the common part of a
// checkpoint's state.
#include "server/consistency/consistency_rule.h"

#include <gtest/gtest.h>

#include "common/testing/schedules.h"
#include "server/consistency/async_rule.h"

namespace ps {
namespace {

TEST(PushDecisionTest, EachFormCarriesWhatItsActionNeeds) {
  PushDecision reject = PushDecision::Reject("clock", absl::FailedPreconditionError("late"));
  EXPECT_EQ(reject.action, PushDecision::kReject);
  EXPECT_EQ(reject.reason, "clock");
  EXPECT_EQ(reject.status.message(), "late");
  PushDecision drop = PushDecision::Drop("stale_step");
  EXPECT_EQ(drop.action, PushDecision::kDrop);
  EXPECT_EQ(drop.reason, "stale_step");
  EXPECT_TRUE(drop.status.ok());
  EXPECT_EQ(PushDecision::Of(PushDecision::kAccumulate).action, PushDecision::kAccumulate);
}

TEST(ConsistencyRuleTest, TheScheduleCountsUpdatesStartedByDefault) {
  ConsistencyConfig config;
  AsyncRule rule(config, 2);
  const LearningRateSchedule schedule = testing_schedules::StepDecay(1.0f, 2, 0.5f);
  EXPECT_FLOAT_EQ(rule.LearningRate(schedule, 1, 0), 1.0f);
  EXPECT_FLOAT_EQ(rule.LearningRate(schedule, 2, 0), 0.5f);
}

TEST(ConsistencyRuleTest, ACheckpointsStateMustFitTheRulesWorkers) {
  ConsistencyConfig config;
  AsyncRule rule(config, 2);
  EXPECT_FALSE(rule.Leave(1));
  ShardCheckpointState state;
  rule.SaveState(&state);
  AsyncRule restored(config, 2);
  ASSERT_TRUE(restored.RestoreState(state).ok());
  EXPECT_FALSE(restored.left(0));
  EXPECT_TRUE(restored.left(1));

  AsyncRule three(config, 3);
  EXPECT_EQ(three.RestoreState(state).code(), absl::StatusCode::kDataLoss);
  state.add_open_aggregate()->set_worker(7);
  EXPECT_EQ(restored.RestoreState(state).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ps
