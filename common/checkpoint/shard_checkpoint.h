// What a ps shard's checkpoint file holds (the ps writes it, psctl export reads it): blocks of
// a checkpoint file (common/checkpoint/checkpoint_file.h), in order:
//   kStateBlock    ShardCheckpointState (proto/checkpoint.proto), serialized: the spec, the
//                  task, version, schedule position, the rule's state, push ids, statistics,
//                  and each slice's update count;
//   kValuesBlock   one per slice of the shard, in placement order (common/job/partitioner.h): its
//                  values, float32 little-endian, rows in order;
//   kSlotsBlock    one per optimizer slot of each slice, slice by slice (momentum;
//                  AdaGrad's accumulator; Adam's first then second moment), float32; none
//                  under SGD;
//   kSparseRowsBlock  one per sparse table of the job, in the order of their names: every row
//                  the shard holds (server/sparse_table.h, SaveRows: key, update count, values
//                  and slots, in key order); none for a job without tables;
//   kSparseSumBlock   one per sparse table, in the same order: the open aggregate's rows (SYNC,
//                  SOFTSYNC; key then width floats, in key order), empty when none is open;
//   kSumBlock      the open aggregate's sum (SYNC, SOFTSYNC), empty when none is open.
#ifndef PS_COMMON_CHECKPOINT_SHARD_CHECKPOINT_H_
#define PS_COMMON_CHECKPOINT_SHARD_CHECKPOINT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint_file.h"
#include "proto/checkpoint.pb.h"

namespace ps {

enum ShardCheckpointBlock : uint32_t {
  kStateBlock = 1,
  kValuesBlock = 2,
  kSlotsBlock = 3,
  kSumBlock = 4,
  kSparseRowsBlock = 5,
  kSparseSumBlock = 6,
};

// Where each block lies in a shard's checkpoint of `slices` slices, `slots` optimizer slots a
// slice and `tables` sparse tables (the order above): the one reckoning of it for every reader.
struct ShardBlockLayout {
  size_t slices = 0;
  size_t slots = 0;
  size_t tables = 0;

  size_t values(size_t slice) const { return 1 + slice; }
  size_t slot(size_t slice, size_t s) const { return 1 + slices + slice * slots + s; }
  size_t rows(size_t table) const { return 1 + slices * (1 + slots) + table; }
  size_t size() const { return 2 + slices * (1 + slots) + 2 * tables; }
};

// The state at the head of a shard checkpoint's blocks; DATA_LOSS when there is none.
absl::StatusOr<ShardCheckpointState> ReadShardCheckpointState(
    const std::vector<CheckpointBlock>& blocks);

}  // namespace ps

#endif  // PS_COMMON_CHECKPOINT_SHARD_CHECKPOINT_H_
