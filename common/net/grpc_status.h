// The one place that maps between absl::Status and grpc::Status. Codes carry over one to one
// (both follow google.rpc.Code); messages are kept, and so is the one detail a ps's answer may
// carry for its caller's program (below), as grpc::Status::error_details.
#ifndef PS_COMMON_NET_GRPC_STATUS_H_
#define PS_COMMON_NET_GRPC_STATUS_H_

#include <optional>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ps {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// A backup's refusal of a replicated shard's call because the shard's primary still replicates
// to it says how long that stream has been open: a caller that took the primary for hung before
// the stream opened learns that it is back (PsConnections::RecentlyHung).
absl::Status WithPrimaryStreamAge(absl::Status status, absl::Duration age);
// The age such a refusal carries; nullopt for any other status.
std::optional<absl::Duration> PrimaryStreamAge(const grpc::Status& status);

// A ps's refusal of a call for a shard it moved to another ps (ParameterServer.MoveShard) says
// which ps serves the shard now: the caller sends that shard's calls there.
absl::Status WithShardMovedTo(absl::Status status, int ps);
// The ps such a refusal names; nullopt for any other status.
std::optional<int> ShardMovedTo(const grpc::Status& status);

}  // namespace ps

#endif  // PS_COMMON_NET_GRPC_STATUS_H_
