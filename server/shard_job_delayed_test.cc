// DELAYED on a shard: every pull is served the values `delay` updates old, slice by slice, so
// that a worker alone computes each gradient exactly `delay` versions before it is applied.
#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "server/shard_job.h"
#include "server/shard_job_testing.h"

namespace ps {
namespace {

constexpr float kLearningRate = 0.5f;

class ShardJobDelayedTest : public ::testing::TestWithParam<int> {
 protected:
  // The job of the checkpoint tests (two variables on several slices), DELAYED by GetParam(),
  // plain SGD at a constant rate.
  void SetUp() override {
    ParameterSpec spec = CheckpointTestSpec(ConsistencyConfig::DELAYED, OptimizerConfig::SGD);
    spec.mutable_consistency()->set_delay(GetParam());
    spec.clear_learning_rate();
    spec.mutable_learning_rate()->set_base(kLearningRate);
    absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, 1, 0);
    ASSERT_TRUE(job.ok()) << job.status();
    job_ = *std::move(job);
    ASSERT_GT(job_->SliceRefs().size(), 1u);  // The history is per slice.
  }

  // A pull of every slice: its values and the version it says they are.
  std::vector<float> Pull(int64_t* version) {
    PullRequest pull;
    pull.set_job_id(job_->spec().job_id());
    pull.set_run_id(job_->spec().run_id());
    std::vector<float> values;
    job_->Pull(pull, [&](absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
      ASSERT_TRUE(snapshot.ok()) << snapshot.status();
      *version = snapshot->header.version();
      for (absl::Span<const float> piece : snapshot->pieces) {
        values.insert(values.end(), piece.begin(), piece.end());
      }
    });
    return values;
  }

  std::unique_ptr<ShardJob> job_;
};

TEST_P(ShardJobDelayedTest, ServesTheValuesExactlyDelayUpdatesOld) {
  const int delay = GetParam();
  int64_t version = -1;
  std::vector<std::vector<float>> history = {Pull(&version)};  // x_0, x_1, ...: the updates.
  ASSERT_EQ(version, 0);
  for (int64_t t = 0; t < 8; ++t) {
    const std::vector<float> served = Pull(&version);
    // x_{t - delay}, the initial values while fewer updates were applied.
    const int64_t expected = std::max<int64_t>(0, t - delay);
    EXPECT_EQ(version, expected) << "t=" << t;
    EXPECT_EQ(served, history[expected]) << "t=" << t;
    // A gradient of (t + 1) in every element (exact in float), computed from what was served.
    std::vector<float> gradient(served.size(), static_cast<float>(t + 1));
    PushRequestHeader header = StepPushHeader(*job_, 0, t);
    header.set_read_version(version);
    absl::StatusOr<PushResponse> pushed = job_->Push(header, gradient);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    EXPECT_EQ(pushed->outcome(), PushResponse::APPLIED);
    EXPECT_EQ(pushed->staleness(), t - expected);  // min(t, delay): the delay, once it can be.
    std::vector<float> next = history.back();
    for (float& x : next) x -= kLearningRate * static_cast<float>(t + 1);
    history.push_back(next);
  }
  // A pull now is served the values after update 8 - delay.
  EXPECT_EQ(AllValues(job_.get()), delay == 0 ? history.back() : history[8 - delay]);
  const JobStats stats = job_->Stats();
  EXPECT_EQ(stats.version(), 8);
  EXPECT_EQ(stats.staleness().max(), std::min(delay, 7));
}

INSTANTIATE_TEST_SUITE_P(Delays, ShardJobDelayedTest, ::testing::Values(0, 1, 3),
                         [](const auto& info) { return "delay" + std::to_string(info.param); });

}  // namespace
}  // namespace ps
