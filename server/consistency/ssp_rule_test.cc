#include "server/consistency/ssp_rule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/consistency/rule_testing.h"

namespace ps {
namespace {

using rule_testing::PullFor;
using rule_testing::PushFrom;
using ::testing::HasSubstr;

ConsistencyConfig Ssp(int bound) {
  ConsistencyConfig config;
  config.set_mode(ConsistencyConfig::SSP);
  config.set_ssp_bound(bound);
  return config;
}

// Worker `worker` completes its next clock.
void Tick(SspRule& rule, int worker) {
  const PushRequestHeader push = PushFrom(worker, 0, 0, rule.clock(worker));
  ASSERT_EQ(rule.Admit(push, 0).action, PushDecision::kApply);
  rule.Applied(push);
}

TEST(SspRuleTest, AWorkerMayRunAtMostTheBoundAheadOfTheSlowest) {
  SspRule rule(Ssp(/*bound=*/1), 2);
  EXPECT_FALSE(rule.aggregates());
  EXPECT_TRUE(rule.PullReady(PullFor(0, 0, /*clock=*/1)));
  EXPECT_FALSE(rule.PullReady(PullFor(0, 0, /*clock=*/2)));
  EXPECT_THAT(rule.WaitReason(PullFor(0, 0, 2)),
              HasSubstr("pull at clock 2 with ssp_bound 1 is waiting for workers 0, 1 to reach "
                        "clock 1"));
  Tick(rule, 1);
  EXPECT_FALSE(rule.PullReady(PullFor(0, 0, 2)));
  Tick(rule, 0);
  EXPECT_EQ(rule.clock(0), 1);
  EXPECT_TRUE(rule.PullReady(PullFor(0, 0, 2)));
}

TEST(SspRuleTest, BoundZeroIsLockstep) {
  SspRule rule(Ssp(0), 2);
  Tick(rule, 0);
  EXPECT_FALSE(rule.PullReady(PullFor(0, 0, 1)));
  Tick(rule, 1);
  EXPECT_TRUE(rule.PullReady(PullFor(0, 0, 1)));
}

TEST(SspRuleTest, APushOutOfClockOrderIsRejectedAndChangesNoClock) {
  SspRule rule(Ssp(2), 1);
  const PushDecision skipped = rule.Admit(PushFrom(0, 0, 0, /*clock=*/1), 0);
  EXPECT_EQ(skipped.action, PushDecision::kReject);
  EXPECT_EQ(skipped.reason, "clock");
  EXPECT_EQ(skipped.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(skipped.status.message(), HasSubstr("push once per clock, in order"));
  EXPECT_EQ(rule.clock(0), 0);
}

TEST(SspRuleTest, AWorkerThatLeftNoLongerHoldsTheOthersBack) {
  SspRule rule(Ssp(0), 2);
  Tick(rule, 0);
  EXPECT_FALSE(rule.PullReady(PullFor(0, 0, 1)));
  EXPECT_FALSE(rule.Leave(1));
  EXPECT_TRUE(rule.left(1));
  EXPECT_TRUE(rule.PullReady(PullFor(0, 0, 1)));
  EXPECT_FALSE(rule.Leave(0));
  EXPECT_TRUE(rule.PullReady(PullFor(0, 0, 1000)));  // All left: nothing waits.
}

TEST(SspRuleTest, ItsStateComesBackFromACheckpoint) {
  SspRule rule(Ssp(1), 3);
  Tick(rule, 0);
  Tick(rule, 0);
  Tick(rule, 2);
  rule.Leave(1);
  ShardCheckpointState state;
  rule.SaveState(&state);
  SspRule restored(Ssp(1), 3);
  ASSERT_TRUE(restored.RestoreState(state).ok());
  for (int w = 0; w < 3; ++w) {
    EXPECT_EQ(restored.clock(w), rule.clock(w)) << w;
    EXPECT_EQ(restored.left(w), rule.left(w)) << w;
  }
  EXPECT_EQ(restored.PullReady(PullFor(0, 0, 3)), rule.PullReady(PullFor(0, 0, 3)));
  SspRule other(Ssp(1), 2);  // Another number of workers.
  EXPECT_EQ(other.RestoreState(state).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ps
