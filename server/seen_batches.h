// The handed-out batches (server/data_handout.h numbers) whose gradients one shard has admitted,
// so that it admits each batch's gradient once (docs/data_handout.md, "A worker killed in the
// middle of a push"). A push goes to every shard at once; when its worker dies after some
// shards took it but before the first shard did, the first shard hands the batch out again,
// and the worker that gets it pushes it to every shard. A shard that has the batch already takes
// that push for its mode's bookkeeping (clocks, versions) but does not apply it again.
//
// Kept compact: the batches before `below` were all seen, and those seen after it are listed.
// Batches arrive about in order, so the list holds about as many as are in flight.
//
// Not thread-safe: ShardJob calls it under its lock.
#ifndef PS_SERVER_SEEN_BATCHES_H_
#define PS_SERVER_SEEN_BATCHES_H_

#include <cstdint>
#include <set>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/checkpoint.pb.h"

namespace ps {

class SeenBatches {
 public:
  // Whether every one of `batches` was seen; false for none.
  bool AllSeen(absl::Span<const int64_t> batches) const;
  // Marks `batches` (each >= 0) seen.
  void Add(absl::Span<const int64_t> batches);
  // How many are listed after the prefix (for tests and statistics).
  size_t listed() const { return above_.size(); }

  // Into and from a checkpoint (ShardCheckpointState.batches_seen_below, batches_seen). A
  // checkpoint without them (older, or of a job without handouts) restores none seen.
  void Save(ShardCheckpointState* state) const;
  // DATA_LOSS, changing nothing, for a list that is not increasing after the prefix.
  absl::Status Restore(const ShardCheckpointState& state);

 private:
  int64_t below_ = 0;          // Every batch before it was seen; it was not.
  std::set<int64_t> above_;    // Seen, each > below_.
};

}  // namespace ps

#endif  // PS_SERVER_SEEN_BATCHES_H_
