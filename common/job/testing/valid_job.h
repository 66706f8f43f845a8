// A small valid JobSpec for tests that change one field of it: softmax regression on a
// synthetic mixture, SYNC, 10 steps.
#ifndef PS_COMMON_JOB_TESTING_VALID_JOB_H_
#define PS_COMMON_JOB_TESTING_VALID_JOB_H_

#include <gtest/gtest.h>

#include "common/job/job_spec.h"

namespace ps {
namespace testing_jobs {

inline constexpr char kValidJobJson[] = R"({
  "job_id": "j", "model": {"kind": "SOFTMAX_REGRESSION"},
  "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 100, "feature_dim": 4,
                         "num_classes": 3}},
  "learning_rate": {"base": 0.1}, "consistency": {"mode": "SYNC"},
  "batch_size": 8, "steps": 10})";

inline JobSpec ValidJob() {
  absl::StatusOr<JobSpec> spec = ParseJobSpecJson(kValidJobJson, "valid.json");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

}  // namespace testing_jobs
}  // namespace ps

#endif  // PS_COMMON_JOB_TESTING_VALID_JOB_H_
