#include "server/consistency/async_rule.h"

#include <gtest/gtest.h>

#include "common/testing/schedules.h"
#include "server/consistency/rule_testing.h"

namespace ps {
namespace {

using rule_testing::PullFor;
using rule_testing::PushFrom;

ConsistencyConfig Async(int max_staleness = 0,
                        ConsistencyConfig::StalenessLearningRate rate = ConsistencyConfig::NONE) {
  ConsistencyConfig config;
  config.set_mode(ConsistencyConfig::ASYNC);
  config.set_max_staleness(max_staleness);
  config.set_staleness_learning_rate(rate);
  return config;
}

TEST(AsyncRuleTest, EveryGradientIsAppliedAsItArrivesAndPullsNeverWait) {
  AsyncRule rule(Async(), 2);
  EXPECT_FALSE(rule.aggregates());
  EXPECT_EQ(rule.Admit(PushFrom(0), 0).action, PushDecision::kApply);
  EXPECT_EQ(rule.Admit(PushFrom(1), 1000).action, PushDecision::kApply);
  EXPECT_TRUE(rule.PullReady(PullFor(0, 5, 5)));
  EXPECT_EQ(rule.step(), 0);
  EXPECT_TRUE(rule.WaitingFor().empty());
}

TEST(AsyncRuleTest, MaxStalenessDropsOnlyStalerGradients) {
  AsyncRule rule(Async(/*max_staleness=*/2), 2);
  EXPECT_EQ(rule.Admit(PushFrom(0), 2).action, PushDecision::kApply);
  const PushDecision stale = rule.Admit(PushFrom(0), 3);
  EXPECT_EQ(stale.action, PushDecision::kDrop);
  EXPECT_EQ(stale.reason, "max_staleness");
}

TEST(AsyncRuleTest, InverseRuleDividesTheScheduledRateByTheStaleness) {
  AsyncRule plain(Async(), 1);
  AsyncRule inverse(Async(0, ConsistencyConfig::INVERSE), 1);
  const LearningRateSchedule schedule = testing_schedules::StepDecay(1.0f, 2, 0.5f);
  EXPECT_FLOAT_EQ(plain.LearningRate(schedule, 0, 4), 1.0f);
  EXPECT_FLOAT_EQ(inverse.LearningRate(schedule, 0, 4), 0.25f);
  EXPECT_FLOAT_EQ(inverse.LearningRate(schedule, 0, 0), 1.0f);
  // The schedule's position is the number of updates started before.
  EXPECT_FLOAT_EQ(inverse.LearningRate(schedule, 2, 2), 0.25f);
}

}  // namespace
}  // namespace ps
