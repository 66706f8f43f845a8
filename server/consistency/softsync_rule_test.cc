#include "server/consistency/softsync_rule.h"

#include <gtest/gtest.h>

#include "server/consistency/rule_testing.h"

namespace ps {
namespace {

using rule_testing::PullFor;
using rule_testing::PushFrom;

ConsistencyConfig Softsync(int n) {
  ConsistencyConfig config;
  config.set_mode(ConsistencyConfig::SOFTSYNC);
  config.set_softsync_n(n);
  return config;
}

TEST(SoftsyncRuleTest, AppliesTheMeanOfEveryCGradientsFromAnyWorkers) {
  SoftsyncRule rule(Softsync(/*n=*/2), 4);  // c = 4 / 2.
  EXPECT_EQ(rule.aggregate_size(), 2);
  EXPECT_TRUE(rule.aggregates());
  EXPECT_EQ(rule.Admit(PushFrom(3), 0).action, PushDecision::kAccumulate);
  EXPECT_EQ(rule.Admit(PushFrom(3), 5).action, PushDecision::kApplyAggregate);
  EXPECT_EQ(rule.TakeAggregate().size(), 2u);
  EXPECT_EQ(rule.step(), 0);
  EXPECT_TRUE(rule.PullReady(PullFor(0, 9, 9)));
}

TEST(SoftsyncRuleTest, NAtLeastTheWorkersAppliesEachGradientAlone) {
  SoftsyncRule rule(Softsync(/*n=*/8), 4);
  EXPECT_EQ(rule.aggregate_size(), 1);
  EXPECT_FALSE(rule.aggregates());
  EXPECT_EQ(rule.Admit(PushFrom(0), 0).action, PushDecision::kApply);
  EXPECT_TRUE(rule.open_aggregate().empty());
}

}  // namespace
}  // namespace ps
