#include "common/job/job_spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/job/job_schema.h"
#include "common/testing/fault_injecting_file_system.h"
#include "common/job/testing/valid_job.h"

namespace ps {
namespace {

JobSpec Valid() { return testing_jobs::ValidJob(); }

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

TEST(JobSpecTest, AJobFileThatCannotBeReadIsNamedWithTheFix) {
  FaultInjectingFileSystem fs;
  fs.HideFiles("job.json");
  absl::StatusOr<JobSpec> spec = ReadJobSpecFile("config/jobs/job.json", &fs);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find("config/jobs/job.json"), std::string::npos)
      << spec.status();
  EXPECT_NE(spec.status().message().find("cannot read the job file; check the path"),
            std::string::npos)
      << spec.status();
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
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator("config/jobs")) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".json") continue;
    absl::StatusOr<JobSpec> spec = ReadJobSpecFile(path);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_TRUE(ValidateJobSpec(*spec, 4).ok()) << path << ": " << ValidateJobSpec(*spec, 4);
    ++examples;
  }
  EXPECT_GE(examples, 16);  // config/jobs/*.json (//config:jobs).
}

}  // namespace
}  // namespace ps
