// The client side of the ps service, used by workers and psctl.
//
//   PsClient: one per process; talks to every ps task of a cluster (job management, stats).
//   WorkerSession: one worker's pulls and pushes for one job, to every shard in parallel.
//
// Every call carries a deadline. Calls that are safe to repeat are retried with exponential
// backoff on UNAVAILABLE (pushes too: the server drops a repeated push_id). Errors name the
// shard ("ps:1 (10.0.0.2:2222): Push: ...") and keep the server's status code.
#ifndef PS_COMMON_PS_CLIENT_H_
#define PS_COMMON_PS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/generic/generic_stub.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/partitioner.h"
#include "common/variables.h"
#include "proto/ps_service.pb.h"

namespace ps {

struct PsClientOptions {
  // Task i of the "ps" job listens on ps_addresses[i].
  std::vector<std::string> ps_addresses;
  // Deadline of every call that does not wait (and the transfer part of those that do).
  absl::Duration call_timeout = absl::Seconds(30);
  // How long a pull may wait at a barrier or SSP bound before the server says who it waits for.
  absl::Duration wait_timeout = absl::Seconds(60);
  // Attempts per call on UNAVAILABLE, with backoff doubling from initial_backoff up to
  // max_backoff.
  int max_attempts = 5;
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
  // Pulls of more than this many bytes from one shard are split into row ranges of about this
  // size, fetched in parallel: larger chunks mean fewer calls, smaller ones more parallelism.
  int64_t chunk_bytes = 4 << 20;
  // TCP connections per ps task; chunks are spread over them.
  int connections_per_ps = 2;
  // Must match the servers' --max_message_mb.
  int max_message_bytes = 1 << 30;
};

// Thread-safe.
class PsClient {
 public:
  // INVALID_ARGUMENT for a malformed address. Connections are made lazily.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(const PsClientOptions& options);

  int num_ps() const { return static_cast<int>(options_.ps_addresses.size()); }
  const PsClientOptions& options() const { return options_; }

  // Creates the job on every shard (idempotent for the same spec) and returns its placement.
  absl::StatusOr<Placement> CreateJob(const ParameterSpec& spec);
  // Deletes the job on every shard; NOT_FOUND only if no shard had it.
  absl::Status DeleteJob(const std::string& job_id);
  // Tells every shard that `worker` is done with the job (see LeaveJobRequest).
  absl::Status LeaveJob(const std::string& job_id, int worker);
  // Each shard's statistics, in ps order.
  absl::StatusOr<std::vector<JobStats>> GetJobStats(const std::string& job_id);

  // One call to be made to one shard. Exposed for WorkerSession.
  struct Call {
    int ps = 0;
    std::string method;  // "Pull", "Push", ...
    // Builds the request; called once per attempt.
    std::function<grpc::ByteBuffer()> make_request;
    // Handles an OK response; an error fails the call (not retried). Runs on a gRPC thread as
    // soon as this call's response is in, possibly at the same time as other calls' handlers.
    std::function<absl::Status(const grpc::ByteBuffer&)> on_response;
    absl::Duration timeout;
    int connection = 0;  // Which of the shard's connections to use.
  };
  // Makes `calls` in parallel, retrying those that fail with UNAVAILABLE, and returns the first
  // error (annotated with the shard and method) or OK when all succeeded.
  absl::Status RunCalls(std::vector<Call> calls);

 private:
  explicit PsClient(const PsClientOptions& options) : options_(options) {}
  std::string ShardName(int ps) const;

  const PsClientOptions options_;
  struct Connection {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<grpc::GenericStub> stub;  // Over `channel`.
  };
  // connections_[ps][i].
  std::vector<std::vector<Connection>> connections_;
};

// One worker's pulls and pushes for one job. Not thread-safe.
class WorkerSession {
 public:
  // INVALID_ARGUMENT if the spec does not place or `worker` is out of range.
  static absl::StatusOr<std::unique_ptr<WorkerSession>> Create(PsClient* client,
                                                               const ParameterSpec& spec,
                                                               int worker);

  const Placement& placement() const { return placement_; }

  struct PullOptions {
    int64_t step = 0;   // SYNC: the step to pull for (waits until it begins).
    int64_t clock = 0;  // SSP: this worker's clock.
  };
  struct PullResult {
    std::vector<int64_t> versions;  // Per shard.
    int64_t step = 0;               // SYNC: the step the values begin (the smallest over shards).
  };
  // Fills every variable of the job in `out` from all shards in parallel; remembers the
  // versions for the next Push. INVALID_ARGUMENT if a variable is missing or of the wrong size.
  absl::StatusOr<PullResult> Pull(const PullOptions& options, const MutableVariables& out);

  struct PushOptions {
    int64_t step = 0;   // SYNC: the step the gradient is for.
    int64_t clock = 0;  // SSP: the clock this push completes.
    // Per shard, the versions of the values the gradient was computed from; empty: those of
    // the last Pull (a worker that pulls again before pushing gives the earlier ones here).
    std::vector<int64_t> read_versions;
  };
  // Sends `gradients` (every variable of the job) to all shards in parallel, tagged with the
  // read versions (above). The gradients' memory is sent without copying: it must stay
  // unchanged until Push returns. Returns each shard's response, in ps order.
  absl::StatusOr<std::vector<PushResponse>> Push(const PushOptions& options,
                                                 const ConstVariables& gradients);

  struct PushPullResult {
    std::vector<PushResponse> pushed;  // As Push returns them.
    PullResult pulled;                 // As Pull returns it.
  };
  // Push(push_options, gradients), then Pull(pull_options, out), in one round trip per shard
  // (the PushPull call) where every shard's gradient fits in one chunk; else the two calls.
  // `gradients` and `out` may not share memory.
  absl::StatusOr<PushPullResult> PushPull(const PushOptions& push_options,
                                          const ConstVariables& gradients,
                                          const PullOptions& pull_options,
                                          const MutableVariables& out);

 private:
  // What the parallel pull responses of one Pull or PushPull gather. Thread-safe.
  struct PullState {
    explicit PullState(int num_ps);
    void Record(int ps, const PullResponseHeader& header) ABSL_LOCKS_EXCLUDED(mu);
    // The result once every response is in: shards that sent none count as version 0.
    PullResult Finish();
    absl::Mutex mu;
    PullResult result;
  };
  // The outcome of a push on each shard. Thread-safe.
  struct PushState {
    explicit PushState(int num_ps) : responses(num_ps) {}
    // Keeps the push's outcome (ignores RECEIVED chunks).
    void Record(int ps, PushResponse response) ABSL_LOCKS_EXCLUDED(mu);
    // Every shard's outcome, INTERNAL if one is missing.
    absl::StatusOr<std::vector<PushResponse>> Finish(const WorkerSession& session,
                                                     int64_t push_id);
    absl::Mutex mu;
    std::vector<std::optional<PushResponse>> responses;
  };
  // One shard's push: its header (no chunk fields) and its slices' gradients.
  struct ShardPush {
    PushRequestHeader header;
    std::vector<absl::Span<const float>> tensors;
  };

  absl::Status CheckVariables(const MutableVariables& out) const;
  PullRequest MakePullRequest(const PullOptions& options) const;
  // The slices on shard `ps`, in placement order, and their number of floats.
  std::vector<SliceRef> ShardSlices(int ps) const;
  int64_t ShardFloats(int ps) const;
  // Floats per push chunk (chunk_bytes), and how many chunks shard `ps`'s push takes (1: one
  // message, no chunk fields).
  int64_t ChunkFloats() const;
  int64_t PushChunks(int ps) const;
  // Decodes a PullResponse for the row ranges `expected` into `out`.
  absl::Status DecodeValues(const grpc::ByteBuffer& bytes, const std::vector<SliceRef>& expected,
                            const MutableVariables& out, PullResponseHeader* header) const;
  void AddPullCalls(const PullOptions& options, const MutableVariables& out, PullState* state,
                    std::vector<PsClient::Call>* calls) const;
  absl::StatusOr<ShardPush> MakeShardPush(int ps, const PushOptions& options,
                                          const ConstVariables& gradients,
                                          int64_t push_id) const;
  absl::Status AddPushCalls(const PushOptions& options, const ConstVariables& gradients,
                            int64_t push_id, PushState* state,
                            std::vector<PsClient::Call>* calls) const;
  WorkerSession(PsClient* client, const ParameterSpec& spec, int worker, Placement placement);
  // The span of `slice`'s rows in a whole-variable span.
  template <typename T>
  absl::StatusOr<absl::Span<T>> SliceOf(
      const absl::flat_hash_map<std::string, absl::Span<T>>& variables,
      const std::string& variable, int64_t row_begin, int64_t row_count) const;

  PsClient* const client_;
  const ParameterSpec spec_;
  const int worker_;
  const Placement placement_;
  absl::flat_hash_map<std::string, int64_t> variable_elements_;
  absl::flat_hash_map<std::string, int64_t> variable_row_size_;
  std::vector<int64_t> read_versions_;
  int64_t next_push_id_ = 1;
};

}  // namespace ps

#endif  // PS_COMMON_PS_CLIENT_H_
