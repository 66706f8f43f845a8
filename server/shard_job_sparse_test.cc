// Sparse tables on a shard (ParameterSpec.sparse_tables): rows pulled and pushed by key after
// the dense values, made on first touch, summed per key in a SYNC step, checked before anything
// changes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "common/checkpoint/checkpoint_file.h"
#include "common/job/partitioner.h"
#include "common/checkpoint/shard_checkpoint.h"
#include "server/shard_job.h"
#include "server/shard_job_testing.h"
#include "server/testing/sparse_job.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr float kLearningRate = 0.5f;
constexpr int kWidth = 2;

// server/testing/sparse_job.h's job: rows of kWidth, plain SGD at kLearningRate.
ParameterSpec SparseSpec(ConsistencyConfig::Mode mode, int num_workers) {
  SparseJob job;
  job.mode = mode;
  job.num_workers = num_workers;
  job.width = kWidth;
  job.learning_rate = kLearningRate;
  job.seed = 3;
  return SparseJobSpec(job);
}

std::unique_ptr<ShardJob> NewJob(const ParameterSpec& spec, int num_ps = 1, int ps_index = 0) {
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, num_ps, ps_index);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *std::move(job) : nullptr;
}

SparseRows Rows(const std::vector<uint64_t>& keys, const std::string& table = "emb") {
  SparseRows rows;
  rows.set_table(table);
  for (uint64_t key : keys) rows.add_keys(key);
  return rows;
}

// The rows of `keys` as a pull reads them (after the dense values), keyed.
std::map<uint64_t, std::vector<float>> PullRows(ShardJob& job, const std::vector<uint64_t>& keys,
                                                absl::Status* status = nullptr) {
  PullRequest pull;
  pull.set_job_id(job.spec().job_id());
  pull.set_run_id(job.spec().run_id());
  pull.set_incarnation(OBSERVER_INCARNATION);
  *pull.add_sparse() = Rows(keys);
  std::map<uint64_t, std::vector<float>> rows;
  job.Pull(pull, [&](absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
    if (status != nullptr) *status = snapshot.status();
    if (!snapshot.ok()) return;
    EXPECT_EQ(snapshot->header.sparse_size(), 1);
    const absl::Span<const float> sparse = snapshot->pieces.back();
    for (size_t k = 0; k < keys.size(); ++k) {
      rows[keys[k]] = std::vector<float>(sparse.begin() + k * kWidth,
                                         sparse.begin() + (k + 1) * kWidth);
    }
  });
  return rows;
}

// Worker `worker`'s push at `step`: the bias gradient, then a row per key.
absl::StatusOr<PushResponse> PushRows(ShardJob& job, int worker, int64_t step, float bias,
                                      const std::vector<uint64_t>& keys,
                                      const std::vector<float>& rows) {
  PushRequestHeader header = StepPushHeader(job, worker, step);
  *header.add_sparse() = Rows(keys);
  std::vector<float> gradient = {bias};
  gradient.insert(gradient.end(), rows.begin(), rows.end());
  return job.Push(header, gradient);
}

// Sparse SYNC with 2 workers equals one process's SGD on the union of their batches: each row's
// gradient summed over the workers that touched it, over the 2 gradients of the step.
TEST(ShardJobSparseTest, SyncAppliesTheMeanOverTheStepOfEveryRowsGradients) {
  std::unique_ptr<ShardJob> job = NewJob(SparseSpec(ConsistencyConfig::SYNC, 2));
  const std::map<uint64_t, std::vector<float>> initial = PullRows(*job, {1, 2, 3});
  ASSERT_TRUE(PushRows(*job, 0, 0, 1.0f, {1, 2}, {1, 2, 3, 4}).ok());
  EXPECT_EQ(PullRows(*job, {1, 2, 3}), initial);  // Nothing applied before the step closes.
  absl::StatusOr<PushResponse> last = PushRows(*job, 1, 0, 3.0f, {2, 3}, {10, 20, 30, 40});
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->outcome(), PushResponse::APPLIED);
  const std::map<uint64_t, std::vector<float>> rows = PullRows(*job, {1, 2, 3});
  auto expect = [&](uint64_t key, int j, float gradient_sum) {
    EXPECT_FLOAT_EQ(rows.at(key)[j], initial.at(key)[j] - kLearningRate * gradient_sum / 2)
        << "key " << key << ", column " << j;
  };
  expect(1, 0, 1);
  expect(1, 1, 2);
  expect(2, 0, 3 + 10);  // Both workers' rows of key 2.
  expect(2, 1, 4 + 20);
  expect(3, 0, 30);
  expect(3, 1, 40);
  EXPECT_EQ(job->Stats().sparse_rows().at("emb"), 3);
}

TEST(ShardJobSparseTest, AsyncAppliesEachPushsRowsAtOnce) {
  std::unique_ptr<ShardJob> job = NewJob(SparseSpec(ConsistencyConfig::ASYNC, 2));
  const std::vector<float> before = PullRows(*job, {7}).at(7);
  ASSERT_TRUE(PushRows(*job, 1, 0, 0.0f, {7}, {2, -2}).ok());
  const std::vector<float> after = PullRows(*job, {7}).at(7);
  EXPECT_FLOAT_EQ(after[0], before[0] - kLearningRate * 2);
  EXPECT_FLOAT_EQ(after[1], before[1] + kLearningRate * 2);
}

// An unknown key makes its row on a pull, with the initial value of (seed, table, key): another
// shard object (a restarted ps, another run) makes the same; keys go to SparseShardOf's shard.
TEST(ShardJobSparseTest, KeysLandOnTheirShardWithDeterministicRows) {
  const ParameterSpec spec = SparseSpec(ConsistencyConfig::ASYNC, 2);
  std::vector<std::unique_ptr<ShardJob>> shards;
  shards.push_back(NewJob(spec, 2, 0));
  shards.push_back(NewJob(spec, 2, 1));
  std::vector<uint64_t> keys_of[2];
  for (uint64_t key = 0; key < 100; ++key) keys_of[SparseShardOf(key, 2)].push_back(key);
  ASSERT_FALSE(keys_of[0].empty());
  ASSERT_FALSE(keys_of[1].empty());
  for (int ps = 0; ps < 2; ++ps) {
    const auto first = PullRows(*shards[ps], keys_of[ps]);
    // The same keys from another worker, in another order, and from a fresh shard object.
    std::vector<uint64_t> reversed(keys_of[ps].rbegin(), keys_of[ps].rend());
    EXPECT_EQ(PullRows(*shards[ps], reversed), first);
    EXPECT_EQ(PullRows(*NewJob(spec, 2, ps), reversed), first);
    for (const auto& [key, row] : first) {
      for (float value : row) EXPECT_LE(std::abs(value), 0.5f);
    }
    // A key the other shard holds is refused.
    absl::Status status;
    PullRows(*shards[ps], {keys_of[1 - ps][0]}, &status);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("SparseShardOf"));
  }
}

TEST(ShardJobSparseTest, ABadSparsePushChangesNothing) {
  std::unique_ptr<ShardJob> job = NewJob(SparseSpec(ConsistencyConfig::ASYNC, 2));
  const auto before = PullRows(*job, {1, 2});
  // A row of the wrong width: 3 floats for keys {1, 2} of width 2.
  PushRequestHeader header = StepPushHeader(*job, 0, 0);
  *header.add_sparse() = Rows({1, 2});
  absl::StatusOr<PushResponse> pushed = job->Push(header, std::vector<float>{0, 1, 2, 3});
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pushed.status().message(), HasSubstr("4 of sparse rows"));
  // A NaN in a row.
  pushed = PushRows(*job, 0, 0, 1.0f, {1, 2}, {1, std::nanf(""), 3, 4});
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pushed.status().message(), HasSubstr("NaN in sparse table \"emb\" at key 1"));
  // A key twice, and an unknown table.
  pushed = PushRows(*job, 0, 0, 1.0f, {2, 2}, {1, 2, 3, 4});
  EXPECT_THAT(pushed.status().message(), HasSubstr("key 2 of table \"emb\" appears twice"));
  header = StepPushHeader(*job, 0, 0);
  *header.add_sparse() = Rows({1}, "nope");
  pushed = job->Push(header, std::vector<float>{0, 1, 2});
  EXPECT_THAT(pushed.status().message(), HasSubstr("no sparse table \"nope\""));
  EXPECT_EQ(PullRows(*job, {1, 2}), before);
  const JobStats stats = job->Stats();
  EXPECT_EQ(stats.version(), 0);
  EXPECT_EQ(stats.rejected().at("non_finite"), 1);
  EXPECT_EQ(stats.rejected().at("sparse"), 2);  // The repeated key and the unknown table.
}

// A recorded ASYNC run with sparse rows replays them too (shard_job_replay.cc).
TEST(ShardJobSparseTest, AReplayAppliesTheRecordedSparseRows) {
  ParameterSpec spec = SparseSpec(ConsistencyConfig::ASYNC, 2);
  spec.set_record_apply_log(true);
  std::unique_ptr<ShardJob> recorded = NewJob(spec);
  ASSERT_TRUE(PushRows(*recorded, 0, 0, 1.0f, {4}, {1, 2}).ok());
  ASSERT_TRUE(PushRows(*recorded, 1, 0, 1.0f, {4, 9}, {3, 4, 5, 6}).ok());
  std::unique_ptr<ShardJob> replayed = NewJob(spec);
  replayed->StartReplay(recorded->GetApplyLog());
  absl::StatusOr<PushResponse> queued = PushRows(*replayed, 1, 0, 1.0f, {4, 9}, {3, 4, 5, 6});
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(queued->outcome(), PushResponse::QUEUED);  // Worker 0's goes first.
  ASSERT_TRUE(PushRows(*replayed, 0, 0, 1.0f, {4}, {1, 2}).ok());
  EXPECT_EQ(PullRows(*replayed, {4, 9}), PullRows(*recorded, {4, 9}));
}

// A checkpoint holds every row and a SYNC step's open rows: restored through the file format, the
// shard goes on as the original does.
TEST(ShardJobSparseTest, ACheckpointRestoresTheRowsAndTheOpenAggregate) {
  std::unique_ptr<ShardJob> job = NewJob(SparseSpec(ConsistencyConfig::SYNC, 2));
  ASSERT_TRUE(PushRows(*job, 0, 0, 1.0f, {4, 7}, {1, 2, 3, 4}).ok());
  ASSERT_TRUE(PushRows(*job, 1, 0, 1.0f, {4}, {5, 6}).ok());           // Step 0 applied.
  ASSERT_TRUE(PushRows(*job, 0, 1, 1.0f, {7, 9}, {1, 1, 2, 2}).ok());  // Step 1 open.
  const std::vector<uint64_t> keys = {4, 7, 9, 11};
  absl::StatusOr<std::vector<CheckpointBlock>> blocks =
      DecodeCheckpointFile(EncodeCheckpointFile(job->Checkpoint()), "checkpoint");
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  absl::StatusOr<std::unique_ptr<ShardJob>> restored = ShardJob::Restore(*blocks, 1, 0);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(PullRows(**restored, keys), PullRows(*job, keys));
  // Worker 1 closes step 1 on both: the restored open rows of keys 7 and 9 count.
  for (ShardJob* shard : {job.get(), restored->get()}) {
    ASSERT_TRUE(PushRows(*shard, 1, 1, 1.0f, {9}, {4, 4}).ok());
  }
  const std::map<uint64_t, std::vector<float>> after = PullRows(*job, keys);
  EXPECT_EQ(PullRows(**restored, keys), after);
  // Key 9: its initial row less lr * (2 + 4) / 2 per element, as the original had it.
  std::unique_ptr<ShardJob> fresh = NewJob(SparseSpec(ConsistencyConfig::SYNC, 2));
  const std::vector<float> initial = PullRows(*fresh, {9}).at(9);
  EXPECT_FLOAT_EQ(after.at(9)[0], initial[0] - kLearningRate * 3);

  // A block that is not whole rows is refused naming the table.
  std::vector<CheckpointBlock> damaged = job->Checkpoint();
  for (CheckpointBlock& block : damaged) {
    if (block.tag == kSparseRowsBlock) block = CheckpointBlock(kSparseRowsBlock, "short");
  }
  absl::StatusOr<std::unique_ptr<ShardJob>> refused = ShardJob::Restore(damaged, 1, 0);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(refused.status().message(), HasSubstr("rows of sparse table \"emb\""));
}

// A periodic checkpoint (armed, as the coordinator takes them) resumes a new run with the rows.
TEST(ShardJobSparseTest, ARunResumesFromAnArmedCheckpointWithItsRows) {
  const ParameterSpec spec = SparseSpec(ConsistencyConfig::SYNC, 2);
  std::unique_ptr<ShardJob> job = NewJob(spec);
  ASSERT_TRUE(PushRows(*job, 0, 0, 1.0f, {4, 7}, {1, 2, 3, 4}).ok());
  ASSERT_TRUE(PushRows(*job, 1, 0, 1.0f, {4}, {5, 6}).ok());
  std::vector<CheckpointBlock> blocks;
  ASSERT_TRUE(
      job->ArmCheckpoint(spec.run_id(), 1, -1,
                         [&](ShardJob::TakenCheckpoint taken) { blocks = std::move(taken.blocks); })
          .ok());
  ASSERT_FALSE(blocks.empty());
  ParameterSpec next = spec;
  next.set_run_id("run-2");
  ShardJob::ResumePoint at;
  at.step = 1;
  absl::StatusOr<std::unique_ptr<ShardJob>> resumed = ShardJob::Resume(blocks, next, 1, 0, at);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(PullRows(**resumed, {4, 7}), PullRows(*job, {4, 7}));
}

}  // namespace
}  // namespace ps
