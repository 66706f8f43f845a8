#include "common/job_spec.h"

#include <gtest/gtest.h>

#include "common/job_schema.h"

namespace ps {
namespace {

constexpr char kValid[] = R"({
  "job_id": "j", "model": {"kind": "SOFTMAX_REGRESSION"},
  "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 100, "feature_dim": 4,
                         "num_classes": 3}},
  "learning_rate": {"base": 0.1}, "consistency": {"mode": "SYNC"},
  "batch_size": 8, "steps": 10})";

JobSpec Valid() {
  absl::StatusOr<JobSpec> spec = ParseJobSpecJson(kValid, "valid.json");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

TEST(JobSpecTest, ParsesAndValidates) {
  JobSpec spec = Valid();
  EXPECT_EQ(spec.model().kind(), ModelSpec::SOFTMAX_REGRESSION);
  EXPECT_TRUE(ValidateJobSpec(spec, 2).ok());
}

TEST(JobSpecTest, JsonErrorsNameTheFile) {
  for (const char* bad : {R"({"job_id": "j", "bogus": 1})", R"({"model": {"kind": "TREE"}})",
                          R"({"batch_size": "many"})", "{"}) {
    absl::StatusOr<JobSpec> spec = ParseJobSpecJson(bad, "bad.json");
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(spec.status().message().rfind("bad.json: ", 0), 0u) << spec.status();
  }
  EXPECT_EQ(ReadJobSpecFile("/nonexistent/job.json").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(JobSpecTest, ParameterSpecCarriesThePsSide) {
  JobSpec spec = Valid();
  spec.set_seed(7);
  VariableDef w;
  w.set_name("layer0/weights");
  w.add_shape(4);
  w.add_shape(3);
  ParameterSpec parameters = ToParameterSpec(spec, {w}, 2);
  EXPECT_EQ(parameters.job_id(), "j");
  EXPECT_EQ(parameters.num_workers(), 2);
  EXPECT_EQ(parameters.seed(), 7u);
  ASSERT_EQ(parameters.variables_size(), 1);
  EXPECT_EQ(parameters.consistency().mode(), ConsistencyConfig::SYNC);
}

TEST(JobSpecExamplesTest, EveryExampleInConfigLoadsAndValidates) {
  for (const char* path :
       {"config/jobs/default.json", "config/jobs/async_downpour.json",
        "config/jobs/ssp_stragglers.json", "config/jobs/backup_workers.json",
        "config/jobs/softsync_linear.json"}) {
    absl::StatusOr<JobSpec> spec = ReadJobSpecFile(path);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_TRUE(ValidateJobSpec(*spec, 2).ok()) << path << ": " << ValidateJobSpec(*spec, 2);
  }
}

}  // namespace
}  // namespace ps
