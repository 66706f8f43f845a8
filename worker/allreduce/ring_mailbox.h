// The ring messages a worker has received and not yet taken, keyed by (job_id, run_id, tag):
// the gRPC Ring service (ring_service.h) puts them in as they arrive, and the worker's ring
// links (grpc_ring_link.h) take them out, waiting for those not yet there. Bounded in memory;
// the messages of a run that ended on this worker are dropped, and its late ones refused.
#ifndef PS_WORKER_ALLREDUCE_RING_MAILBOX_H_
#define PS_WORKER_ALLREDUCE_RING_MAILBOX_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>

#include <grpcpp/support/byte_buffer.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ps {

struct RingMailboxOptions {
  // The bytes of messages held at once, all runs together (ps_worker --ring_mailbox_mb): more
  // is refused with RESOURCE_EXHAUSTED. An all-reduce of B bytes on N workers has at most
  // 2 (N-1)/N B in flight to one worker, and usually a few pieces.
  int64_t max_bytes = int64_t{1} << 30;
  // How many ended runs are remembered, so that their late messages are refused.
  int max_ended_runs = 1024;
};

// Thread-safe.
class RingMailbox {
 public:
  explicit RingMailbox(const RingMailboxOptions& options = {}) : options_(options) {}

  // Holds `message` (an encoded RingPiece) as message `tag` of the run. RESOURCE_EXHAUSTED
  // naming the limit when it would hold more than max_bytes; FAILED_PRECONDITION with the
  // reason when the run ended here; ALREADY_EXISTS when the tag is held already.
  absl::Status Put(const std::string& job_id, const std::string& run_id, uint64_t tag,
                   const grpc::ByteBuffer& message) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits at most `timeout` for message `tag` of the run and moves it into `*message`.
  // DEADLINE_EXCEEDED when it has not come (the caller says from whom); the run's end reason
  // when it ended here, before or while waiting.
  absl::Status Take(const std::string& job_id, const std::string& run_id, uint64_t tag,
                    absl::Duration timeout, grpc::ByteBuffer* message) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the run on this worker: drops its messages, and ends its Takes and refuses its later
  // Puts and Takes with `reason` (not OK). The first reason stays.
  void EndRun(const std::string& job_id, const std::string& run_id, const absl::Status& reason)
      ABSL_LOCKS_EXCLUDED(mu_);

  int64_t bytes_held() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using RunKey = std::pair<std::string, std::string>;  // (job_id, run_id).

  // The reason run `run` ended, or OK.
  absl::Status EndedLocked(const RunKey& run) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RingMailboxOptions options_;

  mutable absl::Mutex mu_;
  std::map<RunKey, std::map<uint64_t, grpc::ByteBuffer>> messages_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_held_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<RunKey, absl::Status> ended_ ABSL_GUARDED_BY(mu_);
  std::deque<RunKey> ended_order_ ABSL_GUARDED_BY(mu_);  // Oldest first, to forget.
};

}  // namespace ps

#endif  // PS_WORKER_ALLREDUCE_RING_MAILBOX_H_
