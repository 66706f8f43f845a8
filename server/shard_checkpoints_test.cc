#include "server/shard_checkpoints.h"

#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

ArmedCheckpoint At(int64_t seq, int64_t clock, std::vector<int64_t>* taken) {
  return {seq, clock, [taken, seq](TakenCheckpoint) { taken->push_back(seq); }};
}

std::vector<int64_t> Seqs(const std::vector<ArmedCheckpoint>& due) {
  std::vector<int64_t> seqs;
  for (const ArmedCheckpoint& armed : due) seqs.push_back(armed.seq);
  return seqs;
}

TEST(ShardCheckpointsTest, TakesEachArmedCheckpointOnceItsClockIsReached) {
  ShardCheckpoints checkpoints;
  std::vector<int64_t> taken;
  EXPECT_FALSE(checkpoints.any_armed());
  checkpoints.Arm(At(1, 10, &taken));
  checkpoints.Arm(At(2, 20, &taken));
  checkpoints.Arm(At(3, 10, &taken));
  EXPECT_TRUE(checkpoints.any_armed());
  EXPECT_TRUE(checkpoints.TakeDue(9).empty());
  std::vector<ArmedCheckpoint> due = checkpoints.TakeDue(10);
  EXPECT_EQ(Seqs(due), (std::vector<int64_t>{1, 3}));  // In arming order.
  due[1].sink({});
  EXPECT_EQ(taken, (std::vector<int64_t>{3}));
  EXPECT_TRUE(checkpoints.TakeDue(15).empty());  // Taken out: never twice.
  EXPECT_TRUE(checkpoints.any_armed());
  EXPECT_EQ(Seqs(checkpoints.TakeDue(25)), (std::vector<int64_t>{2}));
  EXPECT_FALSE(checkpoints.any_armed());
}

TEST(ShardCheckpointsTest, RemembersTheLatestWritesAndCountsFailures) {
  ShardCheckpoints checkpoints;
  for (int seq = 1; seq <= 10; ++seq) {
    ShardCheckpoint entry;
    entry.set_seq(seq);
    if (seq % 4 == 0) entry.set_error("disk full");
    checkpoints.Written(entry);
  }
  checkpoints.Resumed("ckpt-7", /*version=*/70, /*step=*/7);
  JobStats stats;
  checkpoints.AddTo(&stats);
  ASSERT_EQ(stats.checkpoints_size(), static_cast<int>(ShardCheckpoints::kRemembered));
  EXPECT_EQ(stats.checkpoints(0).seq(), 3);
  EXPECT_EQ(stats.checkpoints(7).seq(), 10);
  EXPECT_EQ(stats.failed_checkpoints(), 2);  // Seqs 4 and 8.
  EXPECT_EQ(stats.restored_from(), "ckpt-7");
  EXPECT_EQ(stats.restored_version(), 70);
  EXPECT_EQ(stats.restored_step(), 7);
}

}  // namespace
}  // namespace ps
