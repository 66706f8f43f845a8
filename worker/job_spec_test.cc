#include "worker/job_spec.h"

#include <functional>

#include <gtest/gtest.h>

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

TEST(JobSpecTest, SemanticErrorsNameTheField) {
  struct Case {
    std::function<void(JobSpec*)> mutate;
    const char* field;
  };
  const Case kCases[] = {
      {[](JobSpec* s) { s->clear_job_id(); }, "job_id"},
      {[](JobSpec* s) { s->mutable_model()->clear_kind(); }, "model.kind"},
      {[](JobSpec* s) { s->mutable_model()->set_kind(ModelSpec::MLP); }, "model.hidden_sizes"},
      {[](JobSpec* s) { s->mutable_data()->clear_synthetic(); }, "data"},
      {[](JobSpec* s) { s->mutable_data()->set_test_fraction(1); }, "data.test_fraction"},
      {[](JobSpec* s) { s->set_batch_size(0); }, "batch_size"},
      {[](JobSpec* s) { s->set_steps(0); }, "stop condition"},
      {[](JobSpec* s) { s->mutable_consistency()->set_replicas_to_aggregate(3); },
       "consistency.replicas_to_aggregate is 3 but the cluster has 2 workers"},
      {[](JobSpec* s) { s->mutable_consistency()->clear_mode(); }, "consistency.mode"},
      {[](JobSpec* s) {
         s->mutable_consistency()->set_mode(ConsistencyConfig::SOFTSYNC);
       },
       "consistency.softsync_n"},
      {[](JobSpec* s) { s->mutable_stragglers()->add_workers(2); }, "stragglers.workers"},
      {[](JobSpec* s) { s->mutable_learning_rate()->set_base(0); }, "learning_rate"},
      {[](JobSpec* s) { s->mutable_optimizer()->set_kind(OptimizerConfig::MOMENTUM);
                        s->mutable_optimizer()->set_momentum(2); },
       "optimizer.momentum"},
      {[](JobSpec* s) { s->set_target_loss(0.1f); }, "eval_interval"},
      {[](JobSpec* s) {
         s->mutable_consistency()->set_mode(ConsistencyConfig::SSP);
         s->mutable_downpour()->set_overlap_communication(true);
       },
       "downpour.overlap_communication needs consistency mode ASYNC"},
  };
  for (const Case& c : kCases) {
    JobSpec spec = Valid();
    c.mutate(&spec);
    absl::Status status = ValidateJobSpec(spec, 2);
    ASSERT_FALSE(status.ok()) << c.field;
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(c.field), absl::string_view::npos)
        << c.field << " not in: " << status.message();
  }
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
