// An in-process ring of N links, one per member (threads as members), for tests and
// benchmarks of ring algorithms without a network. Members are named "worker:i (in-process)".
#ifndef PS_WORKER_ALLREDUCE_LOCAL_RING_H_
#define PS_WORKER_ALLREDUCE_LOCAL_RING_H_

#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "worker/allreduce/ring_link.h"

namespace ps {

// Links 0..size-1 of one ring; each Receive waits at most `deadline`. Send copies the message
// into the next member's inbox and returns at once. Destroying a link closes its member, like
// a process that died: a Send to it fails with UNAVAILABLE, and a Receive waiting on it ends
// with UNAVAILABLE, both naming it. An aborted link (RingLink::Abort) fails its own calls with
// the reason, refuses messages to its member, and ends the next member's Receive. The links
// may be destroyed in any order.
// REQUIRES: size >= 1.
std::vector<std::unique_ptr<RingLink>> MakeLocalRing(int size, absl::Duration deadline);

}  // namespace ps

#endif  // PS_WORKER_ALLREDUCE_LOCAL_RING_H_
