// The bulk streams a ps opened for its workers (docs/bulk_streams.md): one TCP connection per
// (job, worker, session), from the ps to the worker, over which the ps sends the dense values
// of large pulls as frames (common/net/bulk_frame.h) instead of in the gRPC answer. The answer
// then carries the header only (PullResponseHeader.on_bulk_stream).
//
// A stream is offered by an authenticated call (OpenBulkStream: token and job rules as for a
// pull) and taken by the worker with the ticket that call answered, at this ps's bulk port
// (common/net/ticket_door.h). A pull names its stream by a 64-bit id; a stream serves only its
// own (job, worker): another worker's pull naming it is refused PERMISSION_DENIED, and an id
// that names no stream here (never opened, closed, or dropped) UNAVAILABLE, so that the worker
// takes its values in the answer. The streams carry plaintext: a ps serving TLS opens none.
//
// Each stream sends its frames in order on a thread of its own, so a pull's handler never waits
// on the worker's socket. A worker may hold up to kStreamsPerWorker streams (a session holds one
// per connection to the ps, up to 4); its next one closes its oldest.
//
// The worker writes the dense values of its large pushes the other way, as frames numbered by
// it in increasing order (PushRequestHeader.bulk_frame). Each stream reads them on a second
// thread of its own, straight into the push buffer the push's call registered (Receive), and
// calls the call back once they are in: no handler waits on the socket either.
#ifndef PS_SERVER_BULK_STREAMS_H_
#define PS_SERVER_BULK_STREAMS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/net/ticket_door.h"

namespace ps {

// What bulk streams carried: pulls' frames sent (and their values' bytes), and pushes' frames
// read whole into their calls' buffers (not those read past), and their bytes.
struct BulkTraffic {
  int64_t frames_sent = 0;
  int64_t bytes_sent = 0;
  int64_t frames_received = 0;
  int64_t bytes_received = 0;
  BulkTraffic& operator+=(const BulkTraffic& other) {
    frames_sent += other.frames_sent;
    bytes_sent += other.bytes_sent;
    frames_received += other.frames_received;
    bytes_received += other.bytes_received;
    return *this;
  }
};

// One worker session's stream. Thread-safe.
class BulkStream {
 public:
  // The frames queued on a stream at once at most: a session has one pull in flight on each of
  // its streams (two while one is made again). A worker that does not read holds no more.
  static constexpr int kMaxQueuedFrames = 2;
  // How long one write to the socket may wait for the worker to read, and how long a frame may
  // take in all beyond 0.1 s per MiB (10 MB/s), before the stream closes.
  static constexpr absl::Duration kSendTimeout = absl::Seconds(10);

  // Sends on `fd` (connected; owned from now on). `queued_bytes`: the bytes of the frames
  // queued on every stream of the ps, which Send keeps under `max_queued_bytes`.
  BulkStream(int fd, std::shared_ptr<std::atomic<int64_t>> queued_bytes,
             int64_t max_queued_bytes);
  ~BulkStream();  // Closes the stream and waits for its thread.
  BulkStream(const BulkStream&) = delete;
  BulkStream& operator=(const BulkStream&) = delete;

  // Queues frame `frame` of `pieces` (kept readable by `keep_alive` until sent). UNAVAILABLE
  // where the stream is closed, holds kMaxQueuedFrames already, or the ps's streams hold
  // max_queued_bytes: the caller answers in the gRPC message instead (whose own limits hold).
  absl::Status Send(uint64_t frame, std::vector<absl::Span<const float>> pieces,
                    std::shared_ptr<const void> keep_alive) ABSL_LOCKS_EXCLUDED(mu_);
  // How long a frame the worker wrote waits for the call that names it to register (the call
  // may be parked in the byte budget meanwhile; TCP holds the worker's later writes). Past it
  // the frame is read past, and the call, when it registers, is told to send its values in the
  // request.
  static constexpr absl::Duration kClaimTimeout = absl::Seconds(2);
  // How long a registered frame may take to come in: 1 s and 0.1 s per MiB (10 MB/s) beyond
  // kClaimTimeout, which a frame ahead of it may take. Past it the stream closes.
  static absl::Duration ReceiveTimeout(int64_t bytes) {
    return kClaimTimeout + absl::Seconds(1) + absl::Milliseconds(100) * (bytes >> 20);
  }
  // The frames registered and not yet in, at most: a session has one push call on a stream.
  static constexpr int kMaxExpectedFrames = 8;

  // What Receive calls once, outside the stream's lock: OK once the frame's values are all in
  // its destinations, with `finite` telling whether all are (checked piece by piece as they
  // came, while in cache); UNAVAILABLE where they cannot come (the stream closed or broke, the
  // frame was read past before its call registered, or it did not come in time). Called on the
  // stream's reader thread, or within Receive.
  using Received = std::function<void(absl::Status status, bool finite)>;
  // The floats read into a frame's destinations between two finiteness checks (256 KiB).
  static constexpr size_t kCheckedPiece = 64 * 1024;
  // Frame `frame`'s values go into `destinations` (kept writable by `keep_alive` until `done`
  // is called), in order, when the worker's frame comes. A frame whose size is not theirs
  // closes the stream (the worker's stream is out of step).
  void Receive(uint64_t frame, std::vector<absl::Span<float>> destinations,
               std::shared_ptr<void> keep_alive, Received done) ABSL_LOCKS_EXCLUDED(mu_);
  // The call naming frame `frame` was refused: its values are read past when they come.
  void Refuse(uint64_t frame) ABSL_LOCKS_EXCLUDED(mu_);

  // Stops sending and reading: the frames queued are dropped, the frames expected are told
  // UNAVAILABLE, the worker sees its stream end.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether it closed: Close, a write or read that failed or timed out, or the worker hung up.
  bool closed() const ABSL_LOCKS_EXCLUDED(mu_);
  BulkTraffic traffic() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Frame {
    uint64_t frame = 0;
    std::vector<absl::Span<const float>> pieces;
    std::shared_ptr<const void> keep_alive;
    int64_t bytes = 0;
  };
  // A frame registered by its call (or refused: no destinations, no `done`).
  struct Expected {
    std::vector<absl::Span<float>> destinations;
    std::shared_ptr<void> keep_alive;
    Received done;
    absl::Time deadline;
    bool refused = false;
  };
  void Run() ABSL_LOCKS_EXCLUDED(mu_);  // The sender.
  void Read() ABSL_LOCKS_EXCLUDED(mu_);  // The reader.

  // Gives the bytes of the frames queued back to the ps's count.
  void ClearQueueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes the stream (logging `why` unless empty, and unless it was closed already) and takes
  // the frames expected out, to be told UNAVAILABLE outside mu_.
  void CloseLocked(absl::string_view why, std::vector<Received>* failed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Fail(std::vector<Received> failed, absl::string_view why);

  const int fd_;
  const std::shared_ptr<std::atomic<int64_t>> all_queued_bytes_;
  const int64_t max_queued_bytes_;
  mutable absl::Mutex mu_;
  std::deque<Frame> queue_ ABSL_GUARDED_BY(mu_);
  BulkTraffic traffic_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<uint64_t, Expected> expected_ ABSL_GUARDED_BY(mu_);
  uint64_t claiming_ ABSL_GUARDED_BY(mu_) = 0;  // The frame whose header is in, not claimed yet.
  uint64_t passed_ ABSL_GUARDED_BY(mu_) = 0;    // The last frame taken or read past.
  uint64_t reading_ ABSL_GUARDED_BY(mu_) = 0;   // The frame being read into its buffer.
  std::thread sender_;  // Runs Run; started last.
  std::thread reader_;  // Runs Read; started last.
};

// Thread-safe.
class BulkStreams {
 public:
  // How long a stream's ticket stays good: the worker connects right after the answer.
  static constexpr absl::Duration kTicketLifetime = absl::Seconds(10);
  // A session holds up to 4 (one per connection to the ps; BulkLinks::kMaxStreamsPerPs).
  static constexpr int kStreamsPerWorker = 16;
  static constexpr int kMaxStreams = 1024;  // Of all workers: each holds a socket and a thread.
  // The bytes of frames queued on all streams at once at most (each frame's values; the
  // snapshot that keeps them readable may pin more of the shard).
  static constexpr int64_t kMaxQueuedBytes = int64_t{1} << 30;

  // Listens on `host` (an address of this machine; "0.0.0.0" or "::" for all), port `port` (0:
  // a free one). UNAVAILABLE naming the address where it cannot be bound.
  static absl::StatusOr<std::unique_ptr<BulkStreams>> Start(const std::string& host, int port);
  ~BulkStreams();  // Closes every stream.

  int port() const { return port_; }

  struct Opened {
    uint64_t stream = 0;  // Names it in PullRequest.bulk_stream.
    std::string ticket;   // Presented at port().
  };
  // Offers a new stream for `worker` of job `job_id`, taken when the ticket is presented;
  // where the worker holds kStreamsPerWorker already then, its oldest is closed.
  // RESOURCE_EXHAUSTED beyond kMaxStreams streams, or too many offers at once.
  absl::StatusOr<Opened> Open(const std::string& job_id, int worker) ABSL_LOCKS_EXCLUDED(mu_);

  // Stream `stream` of (job_id, worker): UNAVAILABLE where this ps has no such open stream,
  // PERMISSION_DENIED where it belongs to another worker or job.
  absl::StatusOr<std::shared_ptr<BulkStream>> Find(uint64_t stream, const std::string& job_id,
                                                   int worker) const ABSL_LOCKS_EXCLUDED(mu_);

  // Closes the streams of one worker (it left), or of every worker of a job (deleted).
  void DropWorker(const std::string& job_id, int worker) ABSL_LOCKS_EXCLUDED(mu_);
  void DropJob(const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);
  void DropAll() ABSL_LOCKS_EXCLUDED(mu_);  // The ps shuts down.
  int streams() const ABSL_LOCKS_EXCLUDED(mu_);
  // What every stream this ps has had carried so far.
  BulkTraffic traffic() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::string job_id;
    int worker = 0;
    std::shared_ptr<BulkStream> stream;
  };
  BulkStreams(int listen_fd, int port)
      : port_(port), door_(std::make_unique<TicketDoor>(listen_fd)) {}
  // Takes the connection offered as `stream` (on the door's thread).
  void Attach(uint64_t stream, const std::string& job_id, int worker, int fd)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Erases the streams `erase` picks, into `closing` (to be closed outside mu_).
  void EraseWhereLocked(const std::function<bool(const Entry&)>& erase,
                        std::vector<std::shared_ptr<BulkStream>>* closing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Erases and closes the streams `drop` picks.
  void DropWhere(const std::function<bool(const Entry&)>& drop) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the streams erased out of the registry, to be closed outside mu_.
  void EraseLocked(uint64_t stream, std::vector<std::shared_ptr<BulkStream>>* closing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int port_;
  const std::shared_ptr<std::atomic<int64_t>> queued_bytes_ =
      std::make_shared<std::atomic<int64_t>>(0);
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> streams_ ABSL_GUARDED_BY(mu_);
  // (job id, worker) -> its streams, oldest first.
  absl::flat_hash_map<std::pair<std::string, int>, std::deque<uint64_t>> by_worker_
      ABSL_GUARDED_BY(mu_);
  BulkTraffic retired_ ABSL_GUARDED_BY(mu_);  // What the streams erased had carried.
  // Reset first in the destructor: no Attach runs once it is gone.
  std::unique_ptr<TicketDoor> door_;
};

}  // namespace ps

#endif  // PS_SERVER_BULK_STREAMS_H_
