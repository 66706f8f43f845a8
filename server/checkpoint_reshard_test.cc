// ReshardCheckpoint: a checkpoint taken on 2 ps resumed on 1 and on 3 (and one taken on 3 on 2)
// ends, given the same pushes, bit for bit where the run that went on did, in every mode and with
// every optimizer; a sparse table's rows and their optimizer state move to the shards that now
// own their keys; a file that is not its shard's is refused naming it.
#include "server/checkpoint_reshard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_file.h"
#include "common/checkpoint/shard_checkpoint.h"
#include "common/job/partitioner.h"
#include "server/shard_job.h"
#include "server/shard_job_testing.h"
#include "server/testing/sparse_job.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr int kWorkers = kCheckpointTestWorkers;
using Shards = std::vector<std::unique_ptr<ShardJob>>;

Shards NewShards(const ParameterSpec& spec, int num_ps) {
  Shards shards;
  for (int i = 0; i < num_ps; ++i) {
    absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, num_ps, i);
    EXPECT_TRUE(job.ok()) << job.status();
    shards.push_back(*std::move(job));
  }
  return shards;
}

// Push `n` of a fixed sequence to every shard (workers in turn, as shard_job_resume_test's
// PushNumber): element e of variable v at push n has the gradient sin(n + 7 v + 0.37 e), the
// same whatever the layout. `first`: the push the run began at.
void PushEverywhere(const Shards& shards, int n, int first = 0) {
  for (const std::unique_ptr<ShardJob>& job : shards) {
    PushRequestHeader header = StepPushHeader(*job, n % kWorkers, n / kWorkers);
    header.set_push_id((n - first) / kWorkers + 1);
    header.set_read_version(job->Stats().version());
    std::vector<float> gradient;
    for (const SliceRef& slice : job->SliceRefs()) {
      int v = 0;
      while (job->spec().variables(v).name() != slice.variable()) ++v;
      const VariableDef& variable = job->spec().variables(v);
      const int64_t row_size = variable.shape_size() > 1 ? variable.shape(1) : 1;
      for (int64_t e = slice.row_begin() * row_size;
           e < (slice.row_begin() + slice.row_count()) * row_size; ++e) {
        gradient.push_back(std::sin(static_cast<float>(n + 7 * v) + 0.37f * e));
      }
    }
    ASSERT_TRUE(job->Push(header, gradient).ok()) << n;
  }
}

// Every variable's values, by name, assembled from the shards' slices.
std::map<std::string, std::vector<float>> Variables(const Shards& shards) {
  std::map<std::string, std::map<int64_t, std::vector<float>>> pieces;
  for (const std::unique_ptr<ShardJob>& job : shards) {
    const std::vector<float> values = AllValues(job.get());
    size_t at = 0;
    for (const SliceRef& slice : job->SliceRefs()) {
      int v = 0;
      while (job->spec().variables(v).name() != slice.variable()) ++v;
      const VariableDef& variable = job->spec().variables(v);
      const size_t n = static_cast<size_t>(
          slice.row_count() * (variable.shape_size() > 1 ? variable.shape(1) : 1));
      pieces[slice.variable()][slice.row_begin()].assign(values.begin() + at,
                                                         values.begin() + at + n);
      at += n;
    }
  }
  std::map<std::string, std::vector<float>> variables;
  for (const auto& [name, rows] : pieces) {
    for (const auto& [begin, values] : rows) {
      variables[name].insert(variables[name].end(), values.begin(), values.end());
    }
  }
  return variables;
}

// The manifest of a checkpoint of `spec` taken on `num_ps` ps.
CheckpointManifest Manifest(const ParameterSpec& spec, int num_ps) {
  CheckpointManifest manifest;
  manifest.set_job_id(spec.job_id());
  manifest.set_run_id(spec.run_id());
  manifest.set_seq(1);
  manifest.set_name(absl::StrCat(spec.run_id(), "-000001"));
  manifest.set_num_ps(num_ps);
  *manifest.mutable_parameters() = spec;
  return manifest;
}

// Each old shard's checkpoint, through its file's bytes.
ShardBlocksReader Files(const std::vector<std::vector<CheckpointBlock>>& taken) {
  return [&taken](int index) -> absl::StatusOr<std::vector<CheckpointBlock>> {
    if (index >= static_cast<int>(taken.size())) return absl::NotFoundError("no such file");
    return DecodeCheckpointFile(EncodeCheckpointFile(taken[index]), "test");
  };
}

// The shards of `num_ps` resumed from the checkpoint `taken` on `manifest.num_ps()`, as run-2,
// every worker at `step`.
Shards Resumed(const CheckpointManifest& manifest,
               const std::vector<std::vector<CheckpointBlock>>& taken, int num_ps,
               int64_t step) {
  ParameterSpec spec = manifest.parameters();
  spec.set_run_id("run-2");
  Shards shards;
  for (int i = 0; i < num_ps; ++i) {
    absl::StatusOr<std::vector<CheckpointBlock>> blocks =
        ReshardCheckpoint(manifest, num_ps, i, Files(taken));
    EXPECT_TRUE(blocks.ok()) << blocks.status();
    if (!blocks.ok()) return {};
    absl::StatusOr<std::unique_ptr<ShardJob>> job =
        ShardJob::Resume(*blocks, spec, num_ps, i, {manifest.name(), step, {}});
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return {};
    shards.push_back(*std::move(job));
  }
  return shards;
}

struct Layouts {
  int from = 0;
  int to = 0;
};

class ReshardTest
    : public ::testing::TestWithParam<std::tuple<ConsistencyConfig::Mode, OptimizerConfig::Kind>> {
};

TEST_P(ReshardTest, ARunResumedOnAnotherNumberOfPsEndsWhereTheRunThatWentOnDid) {
  const auto [mode, optimizer] = GetParam();
  // Slices of 16 bytes: w (8x4) in up to `num_ps` slices of whole rows, b (4) likewise, so the
  // layouts cut the variables differently.
  const ParameterSpec spec = CheckpointTestSpec(mode, optimizer);
  for (Layouts layouts : {Layouts{2, 1}, Layouts{2, 3}, Layouts{3, 2}}) {
    SCOPED_TRACE(absl::StrCat(layouts.from, " ps to ", layouts.to));
    const Shards old = NewShards(spec, layouts.from);
    for (int n = 0; n < 8; ++n) PushEverywhere(old, n);
    std::vector<std::vector<CheckpointBlock>> taken;
    for (const std::unique_ptr<ShardJob>& job : old) {
      ASSERT_TRUE(job->ArmCheckpoint("run-1", 1, -1,
                                     [&taken](ShardJob::TakenCheckpoint checkpoint) {
                                       taken.push_back(std::move(checkpoint.blocks));
                                     })
                      .ok());
    }
    const std::map<std::string, std::vector<float>> at_checkpoint = Variables(old);
    const Shards resumed = Resumed(Manifest(spec, layouts.from), taken, layouts.to, /*step=*/2);
    ASSERT_EQ(resumed.size(), static_cast<size_t>(layouts.to));
    EXPECT_EQ(Variables(resumed), at_checkpoint);
    // New ps:i goes on from old ps:(i mod N)'s statistics.
    for (int i = 0; i < layouts.to; ++i) {
      EXPECT_EQ(resumed[i]->Stats().applied_gradients(),
                old[i % layouts.from]->Stats().applied_gradients());
    }
    for (int n = 8; n < 16; ++n) {
      PushEverywhere(old, n);
      PushEverywhere(resumed, n, 8);
    }
    EXPECT_EQ(Variables(resumed), Variables(old));
    EXPECT_EQ(resumed[0]->Stats().version(), old[0]->Stats().version());
  }
}

INSTANTIATE_TEST_SUITE_P(EveryModeAndOptimizer, ReshardTest, EveryModeAndOptimizer(),
                         ModeAndOptimizerName);

// Rows pulled by key from the shard that owns each, after the dense values.
std::map<uint64_t, std::vector<float>> Rows(const Shards& shards, int width,
                                            const std::vector<uint64_t>& keys) {
  std::map<uint64_t, std::vector<float>> rows;
  for (uint64_t key : keys) {
    ShardJob& job = *shards[SparseShardOf(key, static_cast<int>(shards.size()))];
    PullRequest pull;
    pull.set_job_id(job.spec().job_id());
    pull.set_run_id(job.spec().run_id());
    pull.set_incarnation(OBSERVER_INCARNATION);
    SparseRows* wanted = pull.add_sparse();
    wanted->set_table("emb");
    wanted->add_keys(key);
    job.Pull(pull, [&](absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
      ASSERT_TRUE(snapshot.ok()) << snapshot.status();
      const absl::Span<const float> row = snapshot->pieces.back();
      ASSERT_EQ(row.size(), static_cast<size_t>(width));
      rows[key].assign(row.begin(), row.end());
    });
  }
  return rows;
}

// In ASYNC each shard takes its checkpoint at its own version: a new slice made of rows whose
// old slices counted different updates takes the largest count (Adam's t).
TEST(ReshardTest, ASliceOfRowsWithDifferentUpdateCountsTakesTheLargest) {
  const ParameterSpec spec = CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::ADAM);
  const Shards old = NewShards(spec, 2);
  for (int n = 0; n < 8; ++n) PushEverywhere(old, n);
  // One more update on ps:0 alone.
  PushRequestHeader header = StepPushHeader(*old[0], 0, 2);
  header.set_push_id(3);
  header.set_read_version(old[0]->Stats().version());
  int64_t floats = 0;
  for (const SliceRef& slice : old[0]->SliceRefs()) {
    floats += slice.row_count() * (slice.variable() == "w" ? 4 : 1);
  }
  ASSERT_TRUE(old[0]->Push(header, std::vector<float>(floats, 0.5f)).ok());
  std::vector<std::vector<CheckpointBlock>> taken;
  for (const std::unique_ptr<ShardJob>& job : old) {
    ASSERT_TRUE(job->ArmCheckpoint("run-1", 1, -1, [&taken](ShardJob::TakenCheckpoint c) {
                     taken.push_back(std::move(c.blocks));
                   }).ok());
  }
  absl::StatusOr<std::vector<CheckpointBlock>> blocks =
      ReshardCheckpoint(Manifest(spec, 2), 1, 0, Files(taken));
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  absl::StatusOr<ShardCheckpointState> state = ReadShardCheckpointState(*blocks);
  ASSERT_TRUE(state.ok()) << state.status();
  // On 1 ps, w and b are a slice each: w made of rows from ps:0 (9 updates) and ps:1 (8), b
  // (one slice on 2 ps as well) from the one that held it.
  bool b_on_first = false;
  for (const SliceRef& slice : old[0]->SliceRefs()) b_on_first |= slice.variable() == "b";
  ASSERT_EQ(state->slice_update_counts_size(), 2);
  EXPECT_EQ(state->slice_update_counts(0), 9);
  EXPECT_EQ(state->slice_update_counts(1), b_on_first ? 9 : 8);
  EXPECT_EQ(state->version(), old[0]->Stats().version());
  EXPECT_GT(old[0]->Stats().version(), old[1]->Stats().version());
}

// A job whose data is handed out keeps its handout on the first shard of the new layout: the
// batches not used yet go out again there, none twice.
TEST(ReshardTest, TheDataHandoutGoesToTheNewFirstShard) {
  ParameterSpec spec = CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::SGD);
  spec.mutable_data_handout()->set_batches_per_epoch(10);
  spec.mutable_data_handout()->set_epochs(1);
  const Shards old = NewShards(spec, 2);
  NextBatchesRequest request;
  request.set_job_id(spec.job_id());
  request.set_run_id(spec.run_id());
  request.set_count(4);
  request.set_request_id(1);
  ASSERT_TRUE(old[0]->NextBatches(request).ok());  // Batches 0 to 3, held.
  std::vector<std::vector<CheckpointBlock>> taken;
  for (const std::unique_ptr<ShardJob>& job : old) {
    ASSERT_TRUE(job->ArmCheckpoint("run-1", 1, -1, [&taken](ShardJob::TakenCheckpoint c) {
                     taken.push_back(std::move(c.blocks));
                   }).ok());
  }
  request.set_run_id("run-2");  // Resumed's.
  for (const int num_ps : {1, 3}) {
    Shards resumed = Resumed(Manifest(spec, 2), taken, num_ps, 0);
    ASSERT_EQ(resumed.size(), static_cast<size_t>(num_ps));
    const DataHandoutStats handout = resumed[0]->Stats().handout();
    EXPECT_EQ(handout.batches_waiting(), 4) << num_ps;
    EXPECT_EQ(handout.batches_trained(), 0) << num_ps;
    absl::StatusOr<NextBatchesResponse> again = resumed[0]->NextBatches(request);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_THAT(again->batches(), ::testing::ElementsAre(0, 1, 2, 3));
  }
}

// A sparse table's rows under AdaGrad and Adam (whose rows count their updates): each moves,
// with its slots and count, to the shard that owns its key on the new number of ps, and goes on
// there as it would have.
class ReshardSparseTest : public ::testing::TestWithParam<OptimizerConfig::Kind> {};

TEST_P(ReshardSparseTest, RowsMoveToTheShardsThatNowOwnTheirKeys) {
  SparseJob sparse;
  sparse.width = 3;
  ParameterSpec spec = SparseJobSpec(sparse);
  spec.set_run_id("run-1");
  spec.mutable_optimizer()->set_kind(GetParam());
  std::vector<uint64_t> keys;
  for (uint64_t key = 1; key <= 40; ++key) keys.push_back(key * 0x9E3779B97F4A7C15ull);
  // Push `n`: to each shard, the keys it owns with rows sin(n + key % 97 + column).
  auto push = [&](const Shards& shards, int n, int first) {
    for (size_t i = 0; i < shards.size(); ++i) {
      ShardJob& job = *shards[i];
      PushRequestHeader header = StepPushHeader(job, 0, n);
      header.set_push_id(n - first + 1);
      header.set_read_version(job.Stats().version());
      SparseRows* rows = header.add_sparse();
      rows->set_table("emb");
      std::vector<float> gradient(static_cast<size_t>(job.SliceRefs().size()), 0.25f);
      for (uint64_t key : keys) {
        if (SparseShardOf(key, static_cast<int>(shards.size())) != static_cast<int>(i)) continue;
        if ((key + n) % 3 == 0) continue;  // Not every key every push.
        rows->add_keys(key);
        for (int c = 0; c < 3; ++c) gradient.push_back(std::sin(n + key % 97 + c));
      }
      ASSERT_TRUE(job.Push(header, gradient).ok()) << n;
    }
  };
  const Shards old = NewShards(spec, 2);
  for (int n = 0; n < 5; ++n) push(old, n, 0);
  std::vector<std::vector<CheckpointBlock>> taken;
  for (const std::unique_ptr<ShardJob>& job : old) {
    ASSERT_TRUE(job->ArmCheckpoint("run-1", 1, -1, [&taken](ShardJob::TakenCheckpoint c) {
                     taken.push_back(std::move(c.blocks));
                   }).ok());
  }
  const CheckpointManifest manifest = Manifest(spec, 2);
  for (int to : {1, 3}) {
    SCOPED_TRACE(absl::StrCat("2 ps to ", to));
    const Shards resumed = Resumed(manifest, taken, to, /*step=*/5);
    ASSERT_EQ(resumed.size(), static_cast<size_t>(to));
    EXPECT_EQ(Rows(resumed, 3, keys), Rows(old, 3, keys));
    // The accumulators came along: further updates agree too.
    const Shards again = NewShards(spec, 2);
    for (int n = 0; n < 5; ++n) push(again, n, 0);
    for (int n = 5; n < 9; ++n) {
      push(again, n, 0);
      push(resumed, n, 5);
    }
    EXPECT_EQ(Rows(resumed, 3, keys), Rows(again, 3, keys));
  }
}

INSTANTIATE_TEST_SUITE_P(AdaGradAndAdam, ReshardSparseTest,
                         ::testing::Values(OptimizerConfig::ADAGRAD, OptimizerConfig::ADAM));

// Damaged sparse blocks: a key on a shard that does not own it, a partial row.
TEST(ReshardRefusalTest, SparseRowsThatAreNotTheShardsAreRefused) {
  SparseJob sparse;
  ParameterSpec spec = SparseJobSpec(sparse);
  spec.set_run_id("run-1");
  const Shards old = NewShards(spec, 2);
  for (const std::unique_ptr<ShardJob>& job : old) {
    PushRequestHeader header = StepPushHeader(*job, 0, 0);
    SparseRows* rows = header.add_sparse();
    rows->set_table("emb");
    std::vector<float> gradient(job->SliceRefs().size(), 0.25f);
    for (uint64_t key = 1; key < 30; ++key) {
      if (SparseShardOf(key, 2) != job->ps_index()) continue;
      rows->add_keys(key);
      gradient.insert(gradient.end(), {0.5f, -0.5f});
    }
    ASSERT_TRUE(job->Push(header, gradient).ok());
  }
  std::vector<std::vector<CheckpointBlock>> taken;
  for (const std::unique_ptr<ShardJob>& job : old) {
    ASSERT_TRUE(job->ArmCheckpoint("run-1", 1, -1, [&taken](ShardJob::TakenCheckpoint c) {
                     taken.push_back(std::move(c.blocks));
                   }).ok());
  }
  // The rows block: after the state, the shard's slices' values (SGD: no slots).
  auto rows_block = [&](int shard) -> CheckpointBlock& {
    return taken[shard][1 + old[shard]->SliceRefs().size()];
  };
  const std::string shard1_rows(rows_block(1).bytes());
  const size_t record = 8 + 4 + 2 * 4;
  ASSERT_GE(shard1_rows.size(), record);

  std::vector<std::vector<CheckpointBlock>> wrong_key = taken;
  CheckpointBlock& block = wrong_key[0][1 + old[0]->SliceRefs().size()];
  block = CheckpointBlock(block.tag, std::string(block.bytes()) + shard1_rows.substr(0, record));
  absl::Status refused = ReshardCheckpoint(Manifest(spec, 2), 3, 0, Files(wrong_key)).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(refused.message(), HasSubstr("which ps:1 owns"));

  std::vector<std::vector<CheckpointBlock>> partial = taken;
  CheckpointBlock& cut = partial[1][1 + old[1]->SliceRefs().size()];
  cut = CheckpointBlock(cut.tag, shard1_rows.substr(0, shard1_rows.size() - 1));
  refused = ReshardCheckpoint(Manifest(spec, 2), 3, 0, Files(partial)).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(refused.message(), HasSubstr("shard 1 of 2"));
  EXPECT_THAT(refused.message(), HasSubstr("are not whole rows"));
}

TEST(ReshardRefusalTest, AFileThatIsNotItsShardsIsRefusedNamingIt) {
  const ParameterSpec spec = CheckpointTestSpec(ConsistencyConfig::SYNC, OptimizerConfig::ADAM);
  const Shards old = NewShards(spec, 2);
  std::vector<std::vector<CheckpointBlock>> taken;
  for (const std::unique_ptr<ShardJob>& job : old) {
    ASSERT_TRUE(job->ArmCheckpoint("run-1", 1, -1, [&taken](ShardJob::TakenCheckpoint c) {
                     taken.push_back(std::move(c.blocks));
                   }).ok());
  }
  // Shard 1's file where shard 0's should be.
  std::vector<std::vector<CheckpointBlock>> swapped = {taken[1], taken[0]};
  absl::StatusOr<std::vector<CheckpointBlock>> blocks =
      ReshardCheckpoint(Manifest(spec, 2), 3, 0, Files(swapped));
  EXPECT_EQ(blocks.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(blocks.status().message(), HasSubstr("shard 0 of 2: its file is ps:1's"));
  // A manifest of another job than its files'.
  ParameterSpec other = spec;
  other.set_seed(spec.seed() + 1);
  blocks = ReshardCheckpoint(Manifest(other, 2), 3, 0, Files(taken));
  EXPECT_EQ(blocks.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(blocks.status().message(), HasSubstr("another job"));
  // A missing file: the reader's error, as it is.
  std::vector<std::vector<CheckpointBlock>> one = {taken[0]};
  EXPECT_EQ(ReshardCheckpoint(Manifest(spec, 2), 3, 0, Files(one)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReshardCheckpoint(Manifest(spec, 2), 3, 3, Files(taken)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
