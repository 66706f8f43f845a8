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

}  // namespace
}  // namespace ps
