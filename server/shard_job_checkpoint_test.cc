// A shard's checkpoint, restored, is the shard it was: the same statistics and values bit for
// bit, and the same updates from then on, for every optimizer and consistency mode, with a
// SYNC step or SOFTSYNC aggregate half gathered when it was taken.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint_file.h"
#include "server/shard_job.h"
#include "server/shard_job_testing.h"

namespace ps {
namespace {

constexpr int kWorkers = kCheckpointTestWorkers;

// Sends push `n` (0, 1, ...) of a fixed sequence: workers in turn, SYNC tagged with the step
// the pushes so far make, SSP with each worker's clock, random gradients of `seed` and `n`.
absl::Status PushNumber(ShardJob* job, int n, uint32_t seed) {
  const int worker = n % kWorkers;
  PushRequestHeader header;
  header.set_job_id(job->spec().job_id());
  header.set_run_id(job->spec().run_id());
  header.set_worker(worker);
  header.set_push_id(n / kWorkers + 1);
  header.set_step(n / kWorkers);
  header.set_clock(n / kWorkers);
  const JobStats stats = job->Stats();
  header.set_read_version(std::max<int64_t>(0, stats.version() - worker % 2));
  for (const SliceRef& ref : job->SliceRefs()) *header.add_slices() = ref;
  std::vector<absl::Span<float>> destinations;
  absl::StatusOr<std::shared_ptr<std::vector<float>>> buffer =
      job->PushBuffer(header, &destinations);
  if (!buffer.ok()) return buffer.status();
  std::mt19937 random(seed * 1000 + n);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (absl::Span<float> destination : destinations) {
    for (float& g : destination) g = uniform(random);
  }
  return job->Push(header, **buffer).status();
}

std::string StatsBytes(ShardJob* job) { return job->Stats().SerializeAsString(); }

class ShardJobCheckpointTest
    : public ::testing::TestWithParam<ModeAndOptimizer> {};

TEST_P(ShardJobCheckpointTest, ARestoredShardIsTheShardItWasAndGoesOnTheSame) {
  const auto [mode, optimizer] = GetParam();
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(CheckpointTestSpec(mode, optimizer), 1, 0);
  ASSERT_TRUE(job.ok()) << job.status();
  // 11 pushes: SYNC's third step has 3 of its 4 gradients, SOFTSYNC's sixth aggregate 1 of 2.
  for (int n = 0; n < 11; ++n) ASSERT_TRUE(PushNumber(job->get(), n, 1).ok()) << n;

  const std::string file = EncodeCheckpointFile((*job)->Checkpoint());
  absl::StatusOr<std::vector<CheckpointBlock>> blocks = DecodeCheckpointFile(file, "test");
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  absl::StatusOr<std::unique_ptr<ShardJob>> restored = ShardJob::Restore(*blocks, 1, 0);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(AllValues(restored->get()), AllValues(job->get()));
  EXPECT_EQ(StatsBytes(restored->get()), StatsBytes(job->get()));

  // Worker 3 leaves (which completes SYNC's open step), and the others go on.
  EXPECT_EQ((*restored)->Leave(3, "run-1"), (*job)->Leave(3, "run-1"));
  for (int n = 12; n < 20; ++n) {
    if (n % kWorkers == 3) continue;
    absl::Status original = PushNumber(job->get(), n, 1);
    absl::Status again = PushNumber(restored->get(), n, 1);
    EXPECT_EQ(again, original) << n;
  }
  EXPECT_EQ(AllValues(restored->get()), AllValues(job->get()));
  EXPECT_EQ(StatsBytes(restored->get()), StatsBytes(job->get()));
}

INSTANTIATE_TEST_SUITE_P(EveryModeAndOptimizer, ShardJobCheckpointTest,
                         EveryModeAndOptimizer(), ModeAndOptimizerName);

// Checkpoints taken while two workers push (ASYNC) fall between updates: the values are exactly
// `version` updates from the start and the statistics say as many, never an update half on.
TEST(ShardJobCheckpointConcurrencyTest, ACheckpointTakenWhilePushesApplyFallsBetweenUpdates) {
  ParameterSpec spec = CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::SGD);
  spec.mutable_learning_rate()->Clear();
  spec.mutable_learning_rate()->set_base(0.5f);
  spec.mutable_consistency()->set_staleness_learning_rate(ConsistencyConfig::NONE);
  for (VariableDef& variable : *spec.mutable_variables()) {
    variable.mutable_initializer()->set_kind(InitializerConfig::CONSTANT);
    variable.mutable_initializer()->set_scale(1.0f);
  }
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, 1, 0);
  ASSERT_TRUE(job.ok()) << job.status();
  constexpr int kPushesPerWorker = 60;  // 1 - 120 * 0.5 / 64 stays exact in float.
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&job, &spec, w] {
      for (int n = 1; n <= kPushesPerWorker; ++n) {
        PushRequestHeader header;
        header.set_job_id(spec.job_id());
        header.set_run_id(spec.run_id());
        header.set_worker(w);
        header.set_push_id(n);
        for (const SliceRef& ref : (*job)->SliceRefs()) *header.add_slices() = ref;
        std::vector<absl::Span<float>> destinations;
        absl::StatusOr<std::shared_ptr<std::vector<float>>> buffer =
            (*job)->PushBuffer(header, &destinations);
        ASSERT_TRUE(buffer.ok()) << buffer.status();
        for (absl::Span<float> destination : destinations) {
          for (float& g : destination) g = 1.0f / 64;
        }
        ASSERT_TRUE((*job)->Push(header, **buffer).ok());
        absl::SleepFor(absl::Microseconds(200));  // The checkpoints fall among the pushes.
      }
    });
  }
  int checkpoints = 0;
  int64_t last_version = -1;
  while (last_version < 2 * kPushesPerWorker) {
    absl::StatusOr<std::unique_ptr<ShardJob>> restored =
        ShardJob::Restore((*job)->Checkpoint(), 1, 0);
    ASSERT_TRUE(restored.ok()) << restored.status();
    const JobStats stats = (*restored)->Stats();
    ASSERT_EQ(stats.applied_gradients(), stats.version());
    const float expected = 1.0f - static_cast<float>(stats.version()) * 0.5f / 64;
    for (float value : AllValues(restored->get())) ASSERT_EQ(value, expected) << stats.version();
    last_version = stats.version();
    ++checkpoints;
  }
  for (std::thread& worker : workers) worker.join();
  EXPECT_GT(checkpoints, 1);
}

TEST(ShardJobCheckpointRefusalTest, ACheckpointOfAnotherTaskOrAPartOfOneIsRefused) {
  absl::StatusOr<std::unique_ptr<ShardJob>> job =
      ShardJob::Create(CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::ADAM), 2, 1);
  ASSERT_TRUE(job.ok()) << job.status();
  std::vector<CheckpointBlock> blocks = (*job)->Checkpoint();
  EXPECT_EQ(ShardJob::Restore(blocks, 2, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ShardJob::Restore(blocks, 3, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(ShardJob::Restore(blocks, 2, 1).ok());
  std::vector<CheckpointBlock> missing_slots(blocks.begin(), blocks.end() - 2);
  missing_slots.push_back(blocks.back());
  EXPECT_EQ(ShardJob::Restore(missing_slots, 2, 1).status().code(), absl::StatusCode::kDataLoss);
  std::vector<CheckpointBlock> short_values = blocks;
  short_values[1].payload.resize(short_values[1].payload.size() - 4);
  EXPECT_EQ(ShardJob::Restore(short_values, 2, 1).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ShardJob::Restore({}, 2, 1).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ps
