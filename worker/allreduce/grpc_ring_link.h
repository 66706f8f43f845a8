// A ring link between ps_worker daemons over gRPC: the ring is the cluster's workers in index
// order. Send and SendAsync deliver each message to the next worker's Ring service
// (ring_service.h), one unary call a message (gRPC's callback API, so sends overlap without
// threads), whose tensor bytes go out without a copy; Receive takes the previous worker's
// messages from this worker's own mailbox, which its Ring service fills.
#ifndef PS_WORKER_ALLREDUCE_GRPC_RING_LINK_H_
#define PS_WORKER_ALLREDUCE_GRPC_RING_LINK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cluster/cluster_spec.h"
#include "common/security/transport_security.h"
#include "worker/allreduce/ring_link.h"
#include "worker/allreduce/ring_mailbox.h"

namespace ps {

struct GrpcRingLinkOptions {
  // The longest a Send or a Receive waits (a slow or dead peer is named once it has passed).
  absl::Duration deadline = absl::Seconds(60);
  // How the channel to the next worker is secured, and the token it presents: the worker's
  // own (--tls_* flags, the cluster's token), as for its channels to the ps.
  TransportSecurity security;
  std::string token;
  // Must match the peers' --max_message_mb.
  int max_message_bytes = 1 << 30;
};

// The link of task worker:`worker` of `cluster` in the ring of run `run_id` of job `job_id`,
// receiving through `mailbox` (this worker's, which its Ring service fills; not owned, must
// outlive the link). Make one link per run on each worker and keep it while the run lasts:
// destroying it ends the run in the mailbox (its messages dropped, later ones refused).
// Errors name the peers as "worker:2 (host:port)". A send that finds the next worker
// unreachable fails at once (UNAVAILABLE): the ring's workers listen before their jobs start,
// and one that went away took its part of the run with it.
// INVALID_ARGUMENT when `worker` is not a worker task of `cluster`.
absl::StatusOr<std::unique_ptr<RingLink>> MakeGrpcRingLink(const ClusterSpec& cluster, int worker,
                                                           const std::string& job_id,
                                                           const std::string& run_id,
                                                           RingMailbox* mailbox,
                                                           const GrpcRingLinkOptions& options);

}  // namespace ps

#endif  // PS_WORKER_ALLREDUCE_GRPC_RING_LINK_H_
