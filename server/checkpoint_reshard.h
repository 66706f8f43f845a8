// Resuming a checkpoint on another number of ps (docs/checkpoints.md, "Another number of ps"):
// the blocks a shard of the new layout resumes from, made from the files of the layout the
// checkpoint was taken on (common/checkpoint/shard_checkpoint.h lists the blocks).
//
//   - Dense variables are placed again by the partitioner (PlaceVariables for the new number of
//     ps): each new slice's rows, values and optimizer slots alike, are copied from the old
//     slices that held them. Its update count (Adam's bias correction) is the largest of theirs:
//     the slices of one shard count alike (every update goes to each), but in ASYNC and
//     SOFTSYNC the shards take a checkpoint each at its own version, so theirs may differ.
//   - Sparse rows, with their update counts and slots, go to the shard SparseShardOf names for
//     the new number of ps, in key order.
//   - The version and the learning-rate schedule's position are the largest of the old shards'
//     (the same on every shard in SYNC and SSP; in ASYNC and SOFTSYNC each shard's own, and the
//     resumed run goes on from the furthest). New shard i goes on from the statistics (staleness
//     histogram, applied, dropped, rejected and duplicate counts) of old shard i mod N: every
//     shard sees every dense gradient, so each counts the job's gradients as one shard saw them.
//   - Nothing of the consistency rule or the workers is carried (their clocks, the open
//     aggregate, push ids): a resumed run starts those afresh at its resume point, as
//     ShardJob::Resume does with any checkpoint. The result is for ShardJob::Resume only, not for
//     restoring a run in place (ShardJob::Restore).
#ifndef PS_SERVER_CHECKPOINT_RESHARD_H_
#define PS_SERVER_CHECKPOINT_RESHARD_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint_file.h"
#include "proto/ps_service.pb.h"

namespace ps {

// Old shard `index`'s blocks, verified against the manifest (CheckpointStore::ReadShard).
using ShardBlocksReader =
    std::function<absl::StatusOr<std::vector<CheckpointBlock>>(int index)>;

// The blocks shard `ps_index` of `num_ps` would hold had checkpoint `manifest` been taken on
// that many ps, as ShardJob::Resume takes them. Reads every old shard once, one at a time,
// through `read_shard` (each holds state this shard takes: the furthest version, statistics,
// sparse rows), keeping only what this shard takes of it; the reader's errors are returned as
// they are. DATA_LOSS naming the shard for a file that is another shard's or another job's, or
// blocks that are not what the manifest's spec places there; INVALID_ARGUMENT for a ps_index
// outside [0, num_ps). REQUIRES: the manifest's parameters are the job's (they decide the
// sizes allocated) and name num_ps shard files, as RestoreJob checks first.
absl::StatusOr<std::vector<CheckpointBlock>> ReshardCheckpoint(const CheckpointManifest& manifest,
                                                               int num_ps, int ps_index,
                                                               const ShardBlocksReader& read_shard);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_RESHARD_H_
