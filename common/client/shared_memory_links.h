// A worker session's shared memory with the ps tasks on its host (docs/shared_memory.md): per
// shard, a segment the ps opened for this worker (OpenSharedMemory) and handed over through its
// descriptor handout, into which pushes write the gradient and from which pulls read the values,
// so that the requests carry no tensor bytes.
//
// A shard's link is opened at its first use. Where that fails for good (the ps is on another
// host or in another container, serves no shared memory, or has no room), the shard's tensors go
// in the requests for the rest of the session, and the reason is logged once; where the job is
// not on the ps yet or the ps is not reachable, the next use tries again. A link whose call failed
// is dropped and opened again at its next use: the ps may still be reading the old segment.
#ifndef PS_COMMON_CLIENT_SHARED_MEMORY_LINKS_H_
#define PS_COMMON_CLIENT_SHARED_MEMORY_LINKS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "absl/types/span.h"
#include "common/client/ps_connections.h"
#include "common/net/shared_memory_segment.h"
#include "proto/ps_service.pb.h"

namespace ps {

// Not thread-safe (as its WorkerSession); a Link's regions may be read and written from the
// calls' handlers while no other method runs.
class SharedMemoryLinks {
 public:
  struct Link {
    uint64_t segment = 0;  // PushRequestHeader.shared_memory, PullRequest.shared_memory.
    std::unique_ptr<SharedMemorySegment> mapping;
    absl::Span<float> push;  // The shard's dense gradient goes here.
    absl::Span<float> pull;  // Its values come here.
  };

  // `identity`: the worker and its job as OpenSharedMemory names them. `shard_floats[ps]`: the
  // dense floats shard ps holds of the job (0: no link). `connections` must outlive this.
  SharedMemoryLinks(PsConnections* connections, OpenSharedMemoryRequest identity,
                    std::vector<int64_t> shard_floats);

  // Shard `ps`'s link, opened now if it was not; null where its tensors go in the requests.
  Link* For(int ps);
  // Drops every open link (a batch of calls failed); each is opened again at its next use.
  void DropAll();
  // From now on a dropped link stays mapped until the next call of this, so that spans of its
  // regions handed out (WorkerSession::PushRegions) stay readable: a gradient computed there is
  // copied into the new link's region. Frees those dropped before.
  void KeepDroppedMappings();
  // A call through shard `ps`'s link was retried, in the requests: the ps may no longer hold
  // the segment (it restarted, the worker left, or it opened others since). DropStale drops
  // such links once the batch is done, to be opened again at their next use.
  void MarkStale(int ps) { stale_[ps] = true; }
  void DropStale();
  // The request of a call through shard `ps`'s link: `through_memory` on its first attempt,
  // and on a retry (the ps answered UNAVAILABLE, as it does for a segment it does not hold)
  // `in_requests()`, the link marked stale.
  std::function<grpc::ByteBuffer()> FirstThroughMemory(
      int ps, grpc::ByteBuffer through_memory, std::function<grpc::ByteBuffer()> in_requests);

  // Copies `tensors` one after another into `region` (REQUIRES: room for all of them); a
  // tensor already at its place in the region stays. REQUIRES: no tensor overlaps the region
  // elsewhere.
  static void Gather(absl::Span<const absl::Span<const float>> tensors, absl::Span<float> region);
  // Copies `region`'s floats one after another into `destinations` (REQUIRES: enough of them).
  static void Scatter(absl::Span<const float> region,
                      absl::Span<const absl::Span<float>> destinations);

 private:
  // Opens shard `ps`'s link, or says why it cannot; `lasting` says whether that will hold for
  // the session (not for a job not created yet or a ps not reachable now).
  absl::StatusOr<std::unique_ptr<Link>> Open(int ps, bool* lasting);
  // Closes shard `ps`'s link (kept mapped in dropped_ where keep_dropped_).
  void Drop(int ps);

  PsConnections* const connections_;
  const OpenSharedMemoryRequest identity_;
  const std::vector<int64_t> shard_floats_;
  std::vector<std::unique_ptr<Link>> links_;  // Per shard; null where not open.
  std::vector<bool> refused_;                 // Per shard: opening failed; never tried again.
  std::vector<bool> stale_;                   // Per shard: to drop once the batch is done.
  bool keep_dropped_ = false;                 // KeepDroppedMappings was called.
  std::vector<std::unique_ptr<Link>> dropped_;  // Since its last call.
};

}  // namespace ps

#endif  // PS_COMMON_CLIENT_SHARED_MEMORY_LINKS_H_
