#include "server/consistency/rule_factory.h"

#include <gtest/gtest.h>

#include "common/job/consistency_modes.h"
#include "server/consistency/async_rule.h"
#include "server/consistency/delayed_rule.h"
#include "server/consistency/publish_rule.h"
#include "server/consistency/softsync_rule.h"
#include "server/consistency/ssp_rule.h"
#include "server/consistency/sync_rule.h"

namespace ps {
namespace {

ParameterSpec SpecOf(ConsistencyConfig::Mode mode) {
  ParameterSpec spec;
  spec.set_num_workers(3);
  spec.mutable_consistency()->set_mode(mode);
  spec.mutable_consistency()->set_softsync_n(1);
  return spec;
}

// A mode with a row in common/job/consistency_modes.h has a rule, and its row agrees with it.
TEST(RuleFactoryTest, EveryModeOfTheTableHasARule) {
  for (ConsistencyConfig::Mode mode : AllModes()) {
    SCOPED_TRACE(ConsistencyConfig::Mode_Name(mode));
    ParameterSpec spec = SpecOf(mode);
    spec.mutable_consistency()->set_local_steps(1);
    spec.mutable_consistency()->set_easgd_alpha(0.3f);
    spec.mutable_consistency()->set_easgd_period(1);
    const std::unique_ptr<ConsistencyRule> rule = CreateConsistencyRule(spec);
    ASSERT_NE(rule, nullptr);
    EXPECT_EQ(dynamic_cast<PublishRule*>(rule.get()) != nullptr,
              ModeTraitsOf(mode).family == ModeFamily::kRing);
  }
  EXPECT_EQ(CreateConsistencyRule(SpecOf(ConsistencyConfig::MODE_UNSPECIFIED)), nullptr);
}

TEST(RuleFactoryTest, EachModeGetsItsOwnRule) {
  EXPECT_NE(dynamic_cast<SyncRule*>(CreateConsistencyRule(SpecOf(ConsistencyConfig::SYNC)).get()),
            nullptr);
  EXPECT_NE(dynamic_cast<AsyncRule*>(CreateConsistencyRule(SpecOf(ConsistencyConfig::ASYNC)).get()),
            nullptr);
  EXPECT_NE(dynamic_cast<SspRule*>(CreateConsistencyRule(SpecOf(ConsistencyConfig::SSP)).get()),
            nullptr);
  EXPECT_NE(
      dynamic_cast<SoftsyncRule*>(CreateConsistencyRule(SpecOf(ConsistencyConfig::SOFTSYNC)).get()),
      nullptr);
  for (ConsistencyConfig::Mode ring :
       {ConsistencyConfig::ALLREDUCE, ConsistencyConfig::LOCAL_SGD}) {
    EXPECT_NE(dynamic_cast<PublishRule*>(CreateConsistencyRule(SpecOf(ring)).get()), nullptr);
  }
  ParameterSpec delayed = SpecOf(ConsistencyConfig::DELAYED);
  delayed.mutable_consistency()->set_delay(4);
  const std::unique_ptr<ConsistencyRule> rule = CreateConsistencyRule(delayed);
  ASSERT_NE(dynamic_cast<DelayedRule*>(rule.get()), nullptr);
  EXPECT_EQ(rule->served_delay(), 4);
  EXPECT_EQ(CreateConsistencyRule(SpecOf(ConsistencyConfig::SYNC))->num_workers(), 3);
}

TEST(RuleFactoryTest, AnUnsetModeHasNoRule) {
  EXPECT_EQ(CreateConsistencyRule(SpecOf(ConsistencyConfig::MODE_UNSPECIFIED)), nullptr);
}

}  // namespace
}  // namespace ps
