#include "common/job/consistency_modes.h"

#include <gtest/gtest.h>

#include "common/job/job_schema.h"
#include "common/job/job_spec.h"
#include "common/job/testing/valid_job.h"

namespace ps {
namespace {

TEST(ConsistencyModesTest, EveryModeOfTheEnumHasItsRow) {
  int modes = 0;
  for (int value = ConsistencyConfig::Mode_MIN; value <= ConsistencyConfig::Mode_MAX; ++value) {
    if (!ConsistencyConfig::Mode_IsValid(value) || value == ConsistencyConfig::MODE_UNSPECIFIED) {
      continue;
    }
    const auto mode = static_cast<ConsistencyConfig::Mode>(value);
    const ModeTraits* traits = FindModeTraits(mode);
    ASSERT_NE(traits, nullptr) << ConsistencyConfig::Mode_Name(mode) << " has no row";
    EXPECT_EQ(traits->mode, mode);
    ++modes;
  }
  EXPECT_EQ(static_cast<int>(AllModes().size()), modes);
  EXPECT_EQ(FindModeTraits(ConsistencyConfig::MODE_UNSPECIFIED), nullptr);
  EXPECT_EQ(FindModeTraits(static_cast<ConsistencyConfig::Mode>(99)), nullptr);
}

TEST(ConsistencyModesTest, EachRowAgreesWithItself) {
  for (ConsistencyConfig::Mode mode : AllModes()) {
    SCOPED_TRACE(ConsistencyConfig::Mode_Name(mode));
    const ModeTraits& traits = ModeTraitsOf(mode);
    EXPECT_NE(traits.validate_settings, nullptr);
    EXPECT_EQ(traits.checkpoints == CheckpointPolicy::kNone, *traits.why_no_checkpoints != '\0');
    if (traits.downpour) {
      EXPECT_STREQ(traits.why_no_downpour, "");
    }
    if (traits.family == ModeFamily::kRing) {
      // The shards hold the chief's published model, which a ring needs every worker to make.
      EXPECT_FALSE(traits.shards_hold_the_model);
      EXPECT_EQ(traits.checkpoints, CheckpointPolicy::kPublishedStep);
      EXPECT_EQ(traits.lost_worker, LostWorkerPolicy::kFails);
      EXPECT_STRNE(traits.why_no_downpour, "");
    }
    if (traits.checkpoints == CheckpointPolicy::kPublishedStep) {
      EXPECT_EQ(traits.family, ModeFamily::kRing);
    }
    if (traits.barrier) {
      EXPECT_EQ(traits.staleness, Staleness::kNone);
    }
    if (traits.replayable || traits.downpour || traits.staleness_settings) {
      EXPECT_EQ(traits.family, ModeFamily::kPs);
    }
  }
}

// Every mode, with its own settings given, runs the small valid job, on the workers' side
// (JobSpec) and on the shards' (ParameterSpec).
TEST(ConsistencyModesTest, EveryModeRunsAValidJob) {
  for (ConsistencyConfig::Mode mode : AllModes()) {
    SCOPED_TRACE(ConsistencyConfig::Mode_Name(mode));
    JobSpec spec = testing_jobs::ValidJob();
    ConsistencyConfig* consistency = spec.mutable_consistency();
    consistency->set_mode(mode);
    consistency->set_softsync_n(1);
    consistency->set_local_steps(1);
    consistency->set_easgd_alpha(0.45f);
    consistency->set_easgd_period(2);
    EXPECT_TRUE(ValidateJobSpec(spec, 2).ok()) << ValidateJobSpec(spec, 2);
    VariableDef variable;
    variable.set_name("w");
    variable.add_shape(4);
    variable.mutable_initializer()->set_kind(InitializerConfig::ZEROS);
    const ParameterSpec parameters = ToParameterSpec(spec, {variable}, 2);
    EXPECT_TRUE(ValidateParameterSpec(parameters).ok()) << ValidateParameterSpec(parameters);
  }
}

TEST(ConsistencyModesTest, MessagesListTheModesOfATrait) {
  EXPECT_EQ(ModeNames([](const ModeTraits& m) { return m.shards_hold_the_model; }, "and"),
            "SYNC, ASYNC, SSP and SOFTSYNC");
  EXPECT_EQ(ModeNames([](const ModeTraits& m) { return m.replayable; }, "or"), "ASYNC");
  EXPECT_EQ(ModeNames([](const ModeTraits&) { return false; }, "or"), "");
}

}  // namespace
}  // namespace ps
