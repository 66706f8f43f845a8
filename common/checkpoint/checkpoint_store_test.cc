#include "common/checkpoint/checkpoint_store.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

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
    store_ = std::make_unique<CheckpointStore>(FileSystem::Default(), root_);
    job_dir_ = *store_->JobDirectory("job");
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
                      ->WriteShard(job_dir_, manifest.name(), ps, 2,
                                   {CheckpointBlock(1, absl::StrCat("shard ", ps, " at ", seq))},
                                   entry)
                      .ok());
    }
    if (commit) {
      EXPECT_TRUE(store_->Commit(job_dir_, manifest, keep).ok());
    }
    return manifest;
  }

  std::vector<int64_t> Listed() {
    absl::StatusOr<ListCheckpointsResponse> listed = store_->List(job_dir_);
    EXPECT_TRUE(listed.ok()) << listed.status();
    std::vector<int64_t> seqs;
    for (const CheckpointManifest& manifest : listed->manifests()) seqs.push_back(manifest.seq());
    return seqs;
  }

  std::unique_ptr<CheckpointStore> store_;
  std::string root_, job_dir_;
};

TEST_F(CheckpointStoreTest, ACommittedCheckpointIsListedAndItsShardsReadBack) {
  CheckpointManifest manifest = Write(1, true);
  EXPECT_EQ(manifest.shards(1).file(), "r-000001/shard-1-of-2.ckpt");
  EXPECT_EQ(Listed(), std::vector<int64_t>{1});
  absl::StatusOr<std::vector<CheckpointBlock>> blocks = store_->ReadShard(job_dir_, manifest, 1);
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
  absl::Status status = store_->ReadShard(job_dir_, manifest, 0).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("not the file its manifest names"));
  std::filesystem::remove(file);
  EXPECT_EQ(store_->ReadShard(job_dir_, manifest, 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ReadShard(job_dir_, manifest, 2).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointStoreTest, ADamagedManifestIsAProblemNotACheckpoint) {
  Write(1, true);
  Write(2, true);
  std::ofstream(job_dir_ + "/r-000002/MANIFEST", std::ios::app) << "trailing";
  absl::StatusOr<ListCheckpointsResponse> listed = store_->List(job_dir_);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->manifests_size(), 1);
  EXPECT_EQ(listed->manifests(0).seq(), 1);
  ASSERT_EQ(listed->problems_size(), 1);
  EXPECT_THAT(listed->problems(0), HasSubstr("r-000002/MANIFEST"));
}

TEST_F(CheckpointStoreTest, WithoutADirectoryItSaysHowToGiveOne) {
  absl::Status status = CheckpointStore(FileSystem::Default(), "").JobDirectory("job").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("--checkpoint_dir"));
  EXPECT_EQ(*CheckpointStore(FileSystem::Default(), "/d").JobDirectory("j"), "/d/j");
  EXPECT_TRUE(store_->List(root_ + "/none").ok());
}

TEST_F(CheckpointStoreTest, AJobIdThatIsNotANameIsRefused) {
  for (const char* id : {"..", "../x", "a/b", "/abs", ".hidden", "", "~"}) {
    absl::Status status = store_->JobDirectory(id).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << id;
  }
}

// A manifest names itself: a name that is not CheckpointName(run_id, seq) (a path, "~", another
// run's) is refused before anything is written or deleted.
TEST_F(CheckpointStoreTest, AManifestWithAnotherNameIsRefusedAndNothingIsPruned) {
  Write(1, true);
  Write(2, true);
  std::filesystem::create_directories(root_ + "/elsewhere");
  for (const char* name : {"~", "../../x", "../elsewhere", "r-000009", "s-000003", ""}) {
    CheckpointManifest manifest = Write(3, false);
    manifest.set_name(name);
    absl::Status status = store_->Commit(job_dir_, manifest, 1);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name << ": " << status;
  }
  CheckpointManifest bad_run = Write(3, false);
  bad_run.set_run_id("../r");
  bad_run.set_name("../r-000003");
  EXPECT_EQ(store_->Commit(job_dir_, bad_run, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Listed(), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(std::filesystem::exists(root_ + "/elsewhere"));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/x"));
  EXPECT_FALSE(std::filesystem::exists(job_dir_ + "/~"));
}

// A manifest can only name the files this store writes: one that names another path (from
// a caller, or edited on disk) is DATA_LOSS and nothing outside the checkpoint is read.
TEST_F(CheckpointStoreTest, AShardFileNameOutsideTheCheckpointIsDataLoss) {
  CheckpointManifest manifest = Write(1, true);
  std::ofstream(root_ + "/secret") << "not a checkpoint";
  for (const char* file : {"../secret", "r-000001/../../secret", "/etc/passwd",
                           "r-000001/shard-1-of-2.ckpt"}) {
    CheckpointManifest edited = manifest;
    edited.mutable_shards(0)->set_file(file);
    absl::Status status = store_->ReadShard(job_dir_, edited, 0).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << file;
    EXPECT_THAT(status.message(), HasSubstr("not written by a ps")) << file;
  }
}

TEST_F(CheckpointStoreTest, AManifestIsReadByItsNameOnly) {
  Write(1, true);
  absl::StatusOr<CheckpointManifest> found = store_->Manifest(job_dir_, "r-000001");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->seq(), 1);
  EXPECT_EQ(store_->Manifest(job_dir_, "r-000002").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Manifest(job_dir_, "../job/r-000001").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
