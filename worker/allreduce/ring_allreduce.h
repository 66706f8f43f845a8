// Ring all-reduce (Patarasuk and Yuan 2009; Baidu's and Horovod's ring): every member of a ring
// ends with the elementwise mean of everyone's data, each member sending and receiving about
// 2 (N-1)/N of the data whatever the number N of members (bandwidth-optimal).
//
// The data is cut into N chunks: chunk i holds length / N floats, plus one when
// i < length % N, in order (chunks differ by at most one float; some are empty when
// length < N). Reduce-scatter: in N-1 steps, each member adds the chunk it receives to its own
// and passes the sum on, so that member r ends with the whole sum of chunk (r+1) mod N, which it
// divides by N. All-gather: in N-1 more steps, those means go round the ring and are copied
// as they arrive. Every member thus ends with bitwise identical values (each mean computed once).
// Chunks travel in pieces of at most piece_bytes: a member forwards piece k as soon as it has
// reduced it, while piece k+1 is still on its way (pipelining keeps the links busy).
#ifndef PS_WORKER_ALLREDUCE_RING_ALLREDUCE_H_
#define PS_WORKER_ALLREDUCE_RING_ALLREDUCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/allreduce/ring_link.h"

namespace ps {

struct RingOptions {
  // Pipelining granularity (at least 4: one float). Smaller pieces overlap more of the
  // transfers with the reduction but cost a message each.
  int64_t piece_bytes = 1 << 20;
  // Sends a member keeps in flight at once (RingLink::SendAsync). More than one hides a
  // send's round trip (a gRPC link's send ends with the peer's acknowledgement).
  int sends_in_flight = 2;
};

// Replaces `data` on every member by the elementwise mean over the ring's members, as above
// (any length, including 0 and fewer than size()). Every member must call it with the same
// `step`, length and options; `step` (below 2^40) makes the tags of one call distinct from
// every other call's. size() == 1: a no-op. Errors name the peer (the link's messages); on
// such an error the link is aborted (RingLink::Abort: the first failure ends the other
// transfers in flight at once, and this member's peers stop early), and `data` is unspecified.
// INVALID_ARGUMENT for bad options or a step out of range (nothing is sent).
absl::Status RingAllReduceMean(RingLink* link, uint64_t step, absl::Span<float> data,
                               const RingOptions& options = {});

// The payload bytes one call moves through member `rank`'s link, for `length` floats on a ring
// of `size`: with c(i) the size of chunk i in floats, member r sends every chunk but (r+1) and
// (r+2) mod N once each, and receives every chunk but r and (r+1): sent = 4 (2 length -
// c(r+1) - c(r+2)), received = 4 (2 length - c(r) - c(r+1)). When N divides length both are
// exactly 2 (N-1)/N x 4 length bytes. Zero for size 1.
struct RingTraffic {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
};
RingTraffic RingAllReduceTraffic(int64_t length, int size, int rank);

}  // namespace ps

#endif  // PS_WORKER_ALLREDUCE_RING_ALLREDUCE_H_
