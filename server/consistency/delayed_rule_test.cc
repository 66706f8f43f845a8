#include "server/consistency/delayed_rule.h"

#include <gtest/gtest.h>

#include "server/consistency/rule_testing.h"

namespace ps {
namespace {

TEST(DelayedRuleTest, AppliesEveryGradientAloneAndServesValuesDelayUpdatesOld) {
  DelayedRule rule(/*delay=*/3, /*num_workers=*/2);
  EXPECT_EQ(rule.served_delay(), 3);
  EXPECT_FALSE(rule.aggregates());
  EXPECT_FALSE(rule.agreed_checkpoint_clock());
  PushRequestHeader header;
  for (int64_t staleness : {0, 3, 50}) {  // No bound: the delay is the experiment's.
    header.set_worker(static_cast<int>(staleness % 2));
    EXPECT_EQ(rule.Admit(header, staleness).action, PushDecision::kApply);
  }
  EXPECT_TRUE(rule.PullReady(PullRequest()));
}

}  // namespace
}  // namespace ps
