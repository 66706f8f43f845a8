#include "common/checkpoint/shard_checkpoint.h"

#include <string>

namespace ps {

absl::StatusOr<ShardCheckpointState> ReadShardCheckpointState(
    const std::vector<CheckpointBlock>& blocks) {
  ShardCheckpointState state;
  if (blocks.empty() || blocks[0].tag != kStateBlock ||
      !state.ParseFromString(std::string(blocks[0].bytes()))) {
    return absl::DataLossError("the checkpoint does not begin with a shard's state");
  }
  return state;
}

}  // namespace ps
