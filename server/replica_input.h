// The inputs a replicated shard's two copies apply in one order (ReplicaInput in
// proto/ps_service.proto; server/shard_replicator.h sends them): how one is made from a push, and
// how either copy applies one, so that both do exactly the same.
#ifndef PS_SERVER_REPLICA_INPUT_H_
#define PS_SERVER_REPLICA_INPUT_H_

#include "absl/status/statusor.h"
#include "proto/ps_service.pb.h"
#include "server/shard_job.h"

namespace ps {

// The input for a whole push (its gradient's floats copied into the message).
ReplicaInput PushInput(const ShardJob::ReadyPush& push);

// Applies `input` (a push, leave, lost workers, rejoin, batches handed out, a growth, or a
// hand-back, which changes nothing here; not an install) to `job`: what a push answers, or the
// batches handed out, in the outcome (empty for the others).
// `push`: the push's gradient already decoded (the primary's own), else it is read from the
// message (INVALID_ARGUMENT when its size is not a whole number of floats).
absl::StatusOr<ReplicaOutcome> ApplyReplicaInput(ShardJob& job, const ReplicaInput& input,
                                                 const ShardJob::ReadyPush* push = nullptr);

// The backup's answer to input `seq`, from what applying it gave.
ReplicaAck AckFor(int64_t seq, const absl::StatusOr<ReplicaOutcome>& result);
// Whether the primary's `result` of an input is what the backup's `ack` says it got: the same
// code, for a push the same outcome, version and step, and for a handout the same batches.
// Anything else means the copies have diverged.
bool SameOutcome(const ReplicaAck& ack, const absl::StatusOr<ReplicaOutcome>& result);

}  // namespace ps

#endif  // PS_SERVER_REPLICA_INPUT_H_
