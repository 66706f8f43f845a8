// The shared memory segments a ps opened for the workers on its host (docs/shared_memory.md):
// one per (job, worker), holding a push region (the worker's gradient for this shard, written by
// the worker and read by the ps) and after it a pull region (the shard's values, written by the
// ps and read by the worker). A Push or Pull that names its segment carries no tensor bytes; the
// ps copies the gradient out of the push region before it checks or applies it, so a worker that
// changes the region meanwhile changes only its own push.
//
// A segment is made when its worker fetches it, not when it opens it: a worker that cannot
// reach the handout (another host) costs nothing but an offer that expires. A worker may hold
// up to kSegmentsPerWorker segments (a session each); its next one drops its oldest, and a
// dropped segment's pages are freed even while the worker still maps it (it then reads zeros).
// A segment's descriptor goes to the worker through a DescriptorHandout, under a ticket the
// OpenSharedMemory answer carries. Segments count against max_bytes together.
#ifndef PS_SERVER_SHARED_MEMORY_REGISTRY_H_
#define PS_SERVER_SHARED_MEMORY_REGISTRY_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/net/descriptor_handout.h"
#include "common/net/shared_memory_segment.h"

namespace ps {

// Thread-safe.
class SharedMemoryRegistry {
 public:
  // How long a segment's ticket stays good: the worker fetches it right after the answer.
  static constexpr absl::Duration kTicketLifetime = absl::Seconds(10);
  static constexpr int kSegmentsPerWorker = 4;
  static constexpr int kMaxSegments = 4096;  // Of all workers: each holds a descriptor.

  // Hands segments out through a socket in `directory`; they hold `max_bytes` together at most.
  static absl::StatusOr<std::unique_ptr<SharedMemoryRegistry>> Create(const std::string& directory,
                                                                      int64_t max_bytes);
  ~SharedMemoryRegistry() { handout_.reset(); }

  struct Opened {
    uint64_t segment = 0;  // Names it in requests (PushRequestHeader.shared_memory, ...).
    std::string ticket;    // For DescriptorHandout::Fetch at socket_path.
    std::string socket_path;
  };
  // A mark of the jobs' drops so far (DropJob). Take it before finding the job a segment is
  // opened for, and pass it to Open: a job deleted after it gets no segment.
  uint64_t DropMark() const ABSL_LOCKS_EXCLUDED(mu_);
  // Offers a new segment for `worker` of job `job_id`, with room for `push_floats` then
  // `pull_floats`, made when the ticket is fetched; where the worker holds kSegmentsPerWorker
  // already then, its oldest is dropped (calls in flight on it finish first).
  // RESOURCE_EXHAUSTED where the segments would pass max_bytes or kMaxSegments (checked again
  // at the fetch, which is refused then), or the handout holds too many offers.
  // FAILED_PRECONDITION, at once or at the fetch, once the job's segments were dropped after
  // DropMark gave `drop_mark`.
  absl::StatusOr<Opened> Open(const std::string& job_id, uint64_t drop_mark, int worker,
                              int64_t push_floats, int64_t pull_floats) ABSL_LOCKS_EXCLUDED(mu_);

  // A segment in use by one call, alive as long as this.
  struct Region {
    std::shared_ptr<const SharedMemorySegment> segment;
    absl::Span<float> push;
    absl::Span<float> pull;
  };
  // Segment `segment` of (job_id, worker): UNAVAILABLE where this ps has no such segment
  // (never opened, dropped by later Opens, or dropped: the same call in the requests will do),
  // PERMISSION_DENIED where it belongs to
  // another worker or job.
  absl::StatusOr<Region> Find(uint64_t segment, const std::string& job_id, int worker) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Drops the segments of one worker (it left), or of every worker of a job (deleted).
  void DropWorker(const std::string& job_id, int worker) ABSL_LOCKS_EXCLUDED(mu_);
  void DropJob(const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);

  int64_t bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  int segments() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t max_bytes() const { return max_bytes_; }
  const std::string& socket_path() const { return handout_->socket_path(); }

 private:
  struct Entry {
    std::string job_id;
    int worker = 0;
    int64_t push_floats = 0;
    std::shared_ptr<const SharedMemorySegment> segment;
  };
  SharedMemoryRegistry(std::unique_ptr<DescriptorHandout> handout, int64_t max_bytes)
      : handout_(std::move(handout)), max_bytes_(max_bytes) {}
  // Drops the worker's oldest segments until it has room for one more.
  void DropOldestLocked(const std::string& job_id, int worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked(uint64_t segment) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Makes the segment offered as `segment` (its descriptor, for the handout to send), or why
  // not; runs on the handout's thread.
  absl::StatusOr<int> Make(uint64_t segment, const std::string& job_id, uint64_t drop_mark,
                           int worker, int64_t push_floats, int64_t pull_floats)
      ABSL_LOCKS_EXCLUDED(mu_);
  // FAILED_PRECONDITION where the job's segments were dropped after `drop_mark`.
  absl::Status CheckJobLocked(const std::string& job_id, uint64_t drop_mark) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RESOURCE_EXHAUSTED where a segment of `bytes` more would pass a limit.
  absl::Status CheckRoomLocked(int64_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Reset first in the destructor: no Make runs once it is gone.
  std::unique_ptr<DescriptorHandout> handout_;
  const int64_t max_bytes_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> segments_ ABSL_GUARDED_BY(mu_);
  // (job id, worker) -> its segments, oldest first.
  absl::flat_hash_map<std::pair<std::string, int>, std::deque<uint64_t>> by_worker_
      ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // DropJob calls so far, and the last one's number and time for each job id dropped within
  // kDropsKept: an open takes less (its offer expires in kTicketLifetime), so older ones cannot
  // be after its mark and are forgotten.
  static constexpr absl::Duration kDropsKept = absl::Minutes(1);
  uint64_t drops_ ABSL_GUARDED_BY(mu_) = 0;
  struct Dropped {
    uint64_t number = 0;
    absl::Time at;
  };
  absl::flat_hash_map<std::string, Dropped> dropped_jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_SHARED_MEMORY_REGISTRY_H_
