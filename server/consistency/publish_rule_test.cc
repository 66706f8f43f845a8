#include "server/consistency/publish_rule.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(PublishRuleTest, TheChiefsPushesReplaceTheValuesAndOthersAreRefused) {
  PublishRule rule(3);
  PushRequestHeader chief;
  chief.set_worker(0);
  EXPECT_EQ(rule.Admit(chief, 0).action, PushDecision::kAssign);
  EXPECT_EQ(rule.Admit(chief, 5).action, PushDecision::kAssign);  // Whatever it read.
  PushRequestHeader other;
  other.set_worker(2);
  const PushDecision refused = rule.Admit(other, 0);
  EXPECT_EQ(refused.action, PushDecision::kReject);
  EXPECT_EQ(refused.reason, "publisher");
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kFailedPrecondition);
  PullRequest pull;
  EXPECT_TRUE(rule.PullReady(pull));
  EXPECT_FALSE(rule.aggregates());
}

TEST(PublishRuleTest, ThePublishedStepsAreTheClockCheckpointsAgreeIn) {
  PublishRule rule(2);
  EXPECT_TRUE(rule.agreed_checkpoint_clock());
  EXPECT_EQ(rule.checkpoint_clock(0), 0);
  PushRequestHeader chief;
  chief.set_worker(0);
  chief.set_step(20);
  ASSERT_EQ(rule.Admit(chief, 0).action, PushDecision::kAssign);
  rule.Applied(chief);
  EXPECT_EQ(rule.step(), 20);
  EXPECT_EQ(rule.checkpoint_clock(/*version=*/1), 20);  // Steps, not versions.
  // The same steps again (the final publish after the last checkpoint's): accepted.
  EXPECT_EQ(rule.Admit(chief, 0).action, PushDecision::kAssign);
  // Fewer steps than the shard holds: a chief of an earlier run, refused.
  chief.set_step(10);
  const PushDecision back = rule.Admit(chief, 0);
  EXPECT_EQ(back.action, PushDecision::kReject);
  EXPECT_EQ(back.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(rule.step(), 20);

  ShardCheckpointState state;
  rule.SaveState(&state);
  EXPECT_EQ(state.step(), 20);
  PublishRule restored(2);
  ASSERT_TRUE(restored.RestoreState(state).ok());
  EXPECT_EQ(restored.checkpoint_clock(0), 20);
  state.set_step(-1);
  EXPECT_EQ(restored.RestoreState(state).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ps
