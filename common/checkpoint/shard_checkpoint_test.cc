#include "common/checkpoint/shard_checkpoint.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(ShardCheckpointTest, TheStateIsTheFirstBlockAndAnythingElseIsDataLoss) {
  ShardCheckpointState state;
  state.set_version(7);
  state.set_ps_index(1);
  absl::StatusOr<ShardCheckpointState> read =
      ReadShardCheckpointState({CheckpointBlock(kStateBlock, state.SerializeAsString()),
                                CheckpointBlock(kValuesBlock, "")});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->version(), 7);
  EXPECT_EQ(read->ps_index(), 1);
  EXPECT_EQ(ReadShardCheckpointState({}).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadShardCheckpointState({CheckpointBlock(kValuesBlock, state.SerializeAsString())})
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadShardCheckpointState({CheckpointBlock(kStateBlock, "\xff\xff not a proto")})
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ps
