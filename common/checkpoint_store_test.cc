#include "common/checkpoint_store.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

class CheckpointStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    job_dir_ = *store_.JobDirectory(root_, "job");
  }

  // Writes both shards of checkpoint `seq` of run "r", and its manifest when `commit`.
  CheckpointManifest Write(int64_t seq, bool commit, int keep = 2) {
    CheckpointManifest manifest;
    manifest.set_job_id("job");
    manifest.set_run_id("r");
    manifest.set_seq(seq);
    manifest.set_name(CheckpointStore::CheckpointName("r", seq));
    manifest.set_num_ps(2);
    manifest.set_written_at_ms(1000 + seq);
    for (int ps = 0; ps < 2; ++ps) {
      ShardCheckpoint* entry = manifest.add_shards();
      EXPECT_TRUE(store_
                      .WriteShard(job_dir_, manifest.name(), ps, 2,
                                  {CheckpointBlock(1, absl::StrCat("shard ", ps, " at ", seq))},
                                  entry)
                      .ok());
    }
    if (commit) {
      EXPECT_TRUE(store_.Commit(job_dir_, manifest, keep).ok());
    }
    return manifest;
  }

  std::vector<int64_t> Listed() {
    absl::StatusOr<ListCheckpointsResponse> listed = store_.List(job_dir_);
    EXPECT_TRUE(listed.ok()) << listed.status();
    std::vector<int64_t> seqs;
    for (const CheckpointManifest& manifest : listed->manifests()) seqs.push_back(manifest.seq());
    return seqs;
  }

  CheckpointStore store_{FileSystem::Default(), ""};
  std::string root_, job_dir_;
};

TEST_F(CheckpointStoreTest, ACommittedCheckpointIsListedAndItsShardsReadBack) {
  CheckpointManifest manifest = Write(1, true);
  EXPECT_EQ(manifest.shards(1).file(), "r-000001/shard-1-of-2.ckpt");
  EXPECT_EQ(Listed(), std::vector<int64_t>{1});
  absl::StatusOr<std::vector<CheckpointBlock>> blocks = store_.ReadShard(job_dir_, manifest, 1);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ((*blocks)[0].payload, "shard 1 at 1");
}

TEST_F(CheckpointStoreTest, WithoutItsManifestACheckpointIsNotListed) {
  Write(1, false);
  EXPECT_TRUE(Listed().empty());
}

TEST_F(CheckpointStoreTest, CommittingKeepsTheNewestCompleteOnesAndDropsOlderIncompleteOnes) {
  Write(1, true);
  Write(2, false);  // Abandoned (a shard failed to write): never completed.
  Write(3, true);
  Write(5, false);  // Being written while 4 commits: stays.
  Write(4, true);
  EXPECT_EQ(Listed(), (std::vector<int64_t>{3, 4}));
  EXPECT_FALSE(std::filesystem::exists(job_dir_ + "/r-000001"));
  EXPECT_FALSE(std::filesystem::exists(job_dir_ + "/r-000002"));
  EXPECT_TRUE(std::filesystem::exists(job_dir_ + "/r-000005/shard-0-of-2.ckpt"));
}

TEST_F(CheckpointStoreTest, AShardFileThatIsNotTheManifestsIsDataLossAndAMissingOneNotFound) {
  CheckpointManifest manifest = Write(1, true);
  const std::string file = job_dir_ + "/" + manifest.shards(0).file();
  {
    std::fstream out(file, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(20);
    out.put('\x7f');
  }
  absl::Status status = store_.ReadShard(job_dir_, manifest, 0).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("not the file its manifest names"));
  std::filesystem::remove(file);
  EXPECT_EQ(store_.ReadShard(job_dir_, manifest, 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_.ReadShard(job_dir_, manifest, 2).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointStoreTest, ADamagedManifestIsAProblemNotACheckpoint) {
  Write(1, true);
  Write(2, true);
  std::ofstream(job_dir_ + "/r-000002/MANIFEST", std::ios::app) << "trailing";
  absl::StatusOr<ListCheckpointsResponse> listed = store_.List(job_dir_);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->manifests_size(), 1);
  EXPECT_EQ(listed->manifests(0).seq(), 1);
  ASSERT_EQ(listed->problems_size(), 1);
  EXPECT_THAT(listed->problems(0), HasSubstr("r-000002/MANIFEST"));
}

TEST_F(CheckpointStoreTest, WithoutADirectoryItSaysHowToGiveOne) {
  absl::Status status = store_.JobDirectory("", "job").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("--checkpoint_dir"));
  EXPECT_EQ(*CheckpointStore(FileSystem::Default(), "/d").JobDirectory("", "j"), "/d/j");
  EXPECT_TRUE(store_.List(root_ + "/none").ok());
}

}  // namespace
}  // namespace ps
