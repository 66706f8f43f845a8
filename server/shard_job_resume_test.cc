// Checkpoints taken at an agreed point (ArmCheckpoint) and runs resumed from them
// (ShardJob::Resume): a resumed run given the same pushes ends bit for bit where the run that
// went on did, in every mode and with every optimizer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_file.h"
#include "server/shard_job.h"
#include "server/shard_job_testing.h"

namespace ps {
namespace {

constexpr int kWorkers = kCheckpointTestWorkers;

// Push `n` of a fixed sequence: workers in turn, each push numbered, tagged with its step and
// clock, read at the version before it, with random gradients of `n`. `first`: the push the run
// began at (a resumed run's push ids start again at 1).
absl::Status PushNumber(ShardJob* job, int n, int first = 0) {
  PushRequestHeader header;
  header.set_job_id(job->spec().job_id());
  header.set_run_id(job->spec().run_id());
  header.set_worker(n % kWorkers);
  header.set_push_id((n - first) / kWorkers + 1);
  header.set_step(n / kWorkers);
  header.set_clock(n / kWorkers);
  header.set_read_version(job->Stats().version());
  for (const SliceRef& ref : job->SliceRefs()) *header.add_slices() = ref;
  std::vector<absl::Span<float>> destinations;
  absl::StatusOr<std::shared_ptr<std::vector<float>>> buffer =
      job->PushBuffer(header, &destinations);
  if (!buffer.ok()) return buffer.status();
  std::mt19937 random(n);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (absl::Span<float> destination : destinations) {
    for (float& g : destination) g = uniform(random);
  }
  return job->Push(header, **buffer).status();
}

// Where each mode's clock is once pushes 0-7 are in: SYNC 2 steps, SSP every clock at 2,
// ASYNC 8 updates, SOFTSYNC 4 aggregates of 2.
int64_t ClockAfterEightPushes(ConsistencyConfig::Mode mode) {
  switch (mode) {
    case ConsistencyConfig::ASYNC:
      return 8;
    case ConsistencyConfig::SOFTSYNC:
      return 4;
    default:
      return 2;
  }
}

class ShardJobResumeTest : public ::testing::TestWithParam<ModeAndOptimizer> {};

TEST_P(ShardJobResumeTest, ARunResumedFromACheckpointEndsWhereTheRunThatWentOnDid) {
  const auto [mode, optimizer] = GetParam();
  absl::StatusOr<std::unique_ptr<ShardJob>> job =
      ShardJob::Create(CheckpointTestSpec(mode, optimizer), 1, 0);
  ASSERT_TRUE(job.ok()) << job.status();
  std::optional<ShardJob::TakenCheckpoint> taken;
  std::vector<float> at_checkpoint;
  ASSERT_TRUE((*job)
                  ->ArmCheckpoint("run-1", 1, ClockAfterEightPushes(mode),
                                  [&](ShardJob::TakenCheckpoint checkpoint) {
                                    taken = std::move(checkpoint);
                                    at_checkpoint = AllValues(job->get());
                                  })
                  .ok());
  for (int n = 0; n < 16; ++n) {
    ASSERT_TRUE(PushNumber(job->get(), n).ok()) << n;
    ASSERT_EQ(taken.has_value(), n >= 7) << n;  // Taken right after the eighth push.
  }
  EXPECT_EQ(taken->entry.seq(), 1);
  EXPECT_EQ(taken->entry.clock(), ClockAfterEightPushes(mode));
  EXPECT_EQ(taken->entry.min_steps_pushed(), 2);

  // Through a file, as a resume reads it.
  absl::StatusOr<std::vector<CheckpointBlock>> blocks =
      DecodeCheckpointFile(EncodeCheckpointFile(taken->blocks), "test");
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  ParameterSpec spec = CheckpointTestSpec(mode, optimizer);
  spec.set_run_id("run-2");
  absl::StatusOr<std::unique_ptr<ShardJob>> resumed =
      ShardJob::Resume(*blocks, spec, 1, 0, {"c", /*step=*/2, {}});
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(AllValues(resumed->get()), at_checkpoint);
  for (int n = 8; n < 16; ++n) ASSERT_TRUE(PushNumber(resumed->get(), n, 8).ok()) << n;
  EXPECT_EQ(AllValues(resumed->get()), AllValues(job->get()));
  EXPECT_EQ((*resumed)->Stats().version(), (*job)->Stats().version());
  EXPECT_EQ((*resumed)->Stats().step(), (*job)->Stats().step());
}

INSTANTIATE_TEST_SUITE_P(EveryModeAndOptimizer, ShardJobResumeTest, EveryModeAndOptimizer(),
                         ModeAndOptimizerName);

std::vector<CheckpointBlock> TakeNow(ShardJob* job) {
  std::vector<CheckpointBlock> blocks;
  EXPECT_TRUE(job->ArmCheckpoint(job->spec().run_id(), 1, -1,
                                 [&blocks](ShardJob::TakenCheckpoint taken) {
                                   blocks = std::move(taken.blocks);
                                 })
                  .ok());
  return blocks;
}

TEST(ShardJobArmTest, AClockAlreadyPassedOrAnotherRunIsRefused) {
  absl::StatusOr<std::unique_ptr<ShardJob>> job =
      ShardJob::Create(CheckpointTestSpec(ConsistencyConfig::SYNC, OptimizerConfig::SGD), 1, 0);
  ASSERT_TRUE(job.ok());
  for (int n = 0; n < 8; ++n) ASSERT_TRUE(PushNumber(job->get(), n).ok());
  auto ignore = [](ShardJob::TakenCheckpoint) {};
  absl::Status passed = (*job)->ArmCheckpoint("run-1", 1, 1, ignore);
  EXPECT_EQ(passed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(passed.message().find("is at 2 already"), std::string::npos) << passed;
  EXPECT_EQ((*job)->ArmCheckpoint("run-0", 1, 5, ignore).code(),
            absl::StatusCode::kFailedPrecondition);
  // The state, each slice's values and the (empty) sum: SGD has no slots.
  EXPECT_EQ(TakeNow(job->get()).size(), 2 + (*job)->SliceRefs().size());
}

TEST(ShardJobResumeRefusalTest, AnotherJobIsRefusedAndAnotherNumberOfWorkersIsNot) {
  absl::StatusOr<std::unique_ptr<ShardJob>> job =
      ShardJob::Create(CheckpointTestSpec(ConsistencyConfig::SYNC, OptimizerConfig::ADAM), 1, 0);
  ASSERT_TRUE(job.ok());
  for (int n = 0; n < 8; ++n) ASSERT_TRUE(PushNumber(job->get(), n).ok());
  const std::vector<CheckpointBlock> blocks = TakeNow(job->get());

  ParameterSpec other = CheckpointTestSpec(ConsistencyConfig::SYNC, OptimizerConfig::MOMENTUM);
  absl::Status refused = ShardJob::Resume(blocks, other, 1, 0, {"c", 2, {}}).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("resume it as it was submitted"), std::string::npos);
  EXPECT_EQ(
      ShardJob::Resume(blocks, CheckpointTestSpec(ConsistencyConfig::SYNC, OptimizerConfig::ADAM),
                       2, 0, {"c", 2, {}})
          .status()
          .code(),
      absl::StatusCode::kFailedPrecondition);

  ParameterSpec two = CheckpointTestSpec(ConsistencyConfig::SYNC, OptimizerConfig::ADAM);
  two.set_num_workers(2);
  two.set_run_id("run-2");
  absl::StatusOr<std::unique_ptr<ShardJob>> resumed =
      ShardJob::Resume(blocks, two, 1, 0, {"c", 2, {}});
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  const JobStats stats = (*resumed)->Stats();
  EXPECT_EQ(stats.step(), 2);
  EXPECT_EQ(stats.version(), 2);
  EXPECT_EQ(stats.restored_from(), "c");
  EXPECT_EQ(stats.restored_version(), 2);
  EXPECT_EQ(stats.restored_step(), 2);
  ASSERT_EQ(stats.workers_size(), 2);
  EXPECT_EQ(stats.workers(1).last_push_id(), 0);
  EXPECT_EQ(AllValues(resumed->get()), AllValues(job->get()));
}

// A resumed run counts its workers' steps from the resume step: a checkpoint of it resumes there
// or later, never at the steps of this run alone.
TEST(ShardJobResumeRefusalTest, AResumedRunCountsStepsFromItsResumeStep) {
  absl::StatusOr<std::unique_ptr<ShardJob>> job =
      ShardJob::Create(CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::SGD), 1, 0);
  ASSERT_TRUE(job.ok());
  for (int n = 0; n < 8; ++n) ASSERT_TRUE(PushNumber(job->get(), n).ok());
  ParameterSpec spec = CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::SGD);
  spec.set_run_id("run-2");
  absl::StatusOr<std::unique_ptr<ShardJob>> resumed =
      ShardJob::Resume(TakeNow(job->get()), spec, 1, 0, {"c", /*step=*/2, {}});
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  std::optional<ShardJob::TakenCheckpoint> taken;
  auto keep = [&taken](ShardJob::TakenCheckpoint checkpoint) { taken = std::move(checkpoint); };
  ASSERT_TRUE((*resumed)->ArmCheckpoint("run-2", 1, -1, keep).ok());
  EXPECT_EQ(taken->entry.min_steps_pushed(), 2);
  for (int n = 8; n < 12; ++n) ASSERT_TRUE(PushNumber(resumed->get(), n, 8).ok());  // Step 2.
  ASSERT_TRUE((*resumed)->ArmCheckpoint("run-2", 2, -1, keep).ok());
  EXPECT_EQ(taken->entry.min_steps_pushed(), 3);
}

// ASYNC: each worker resumes at its own step, and the run's checkpoints count from there: a
// fast worker is not sent back to a slow one's step.
TEST(ShardJobResumeRefusalTest, EachWorkerResumesAtItsOwnStep) {
  absl::StatusOr<std::unique_ptr<ShardJob>> job =
      ShardJob::Create(CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::SGD), 1, 0);
  ASSERT_TRUE(job.ok());
  ParameterSpec spec = CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::SGD);
  spec.set_run_id("run-2");
  std::vector<int64_t> steps(kCheckpointTestWorkers);
  for (int w = 0; w < kCheckpointTestWorkers; ++w) steps[w] = 10 + 5 * w;
  absl::StatusOr<std::unique_ptr<ShardJob>> resumed =
      ShardJob::Resume(TakeNow(job->get()), spec, 1, 0, {"c", 10, steps});
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  std::optional<ShardJob::TakenCheckpoint> taken;
  auto keep = [&taken](ShardJob::TakenCheckpoint checkpoint) { taken = std::move(checkpoint); };
  ASSERT_TRUE((*resumed)->ArmCheckpoint("run-2", 1, -1, keep).ok());
  EXPECT_EQ(taken->entry.min_steps_pushed(), 10);
  EXPECT_THAT(taken->entry.steps_pushed(), ::testing::ElementsAreArray(steps));

  steps.pop_back();  // Not one step per worker.
  EXPECT_EQ(ShardJob::Resume(TakeNow(job->get()), spec, 1, 0, {"c", 10, steps}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
