// One member's view of a ring of workers (ring all-reduce, ring_allreduce.h): its link to the
// next member (rank + 1 mod size), to which it sends, and from the previous one, from which it
// receives. Messages are float tensors named by a tag that the caller keeps distinct; a message
// may arrive before its Receive is called and waits for it.
//
// Implementations: local_ring.h (threads of one process, for tests and benchmarks) and
// grpc_ring_link.h (ps_worker daemons over gRPC).
#ifndef PS_WORKER_ALLREDUCE_RING_LINK_H_
#define PS_WORKER_ALLREDUCE_RING_LINK_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace ps {

// Thread-safe: Send and Receive may be called from several threads at once (distinct tags).
class RingLink {
 public:
  virtual ~RingLink() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sends `data` as message `tag` to the next member; returns once the next member holds it
  // (`data` may then be reused). Errors (UNAVAILABLE, DEADLINE_EXCEEDED) name the peer task
  // ("worker:2 (host:port)") and what it was doing.
  virtual absl::Status Send(uint64_t tag, absl::Span<const float> data) = 0;
  // Starts sending `data` as message `tag` to the next member and returns; `done` runs once,
  // on any thread (possibly this one, before SendAsync returns), with what Send would have
  // returned. `data` must stay alive and unchanged until then. The default sends on the
  // calling thread; a link whose transport is asynchronous overrides it, so that its caller
  // keeps several sends in flight without threads of its own.
  virtual void SendAsync(uint64_t tag, absl::Span<const float> data,
                         std::function<void(absl::Status)> done) {
    done(Send(tag, data));
  }
  // Receives message `tag` from the previous member into `out` (its size must match the
  // message's, else INVALID_ARGUMENT), waiting at most the link's deadline; DEADLINE_EXCEEDED
  // names the peer waited for.
  virtual absl::Status Receive(uint64_t tag, absl::Span<float> out) = 0;
  // Gives up on the ring: the Send and Receive calls in flight end as soon as they can, and
  // later ones at once, failing with `reason`. Its peers stop early too: messages sent to this
  // member from then on are refused, and the next member's Receive ends, both with
  // FAILED_PRECONDITION naming this member and `reason` (so a failure goes round the ring).
  // Only the first call counts. RingAllReduceMean aborts the link when it fails: the ring is
  // then broken for good.
  virtual void Abort(const absl::Status& reason) = 0;
  // Bytes this member has sent and received through the link so far: the tensors' payload
  // (4 bytes a float), not the framing around them.
  virtual int64_t bytes_sent() const = 0;
  virtual int64_t bytes_received() const = 0;
};

}  // namespace ps

#endif  // PS_WORKER_ALLREDUCE_RING_LINK_H_
