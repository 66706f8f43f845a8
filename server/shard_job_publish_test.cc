// ALLREDUCE and LOCAL_SGD on a shard: the chief's pushes replace the values (a published model,
// not a gradient: no optimizer, no learning rate), and nobody else may push.
#include <vector>

#include <gtest/gtest.h>

#include "server/shard_job.h"
#include "server/shard_job_testing.h"

namespace ps {
namespace {

class ShardJobPublishTest : public ::testing::TestWithParam<ConsistencyConfig::Mode> {};

TEST_P(ShardJobPublishTest, TheChiefsPushReplacesTheValuesAndOthersAreRefused) {
  ParameterSpec spec = CheckpointTestSpec(GetParam(), OptimizerConfig::ADAM);
  spec.mutable_consistency()->set_local_steps(4);
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, 1, 0);
  ASSERT_TRUE(job.ok()) << job.status();
  const std::vector<float> initial = AllValues(job->get());
  std::vector<float> model(initial.size());
  for (size_t i = 0; i < model.size(); ++i) model[i] = 0.25f * static_cast<float>(i) - 3.0f;

  absl::StatusOr<PushResponse> published = (*job)->Push(StepPushHeader(**job, 0, 0), model);
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_EQ(published->outcome(), PushResponse::APPLIED);
  EXPECT_EQ(published->version(), 1);
  EXPECT_EQ(AllValues(job->get()), model);  // Exactly: assigned, not an Adam step.

  absl::StatusOr<PushResponse> other = (*job)->Push(StepPushHeader(**job, 2, 0), initial);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("only the chief, worker 0, publishes"),
            absl::string_view::npos)
      << other.status();
  EXPECT_EQ(AllValues(job->get()), model);
  const JobStats stats = (*job)->Stats();
  EXPECT_EQ(stats.version(), 1);
  EXPECT_EQ(stats.rejected().at("publisher"), 1);
}

INSTANTIATE_TEST_SUITE_P(RingModes, ShardJobPublishTest,
                         ::testing::Values(ConsistencyConfig::ALLREDUCE,
                                           ConsistencyConfig::LOCAL_SGD),
                         [](const auto& info) { return ConsistencyConfig::Mode_Name(info.param); });

}  // namespace
}  // namespace ps
