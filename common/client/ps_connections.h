// Connections to every ps task of a cluster, and the engine that makes a batch of calls over
// them in parallel. PsClient (job management) and WorkerSession (pulls and pushes) are built
// on it.
//
// Every call carries a deadline. A call that fails with UNAVAILABLE is made again with
// exponential backoff (the callers only hand in calls that are safe to repeat: the server drops
// a repeated push_id). Errors name the shard ("ps:1 (10.0.0.2:2222): Push: ...") and keep the
// server's status code. The calls of a batch to one shard keep at most
// max_bytes_in_flight_per_ps in flight (backpressure): a large push's chunks go out as earlier
// ones are answered, not all at once. A ps with a byte budget (server/byte_budget.h) answers every
// data call (Pull, Push, PushPull) with a smaller window for this client ("ps-window-bytes"), which
// its later pushes keep to; before the first such answer, pushes go to a ps one at a time. An
// UNAVAILABLE marked "ps-retry-here" (a push that waited too long for the budget) is retried on
// the same copy of a replicated shard, not failed over.
// Every call names this client ("ps-client-id", random) so that the ps can share windows out.
#ifndef PS_COMMON_CLIENT_PS_CONNECTIONS_H_
#define PS_COMMON_CLIENT_PS_CONNECTIONS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/security/transport_security.h"

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
  // A batch with a replicated call (Call.replicated) tries on past max_attempts until this long
  // after its first failure (a pull may have waited long at a barrier before), moving between the shard's two copies with waits of at most
  // 4 * initial_backoff: a shard on the move (a takeover, a move home, a copy taking it over
  // again) may refuse calls for up to its ps's --replica_unreachable_after.
  absl::Duration failover_patience = absl::Seconds(5);
  // The longest a connection waits between attempts to reach a ps that went away, so that a ps
  // restarted on its address is reached within about this long of listening (gRPC's own
  // default grows to two minutes).
  absl::Duration max_reconnect_backoff = absl::Milliseconds(500);
  // Pulls of more than this many bytes from one shard are split into row ranges of about this
  // size, fetched in parallel: larger chunks mean fewer calls, smaller ones more parallelism.
  int64_t chunk_bytes = 4 << 20;
  // The bytes one batch of calls (RunCalls) keeps in flight to one ps task at most: what the
  // ps buffers of this client's requests at once (and this client of their answers), against
  // how many chunks overlap in transit. A call counts its request's bytes, or those it
  // expects back when more (a pull's chunk: Call::response_bytes). One call goes out alone
  // whatever its size. The default lets 15 chunks of 4 MiB overlap, which costs a 64 MiB
  // push no measurable throughput (bench/RESULTS.md, "Backpressure").
  int64_t max_bytes_in_flight_per_ps = int64_t{64} << 20;
  // TCP connections per ps task; chunks are spread over them.
  int connections_per_ps = 2;
  // Where a ps shares this host, a job's dense float32 tensors go through memory both map
  // instead of in the requests (common/client/shared_memory_links.h, docs/shared_memory.md);
  // false: always in the requests.
  bool shared_memory = true;
  // Where no shared memory serves, a pull of at least this many bytes from one shard brings
  // its values on a bulk stream to the ps instead of in the answer (common/client/bulk_links.h,
  // docs/bulk_streams.md), where the ps opens them (plaintext clusters); false: always in the
  // answers.
  bool bulk_streams = true;
  int64_t bulk_min_bytes = int64_t{1} << 20;
  // Must match the servers' --max_message_mb.
  int max_message_bytes = 1 << 30;
  // How the channels to the ps tasks are secured (plaintext by default).
  TransportSecurity security;
  // The bearer token every call presents (common/security/auth_token.h); none when empty.
  std::string token;
};

// Thread-safe.
class PsConnections {
 public:
  // INVALID_ARGUMENT for no address or a malformed one. Connections are made lazily.
  static absl::StatusOr<std::unique_ptr<PsConnections>> Create(const PsClientOptions& options);

  int num_ps() const { return static_cast<int>(options_.ps_addresses.size()); }
  const PsClientOptions& options() const { return options_; }
  // "ps:1 (10.0.0.2:2222)": how errors name shard `ps`.
  std::string ShardName(int ps) const;
  // Whether `bytes` of tensors fit one message with its headers (max_message_bytes): what a
  // call that went beside the messages (shared memory, a bulk stream) carries when it is made
  // again in them.
  bool FitsOneMessage(int64_t bytes) const {
    constexpr int64_t kHeaderRoom = 64 << 10;
    return options_.max_message_bytes < 0 || bytes + kHeaderRoom <= options_.max_message_bytes;
  }

  // One call to be made to one shard's ParameterServer service.
  struct Call {
    int ps = 0;
    std::string method;  // "Pull", "Push", ...
    // Builds the request; called once per attempt, on the calling thread, before any call of
    // the attempt starts.
    std::function<grpc::ByteBuffer()> make_request;
    // Handles an OK response; an error fails the call (not retried), but UNAVAILABLE, which
    // makes it again as the call's own UNAVAILABLE would (a pull whose values, sent beside the
    // answer, were lost). Runs as soon as this call's response is in, possibly at the same time
    // as other calls' handlers.
    std::function<absl::Status(const grpc::ByteBuffer&)> on_response;
    absl::Duration timeout;  // From the moment the call starts.
    int connection = 0;      // Which of the shard's connections to use.
    // The size of the response expected, where it dwarfs the request (a pull's chunk): what the
    // call counts against max_bytes_in_flight_per_ps when more than its request's size.
    int64_t response_bytes = 0;
    // A call of a replicated job (ParameterSpec.replicas 2) to shard `ps`, whose request names
    // the shard (PullRequest.shard): it goes where Route(ps) says, and an UNAVAILABLE answer
    // sends it, and every other call of its batch to that shard, to the shard's other copy
    // (Failover), on the next ps.
    bool replicated = false;
    // A call of job `job_id` whose request names its shard (a data call): it goes where
    // MovedRoute(job_id, ps) says, and an answer saying the shard moved to another ps
    // (ShardMovedTo: MoveShard) sends it, and every other call of its batch to that shard of
    // that job, there (MoveRoute). A replicated call follows Route instead.
    bool routed = false;
    std::string job_id = "";
    // Made once: UNAVAILABLE fails it at once (a question whose answer may not come).
    bool once = false;
  };
  // Makes `calls`, those to different shards in parallel and those to one shard in order with
  // at most options().max_bytes_in_flight_per_ps of them in flight (the next starts as one
  // ends); retries those that fail with UNAVAILABLE; and returns the first error (in `calls`
  // order, annotated with the shard and method) or OK when all succeeded. Once a call has
  // failed for good, the calls not yet let go by their window are not made (the last call,
  // once let go, is made even so: it only adds one request). A call must not wait on the
  // server for a later call of the batch to the same shard, which the window may hold back.
  // The last call of each attempt is made and handled on the calling thread once its shard's
  // window lets it go (no thread switch for a single call); the others' handlers run on gRPC
  // threads.
  absl::Status RunCalls(std::vector<Call> calls);

  // Replicated shards (docs/replication.md): the ps task that serves shard `shard` for
  // replicated calls (the shard's own at first), and the switch to its other copy, from task
  // `from` (where a call failed; no change if the shard has switched since): task
  // (shard + 1) % num_ps when it was the shard's own, the shard's own again otherwise. A switch
  // is logged with `why` (the failed call's error).
  int Route(int shard) const { return routes_[shard].load(std::memory_order_acquire); }
  void Failover(int shard, int from, absl::string_view why = "");
  // Shards of jobs without replicas moved to another ps (MoveShard): the task that serves shard
  // `shard` of job `job_id` (its own at first), and the move of it from task `from` to task
  // `to` (no change if its route is no longer `from`; back to the shard's own ps too), logged
  // with `why`.
  int MovedRoute(const std::string& job_id, int shard) const ABSL_LOCKS_EXCLUDED(moved_mu_);
  void MoveRoute(const std::string& job_id, int shard, int from, int to, absl::string_view why)
      ABSL_LOCKS_EXCLUDED(moved_mu_);
  // (Job, shard) of a job without replicas.
  using JobShard = std::pair<std::string, int>;
  // Where each of `shards` is served (those found), asked of the ps not in `unreached` once
  // routed calls of them failed UNAVAILABLE at the tasks in `unreached` with no word of a move:
  // a ps a shard moved away from may be gone since (a ps removed from the job). RunCalls moves
  // each found shard's route there (MoveRoute) and makes its calls again. Asked at most once
  // per attempt, each ps once (Call.once).
  using MovedShardFinder = std::function<std::map<JobShard, int>(
      const std::vector<JobShard>& shards, const std::set<int>& unreached)>;
  // REQUIRES: before any call (PsClient::Create sets it).
  void SetMovedShardFinder(MovedShardFinder finder) { find_moved_shard_ = std::move(finder); }
  // The other copy of shard `shard` from task `task`: the next task from the shard's own, the
  // shard's own from the next.
  int OtherCopy(int shard, int task) const;

  // A ps that hangs (stopped, or its host frozen) accepts connections and answers nothing: a
  // call there fails UNAVAILABLE once keepalive finds its connection dead ("keepalive watchdog
  // timeout"). Whether `status` is such a failure.
  static bool LooksHung(const absl::Status& status);
  // Whether task `task` failed a call as LooksHung says less than failover_patience / 2 (at
  // most 5 s) ago.
  // A replicated call does not switch back to such a copy on the other copy's UNAVAILABLE
  // ("still replicates the shard": its stream from the hung ps is not yet found dead either),
  // but retries where it is: the other copy takes the shard over once that stream breaks, while
  // a call at the hung ps would wait there until it goes on.
  bool RecentlyHung(int task) const;
  // Forgets task `task`'s hang when it was seen before `alive_at`, when it was known alive (a
  // backup's refusal said how long ago the task's stream to it opened: PrimaryStreamAge).
  void ForgiveHungBefore(int task, absl::Time alive_at);

  // The bytes this client keeps in flight to shard `ps` in one batch, for a call of `method`:
  // max_bytes_in_flight_per_ps, or for a push less where the ps said so, and 0 before any answer
  // to a data call (one push at a time).
  int64_t WindowBytes(int ps, const std::string& method) const;

 private:
  struct Connection {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<grpc::GenericStub> stub;  // Over `channel`.
  };
  struct InFlight;
  class Window;

  explicit PsConnections(const PsClientOptions& options);
  // The task `call` goes to now, and one of its connections there.
  int TaskFor(const Call& call) const;
  const Connection& ConnectionFor(const Call& call, int task) const;
  // Whether `call` is made again after failing with `status`: UNAVAILABLE, and for a replicated
  // call also CANCELLED.
  static bool Retryable(const Call& call, const absl::Status& status);
  // Takes the window in a data call's answer (its trailing metadata), or
  // max_bytes_in_flight_per_ps where the ps answered OK with none.
  void TakeWindow(const Call& call, const InFlight& state) const;
  // Makes calls[i] for every i in `pending` once, as RunCalls says; returns when every call
  // made is done. On the `last` attempt, UNAVAILABLE fails a call for good too.
  std::vector<std::unique_ptr<InFlight>> Attempt(const std::vector<Call>& calls,
                                                 const std::vector<size_t>& pending,
                                                 bool last) const;

  const PsClientOptions options_;
  // connections_[ps][i].
  std::vector<std::vector<Connection>> connections_;
  std::vector<std::atomic<int>> routes_;  // Per shard: the task its replicated calls go to.
  // Per job and shard moved away from its own ps: the task it is on.
  mutable absl::Mutex moved_mu_;
  std::map<std::pair<std::string, int>, int> moved_ ABSL_GUARDED_BY(moved_mu_);
  std::atomic<bool> any_moved_{false};  // moved_ was ever written: calls look it up.
  MovedShardFinder find_moved_shard_;     // Unset: none is looked for.
  // Per task: when a call there last failed as LooksHung says (absl::ToUnixNanos; 0: never).
  std::vector<std::atomic<int64_t>> hung_at_;
  const std::string client_id_;           // "ps-client-id".
  // Per shard: the window its last data call's answer gave; 0 before any.
  mutable std::vector<std::atomic<int64_t>> windows_;
};

}  // namespace ps

#endif  // PS_COMMON_CLIENT_PS_CONNECTIONS_H_
