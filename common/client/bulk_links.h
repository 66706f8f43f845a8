// A worker session's bulk streams (docs/bulk_streams.md): per ps, a TCP connection the ps opened
// for this worker (OpenBulkStream, let in by the ticket its answer carried) on which the ps sends
// the dense values of the session's large pulls as frames (common/net/bulk_frame.h), read
// straight into the variables the pull fills: no copy out of gRPC's buffers.
//
// A shard's link is opened at its first large pull. Where that fails for good (the ps serves TLS
// or opens no streams, its port cannot be reached from here), the shard's values go in the
// answers for the rest of the session, and the reason is logged once; where the job is not on
// the ps yet or the ps is not reachable, the next use tries again. A link whose frame was lost
// (its connection broke, or the frame did not come in time) is dropped and opened again at its
// next use; the pull is made again with its values in the answer.
//
// The session's large dense pushes go the other way on the same links: each chunk's gradient is
// a frame the link's sender thread writes while the push's call (naming the frame) goes on
// gRPC, and the ps reads it straight into its push buffer. A push whose frame could not be
// taken is made again with its gradient in the request (same push id: never applied twice).
#ifndef PS_COMMON_CLIENT_BULK_LINKS_H_
#define PS_COMMON_CLIENT_BULK_LINKS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/client/ps_connections.h"
#include "proto/ps_service.pb.h"

namespace ps {

// One stream, read on a thread of its own and written on another. Thread-safe.
class BulkLink {
 public:
  // Reads frames from `fd` (connected, let in; owned from now on), named `stream` at the ps.
  BulkLink(int fd, uint64_t stream);
  ~BulkLink();  // Closes the connection and waits for its thread.
  BulkLink(const BulkLink&) = delete;
  BulkLink& operator=(const BulkLink&) = delete;

  // How long a frame of `bytes` may take to come once its pull's answer is in (the ps queued it
  // before answering): 1 s, and 0.1 s more per MiB (10 MB/s, the slowest link to wait for).
  // On a gRPC thread (the pull's handler) for at most that long.
  static absl::Duration FrameTimeout(int64_t bytes) {
    return absl::Seconds(1) + absl::Milliseconds(100) * (bytes >> 20);
  }

  uint64_t stream() const { return stream_; }
  // A new frame number whose values go into `destinations`, in order, when it comes.
  uint64_t Expect(std::vector<absl::Span<float>> destinations) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until frame `frame` has come into its destinations (OK) or cannot (UNAVAILABLE: the
  // stream broke, or `deadline` passed, which breaks it); forgets the frame either way.
  absl::Status Await(uint64_t frame, absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets frame `frame`: once this returns its destinations are never written (a frame being
  // read into them then breaks the stream).
  void Forget(uint64_t frame) ABSL_LOCKS_EXCLUDED(mu_);
  bool broken() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a frame is still expected (neither awaited nor forgotten).
  bool expecting() const ABSL_LOCKS_EXCLUDED(mu_);

  // How long one write may wait for the ps to read: the ps reads a frame once its call is in,
  // up to 2 s later (BulkStream::kClaimTimeout), and past that reads it to drop it.
  static constexpr absl::Duration kSendTimeout = absl::Seconds(10);
  // A push's frame: queues `pieces` (alive and unchanged until AwaitSent returns) as a new
  // frame, written on the link's sender thread after the frames queued before; its number.
  uint64_t Send(std::vector<absl::Span<const float>> pieces) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until frame `frame` is written (OK), or cannot be (UNAVAILABLE: the stream broke, or
  // `deadline` passed, which breaks it). Once it returns, the frame's pieces are not read again.
  absl::Status AwaitSent(uint64_t frame, absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  int64_t frames_written() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Outgoing {
    uint64_t frame = 0;
    std::vector<absl::Span<const float>> pieces;
  };
  void Write() ABSL_LOCKS_EXCLUDED(mu_);  // The sender.
  struct Expected {
    std::vector<absl::Span<float>> destinations;
    bool done = false;
  };
  void Read() ABSL_LOCKS_EXCLUDED(mu_);
  void BreakLocked(absl::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int fd_;
  const uint64_t stream_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Expected> expected_ ABSL_GUARDED_BY(mu_);
  uint64_t next_frame_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t reading_ ABSL_GUARDED_BY(mu_) = 0;  // The frame being read into its destinations.
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Outgoing> outgoing_ ABSL_GUARDED_BY(mu_);
  uint64_t next_push_frame_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;  // The last frame written whole.
  uint64_t writing_ ABSL_GUARDED_BY(mu_) = 0;  // The frame being written.
  int64_t frames_written_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread reader_;  // Runs Read; started last.
  std::thread sender_;  // Runs Write; started last.
};

// Not thread-safe (as its WorkerSession); the links themselves are.
class BulkLinks {
 public:
  // `identity`: the worker and its job as OpenBulkStream names them. `shard_floats[ps]`: the
  // dense floats shard ps holds of the job; a shard with fewer than min_floats keeps its values
  // in the answers. Each shard has up to `streams_per_ps` streams (as many as the client's
  // connections to it): a pull is split over them, so that they move in parallel as its chunks
  // would. `connections` must outlive this.
  BulkLinks(PsConnections* connections, OpenBulkStreamRequest identity,
            std::vector<int64_t> shard_floats, int64_t min_floats, int streams_per_ps);

  int streams_per_ps() const { return streams_per_ps_; }
  // Stream `k` of shard `ps`, opened now if it was not; null where its values go in the answers.
  BulkLink* For(int ps, int k = 0);
  // A pull's request (a Pull, or a PushPull whose then_pull it sets) asking for its values as
  // frame `frame` on stream `stream`, or in the answer where both are 0.
  using EncodeRequest = std::function<grpc::ByteBuffer(uint64_t stream, uint64_t frame)>;
  // The request of a pull of shard `ps` on its stream `k`, `link`: on its first attempt
  // encoded naming a new frame for `destinations`, and on a retry with its values in the
  // answer, the first attempt's frame forgotten and the link dropped once the batch is done
  // (DropStale). `*frame` says which frame the attempt's answer may name (0: none).
  std::function<grpc::ByteBuffer()> FirstOnStream(int ps, int k, BulkLink* link,
                                                  EncodeRequest encode,
                                                  std::vector<absl::Span<float>> destinations,
                                                  std::shared_ptr<uint64_t> frame);
  // The request of a push to shard `ps` on its stream `k`, `link`: on its first attempt
  // encoded naming a new frame of `pieces` (queued on the link then), and on a retry with its
  // gradient in the request (encode(0, 0)), the link dropped once the batch is done.
  // `*frame`: the frame the last attempt named (0: none). The pieces stay alive and unchanged
  // until FinishSends returns.
  std::function<grpc::ByteBuffer()> FirstPushOnStream(int ps, int k, BulkLink* link,
                                                      EncodeRequest encode,
                                                      std::vector<absl::Span<const float>> pieces,
                                                      std::shared_ptr<uint64_t> frame);
  // Waits until every push frame queued since the last call is written or given up (its link
  // then broken): once it returns, no push's gradient is read again. Call once a batch is done.
  void FinishSends() ABSL_LOCKS_EXCLUDED(sends_mu_);
  // Drops the links marked stale and those broken; each is opened again at its next use, but
  // a shard whose streams were lost kLostStreamsBeforeGivingUp times keeps to the answers.
  void DropStale();
  // Drops, besides, every link that still expects a frame (a batch of calls failed: its frame
  // would land in values the pull no longer owns).
  void DropExpecting();

  // A session's streams per shard at most: the ps keeps 16 per worker, for 4 such sessions.
  static constexpr int kMaxStreamsPerPs = 4;
  static constexpr int kLostStreamsBeforeGivingUp = 3;

 private:
  absl::StatusOr<std::unique_ptr<BulkLink>> Open(int ps, bool* lasting);
  // Drops stream `k` of shard `ps`, which was lost; the shard's pulls keep to the answers once
  // kLostStreamsBeforeGivingUp were.
  void DropLost(size_t ps, int k);

  PsConnections* const connections_;
  const OpenBulkStreamRequest identity_;
  const std::vector<int64_t> shard_floats_;
  const int64_t min_floats_;
  const int streams_per_ps_;
  // links_[ps][k]: null where not open.
  std::vector<std::vector<std::unique_ptr<BulkLink>>> links_;
  std::vector<bool> refused_;  // Per shard: opening failed for good.
  std::vector<int> lost_;      // Per shard: streams dropped broken or stale so far.
  // Hosts whose bulk port could not be reached: their other shards do not wait for it again.
  std::vector<std::string> unreachable_hosts_;
  struct Queued {
    BulkLink* link = nullptr;
    uint64_t frame = 0;
    int64_t bytes = 0;
  };
  // Push frames queued in this batch, and the links to drop once it is done (stale_[ps][k]),
  // both written by calls' requests, on the calls' threads.
  absl::Mutex sends_mu_;
  std::vector<Queued> sends_ ABSL_GUARDED_BY(sends_mu_);
  std::vector<std::vector<bool>> stale_ ABSL_GUARDED_BY(sends_mu_);
  void MarkStale(int ps, int k) ABSL_LOCKS_EXCLUDED(sends_mu_);
};

}  // namespace ps

#endif  // PS_COMMON_CLIENT_BULK_LINKS_H_
