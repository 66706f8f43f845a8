#include "ctl/job/job_defaults.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/job/job_schema.h"
#include "common/job/job_spec.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

JobSpec Parse(const std::string& json) {
  absl::StatusOr<JobSpec> spec = ParseJobSpecJson(json, "test");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec();
}

constexpr char kJob[] = R"({"job_id": "j", "model": {"kind": "SOFTMAX_REGRESSION"},
  "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 100, "feature_dim": 4,
                         "num_classes": 2}},
  "learning_rate": {"base": 0.1}, "consistency": {"mode": "SYNC"}, "batch_size": 4,
  "steps": 10)";

TEST(JobDefaultsTest, AJobThatSaysNothingGetsCheckpointsAndALease) {
  const absl::Status valid = ValidateJobSpec(Parse(std::string(kJob) + "}"), 2);
  ASSERT_TRUE(valid.ok()) << valid;
  std::vector<std::string> applied;
  const JobSpec spec = WithCrashDefaults(Parse(std::string(kJob) + "}"), 2, &applied);
  EXPECT_EQ(spec.checkpoint().every_seconds(), kDefaultCheckpointSeconds);
  EXPECT_EQ(spec.checkpoint().every_steps(), 0);
  EXPECT_EQ(spec.worker_lease_s(), kDefaultWorkerLeaseSeconds);
  ASSERT_THAT(applied, SizeIs(2));
  EXPECT_THAT(applied[0], HasSubstr("a checkpoint every 600 s"));
}

TEST(JobDefaultsTest, WhatTheJobSaysIsKeptAnEmptyCheckpointAndALeaseOfZeroIncluded) {
  std::vector<std::string> applied;
  JobSpec spec = WithCrashDefaults(
      Parse(std::string(kJob) + R"(, "checkpoint": {}, "worker_lease_s": 0})"), 2, &applied);
  EXPECT_FALSE(spec.checkpoint().every_seconds() > 0);
  EXPECT_EQ(spec.worker_lease_s(), 0);
  EXPECT_THAT(applied, SizeIs(0));
  spec = WithCrashDefaults(
      Parse(std::string(kJob) + R"(, "checkpoint": {"every_steps": 5}, "worker_lease_s": 3})"), 2,
      &applied);
  EXPECT_EQ(spec.checkpoint().every_steps(), 5);
  EXPECT_EQ(spec.checkpoint().every_seconds(), 0);
  EXPECT_EQ(spec.worker_lease_s(), 3);
}

// A mode that cannot take checkpoints (EASGD) gets none by default, and is not refused for it.
TEST(JobDefaultsTest, ADefaultTheModeRefusesIsNotGiven) {
  const JobSpec easgd = Parse(R"({"job_id": "j", "model": {"kind": "SOFTMAX_REGRESSION"},
        "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 100, "feature_dim": 4,
                               "num_classes": 2}},
        "learning_rate": {"base": 0.1}, "consistency": {"mode": "EASGD", "easgd_alpha": 0.45, "easgd_period": 2},
        "batch_size": 4,
        "steps": 10})");
  const absl::Status valid = ValidateJobSpec(easgd, 2);
  ASSERT_TRUE(valid.ok()) << valid;
  std::vector<std::string> applied;
  const JobSpec spec = WithCrashDefaults(easgd, 2, &applied);
  EXPECT_FALSE(spec.has_checkpoint());
  EXPECT_TRUE(ValidateJobSpec(spec, 2).ok());
}

}  // namespace
}  // namespace ps
