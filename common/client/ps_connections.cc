#include "common/client/ps_connections.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <set>

#include <glog/logging.h>
#include <grpc/grpc.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/net/grpc_deadline.h"
#include "common/security/auth_token.h"
#include "common/net/grpc_keepalive.h"
#include "common/net/grpc_reconnect.h"
#include "common/net/grpc_status.h"
#include "common/cluster/host_port.h"

namespace ps {
namespace {

constexpr char kServicePrefix[] = "/ps.ParameterServer/";
// The metadata this client names itself with, where a ps answers with its window
// (server/byte_budget.h), and where it says that an UNAVAILABLE answer came from a ps too busy,
// not gone.
constexpr char kClientIdKey[] = "ps-client-id";
constexpr char kWindowKey[] = "ps-window-bytes";
constexpr char kRetryHereKey[] = "ps-retry-here";

// The calls that keep to the window a ps gives: those that bring it push bytes.
bool KeepsToWindow(const std::string& method) { return method == "Push" || method == "PushPull"; }

// 128 bits from the system's random source: clients of one ps never share an id by chance.
std::string RandomClientId() {
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&id, absl::Hex(random(), absl::kZeroPad8));
  return id;
}

}  // namespace

struct PsConnections::InFlight {
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Status handled;  // What on_response returned, for an OK status.
  int64_t bytes = 0;     // What the call counts against its shard's window.
  bool made = false;     // False for a call not made because another failed for good.
  int task = -1;         // The ps task it went to (a replicated call's route then).

  // UNAVAILABLE from a ps that is up but too busy (its byte budget): retried on the same copy.
  bool RetryHere() const {
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
    return context.GetServerTrailingMetadata().count(kRetryHereKey) > 0;
  }

  // Runs the call's handler on an OK response, then frees the response.
  void Handle(const Call& call) {
    if (status.ok()) {
      handled = call.on_response(response);
      response.Clear();
    }
  }
};

// One attempt's calls, each shard's in order through its window. A call starts from the
// thread that ends another (a gRPC thread, or the calling thread); `mu_` guards the
// bookkeeping only, never a gRPC call or a handler.
class PsConnections::Window {
 public:
  // in_flight[i] is the state of calls[pending[i]], its request built.
  Window(const PsConnections& connections, const std::vector<Call>& calls,
         const std::vector<size_t>& pending, bool last,
         const std::vector<std::unique_ptr<InFlight>>& in_flight)
      : connections_(connections),
        calls_(calls),
        pending_(pending),
        in_flight_(in_flight),
        last_(last),
        own_(pending.size() - 1),
        shards_(connections.num_ps()),
        unfinished_(pending.size()) {
    for (size_t i = 0; i < pending.size(); ++i) shards_[calls[pending[i]].ps].queue.push_back(i);
  }

  // Makes the calls; returns when every call made is done.
  void Run() ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<size_t> ready;
    {
      absl::MutexLock lock(&mu_);
      for (size_t ps = 0; ps < shards_.size(); ++ps) TakeReadyLocked(ps, &ready);
    }
    for (size_t position : ready) Start(position);
    bool own_ready;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &Window::OwnDecided));
      own_ready = own_ready_;
    }
    if (own_ready) RunOwn();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](size_t* left) { return *left == 0; }, &unfinished_));
  }

 private:
  struct Shard {
    std::deque<size_t> queue;  // Positions in `pending` not started yet, in order.
    int calls = 0;             // In flight.
    int64_t bytes = 0;         // In flight.
  };

  // Takes the calls of shard `ps` that its window lets go now (`own_` is the calling thread's:
  // marked ready, not taken), unless a call has failed for good.
  void TakeReadyLocked(size_t ps, std::vector<size_t>* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Shard& shard = shards_[ps];
    while (!stopped_ && !shard.queue.empty()) {
      const size_t next = shard.queue.front();
      const int64_t bytes = in_flight_[next]->bytes;
      const int64_t window =
          connections_.WindowBytes(static_cast<int>(ps), calls_[pending_[next]].method);
      if (shard.calls > 0 && shard.bytes + bytes > window) return;
      shard.queue.pop_front();
      ++shard.calls;
      shard.bytes += bytes;
      in_flight_[next]->made = true;
      if (next == own_) {
        own_ready_ = true;
      } else {
        ready->push_back(next);
      }
    }
  }

  // Whether the calling thread's call may start, or will not be made.
  bool OwnDecided() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return own_ready_ || stopped_; }

  // A call failed for good: the calls not started are not made.
  void StopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    stopped_ = true;
    for (Shard& shard : shards_) {
      unfinished_ -= shard.queue.size();
      shard.queue.clear();
    }
  }

  // Through the callback API; the call's handler runs on a gRPC thread as soon as its response
  // is in, so that decoding one overlaps the others.
  void Start(size_t position) {
    const Call& call = calls_[pending_[position]];
    InFlight* raw = in_flight_[position].get();
    raw->context.set_deadline(GrpcDeadline(call.timeout));
    raw->task = connections_.TaskFor(call);
    raw->context.AddMetadata(kClientIdKey, connections_.client_id_);
    connections_.ConnectionFor(call, raw->task).stub->UnaryCall(
        &raw->context, kServicePrefix + call.method, grpc::StubOptions(), &raw->request,
        &raw->response, [this, position](grpc::Status status) { Done(position, status); });
  }

  // The last call, on a completion queue that this thread drives, which saves a thread switch
  // on each side of the common single call.
  void RunOwn() {
    const Call& call = calls_[pending_[own_]];
    InFlight* raw = in_flight_[own_].get();
    raw->context.set_deadline(GrpcDeadline(call.timeout));
    raw->task = connections_.TaskFor(call);
    raw->context.AddMetadata(kClientIdKey, connections_.client_id_);
    grpc::CompletionQueue queue;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader =
        connections_.ConnectionFor(call, raw->task).stub->PrepareUnaryCall(
            &raw->context, kServicePrefix + call.method, raw->request, &queue);
    reader->StartCall();
    grpc::Status status;
    reader->Finish(&raw->response, &status, raw);
    void* tag = nullptr;
    bool ok = false;
    queue.Next(&tag, &ok);  // Finish's event, the only one this queue gets.
    queue.Shutdown();
    while (queue.Next(&tag, &ok)) {
    }
    Done(own_, status);
  }

  // Call `position` ended with `status`: the next calls of its shard start before its handler
  // runs. `this` may be gone once it returns.
  void Done(size_t position, const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    const Call& call = calls_[pending_[position]];
    InFlight& state = *in_flight_[position];
    state.status = status;
    connections_.TakeWindow(call, state);
    const bool failed = !status.ok() && (!Retryable(call, FromGrpcStatus(status)) || last_);
    std::vector<size_t> ready;
    {
      absl::MutexLock lock(&mu_);
      Shard& shard = shards_[call.ps];
      --shard.calls;
      shard.bytes -= state.bytes;
      if (failed) {
        StopLocked();
      } else {
        TakeReadyLocked(call.ps, &ready);
      }
    }
    for (size_t next : ready) Start(next);
    state.Handle(call);
    absl::MutexLock lock(&mu_);
    // A handler's UNAVAILABLE is made again (RunCalls), not final: the others go on.
    if (!state.handled.ok() && (!absl::IsUnavailable(state.handled) || last_)) StopLocked();
    --unfinished_;
  }

  const PsConnections& connections_;
  const std::vector<Call>& calls_;
  const std::vector<size_t>& pending_;
  const std::vector<std::unique_ptr<InFlight>>& in_flight_;
  const bool last_;
  const size_t own_;  // The position of the calling thread's call: the last.

  absl::Mutex mu_;
  std::vector<Shard> shards_ ABSL_GUARDED_BY(mu_);
  size_t unfinished_ ABSL_GUARDED_BY(mu_);  // Calls neither done nor dropped by StopLocked.
  bool own_ready_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<PsConnections>> PsConnections::Create(
    const PsClientOptions& options) {
  if (options.ps_addresses.empty()) {
    return absl::InvalidArgumentError("no ps addresses: the cluster needs at least one ps task");
  }
  std::unique_ptr<PsConnections> connections(new PsConnections(options));
  for (size_t ps = 0; ps < options.ps_addresses.size(); ++ps) {
    absl::StatusOr<HostPort> address = ParseHostPort(options.ps_addresses[ps]);
    if (!address.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ps:", ps, ": ", address.status().message()));
    }
    connections->connections_.emplace_back();
    for (int c = 0; c < std::max(1, options.connections_per_ps); ++c) {
      grpc::ChannelArguments arguments;
      arguments.SetMaxReceiveMessageSize(options.max_message_bytes);
      arguments.SetMaxSendMessageSize(options.max_message_bytes);
      // A distinct argument per connection keeps gRPC from sharing one TCP connection.
      arguments.SetInt("ps.connection_index", c);
      SetQuickReconnect(&arguments, options.max_reconnect_backoff);
      SetKeepalive(&arguments);
      Connection connection;
      connection.channel = grpc::experimental::CreateCustomChannelWithInterceptors(
          address->ToString(), ChannelCredentialsFor(options.security), arguments,
          BearerTokenInterceptors(options.token));
      connection.stub = std::make_unique<grpc::GenericStub>(connection.channel);
      connections->connections_.back().push_back(std::move(connection));
    }
  }
  return connections;
}

PsConnections::PsConnections(const PsClientOptions& options)
    : options_(options),
      routes_(options.ps_addresses.size()),
      hung_at_(options.ps_addresses.size()),
      client_id_(RandomClientId()),
      windows_(options.ps_addresses.size()) {
  for (size_t shard = 0; shard < routes_.size(); ++shard) {
    routes_[shard] = static_cast<int>(shard);
    windows_[shard] = 0;
  }
}

int64_t PsConnections::WindowBytes(int ps, const std::string& method) const {
  if (!KeepsToWindow(method)) return options_.max_bytes_in_flight_per_ps;
  return std::min(options_.max_bytes_in_flight_per_ps,
                  windows_[ps].load(std::memory_order_relaxed));
}

void PsConnections::TakeWindow(const Call& call, const InFlight& state) const {
  const auto& trailers = state.context.GetServerTrailingMetadata();
  auto sent = trailers.find(kWindowKey);
  int64_t value = 0;
  if (sent != trailers.end() &&
      absl::SimpleAtoi(absl::string_view(sent->second.data(), sent->second.size()), &value) &&
      value > 0) {
    windows_[call.ps].store(value, std::memory_order_relaxed);
  } else if (state.status.ok() && (call.method == "Pull" || KeepsToWindow(call.method))) {
    // A ps without a budget answers its data calls with none. An error without one (refused
    // before the ps read the request, or no answer at all) leaves the window as it was.
    windows_[call.ps].store(options_.max_bytes_in_flight_per_ps, std::memory_order_relaxed);
  }
}

std::string PsConnections::ShardName(int ps) const {
  return absl::StrCat("ps:", ps, " (", options_.ps_addresses[ps], ")");
}

bool PsConnections::Retryable(const Call& call, const absl::Status& status) {
  // This client never cancels a call: a replicated call cancelled was cut off by its server
  // (one stopping), which its shard's other copy may answer.
  return absl::IsUnavailable(status) || (call.replicated && absl::IsCancelled(status));
}

int PsConnections::OtherCopy(int shard, int task) const {
  return task == shard ? (shard + 1) % num_ps() : shard;
}

bool PsConnections::LooksHung(const absl::Status& status) {
  // gRPC's words for it vary between versions ("keepalive watchdog timeout", "Keepalive
  // watchdog fired"). A deadline is not taken for it: a ps answers DEADLINE_EXCEEDED itself for
  // a pull that waited too long at a barrier.
  return absl::IsUnavailable(status) &&
         absl::StrContains(absl::AsciiStrToLower(status.message()), "keepalive");
}

bool PsConnections::RecentlyHung(int task) const {
  const int64_t at = hung_at_[task].load(std::memory_order_acquire);
  const absl::Duration window = std::min(options_.failover_patience / 2, absl::Seconds(5));
  return at != 0 && absl::Now() - absl::FromUnixNanos(at) < window;
}

void PsConnections::ForgiveHungBefore(int task, absl::Time alive_at) {
  int64_t at = hung_at_[task].load(std::memory_order_acquire);
  while (at != 0 && absl::FromUnixNanos(at) < alive_at &&
         !hung_at_[task].compare_exchange_weak(at, 0, std::memory_order_acq_rel)) {
  }
}

void PsConnections::Failover(int shard, int from, absl::string_view why) {
  const int to = OtherCopy(shard, from);
  // From the copy the failed call went to only: batches that failed on the same copy at once
  // switch the shard once, not back and forth. (The exchange overwrites `expected` on failure.)
  int expected = from;
  if (routes_[shard].compare_exchange_strong(expected, to, std::memory_order_acq_rel)) {
    LOG(INFO) << "shard " << shard << ": calls go to ps:" << to << " now (ps:" << from
              << (why.empty() ? std::string(")") : absl::StrCat(": ", why, ")"));
  }
}

int PsConnections::MovedRoute(const std::string& job_id, int shard) const {
  if (!any_moved_.load(std::memory_order_acquire)) return shard;
  absl::MutexLock lock(&moved_mu_);
  auto it = moved_.find({job_id, shard});
  return it == moved_.end() ? shard : it->second;
}

void PsConnections::MoveRoute(const std::string& job_id, int shard, int from, int to,
                              absl::string_view why) {
  if (to < 0 || to >= num_ps()) return;
  {
    absl::MutexLock lock(&moved_mu_);
    auto it = moved_.find({job_id, shard});
    if ((it == moved_.end() ? shard : it->second) != from) return;  // Moved since.
    if (to == shard) {
      if (it != moved_.end()) moved_.erase(it);
    } else {
      moved_[{job_id, shard}] = to;
      any_moved_.store(true, std::memory_order_release);
    }
  }
  LOG(INFO) << "job \"" << job_id << "\": shard " << shard << ": calls go to ps:" << to
            << " now (" << why << ")";
}

int PsConnections::TaskFor(const Call& call) const {
  if (call.replicated) return Route(call.ps);
  return call.routed ? MovedRoute(call.job_id, call.ps) : call.ps;
}

const PsConnections::Connection& PsConnections::ConnectionFor(const Call& call, int task) const {
  const std::vector<Connection>& shard = connections_[task];
  return shard[call.connection % shard.size()];
}

std::vector<std::unique_ptr<PsConnections::InFlight>> PsConnections::Attempt(
    const std::vector<Call>& calls, const std::vector<size_t>& pending, bool last) const {
  std::vector<std::unique_ptr<InFlight>> in_flight;
  for (size_t index : pending) {
    auto state = std::make_unique<InFlight>();
    state->request = calls[index].make_request();
    state->bytes =
        std::max(static_cast<int64_t>(state->request.Length()), calls[index].response_bytes);
    in_flight.push_back(std::move(state));
  }
  Window(*this, calls, pending, last, in_flight).Run();
  return in_flight;
}

absl::Status PsConnections::RunCalls(std::vector<Call> calls) {
  if (calls.empty()) return absl::OkStatus();
  std::vector<size_t> pending(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) pending[i] = i;
  absl::Duration backoff = options_.initial_backoff;
  bool failed_over = false;  // A first switch to a shard's other copy goes at once.
  absl::Time patient_until = absl::InfiniteFuture();  // Set at the first failure.
  bool kept_from_hung = false;  // Logged once: a shard's calls stayed off a hung copy.
  for (int attempt = 1;; ++attempt) {
    const bool replicated = std::any_of(pending.begin(), pending.end(),
                                        [&](size_t i) { return calls[i].replicated; });
    const bool last = attempt >= options_.max_attempts &&
                      !(replicated && absl::Now() < patient_until);
    std::vector<std::unique_ptr<InFlight>> in_flight = Attempt(calls, pending, last);
    absl::Status first_error;
    std::vector<size_t> retry;
    struct FailedOn {
      int task;
      std::string why;
    };
    std::map<int, FailedOn> switched;  // Shard -> where it failed: its calls go to the other.
    struct MovedTo {
      int from;
      int to;
      std::string why;
    };
    // (Job, shard) -> where it moved: its calls go there.
    std::map<std::pair<std::string, int>, MovedTo> moved;
    // (Job, shard) -> the task its routed calls could not reach, saying nothing of a move.
    std::map<JobShard, int> unreached;
    bool unmade = false;  // Calls the attempt let go of: another failed for good.
    for (size_t i = 0; i < pending.size(); ++i) {
      if (!in_flight[i]->made) {
        unmade = true;
        continue;
      }
      const Call& call = calls[pending[i]];
      absl::Status status = FromGrpcStatus(in_flight[i]->status);
      const int task = in_flight[i]->task;
      if (!status.ok() && LooksHung(status)) {
        hung_at_[task].store(absl::ToUnixNanos(absl::Now()), std::memory_order_release);
      }
      const std::optional<int> moved_to = call.routed && !call.replicated
                                              ? ShardMovedTo(in_flight[i]->status)
                                              : std::nullopt;
      if (moved_to.has_value() && !last) {
        moved.emplace(std::make_pair(call.job_id, call.ps),
                      MovedTo{task, *moved_to, std::string(status.message())});
        retry.push_back(pending[i]);
        continue;
      }
      if (status.ok()) {
        status = in_flight[i]->handled;
        if (absl::IsUnavailable(status) && !last && !call.once) {
          retry.push_back(pending[i]);  // Made again where it went: that copy answered.
          continue;
        }
      } else if (Retryable(call, status) && !last && !call.once) {
        retry.push_back(pending[i]);
        if (call.replicated && !in_flight[i]->RetryHere()) {
          const int other = OtherCopy(call.ps, task);
          if (std::optional<absl::Duration> age = PrimaryStreamAge(in_flight[i]->status)) {
            // `task` holds a backup that `other` streams to, over a stream opened `age` ago:
            // opened after `other` was taken for hung, it shows `other` is back.
            ForgiveHungBefore(other, absl::Now() - *age);
          }
          if (!RecentlyHung(other)) {
            switched.emplace(call.ps, FailedOn{task, std::string(status.message())});
          } else if (!kept_from_hung) {
            kept_from_hung = true;
            LOG(INFO) << "shard " << call.ps << ": calls stay on ps:" << task << " (ps:"
                      << other << " stopped answering just now; ps:" << task
                      << ": " << status.message() << ")";
          }
        }
        if (call.routed && !call.replicated && find_moved_shard_) {
          unreached.emplace(std::make_pair(call.job_id, call.ps), task);
        }
        continue;
      } else if (absl::IsUnavailable(status)) {
        status = absl::UnavailableError(absl::StrCat(
            status.message(), " (after ", attempt, " attempts; is the ps task running there?)"));
      }
      if (!status.ok() && first_error.ok()) {
        first_error = absl::Status(
            status.code(),
            absl::StrCat(ShardName(TaskFor(call)), ": ", call.method,
                         ": ", status.message()));
      }
    }
    if (!first_error.ok()) return first_error;
    if (unmade) {  // Never without a final error; were it so, they are made again.
      for (size_t i = 0; i < pending.size(); ++i) {
        if (!in_flight[i]->made) retry.push_back(pending[i]);
      }
      std::sort(retry.begin(), retry.end());
    }
    if (retry.empty()) return absl::OkStatus();
    if (patient_until == absl::InfiniteFuture()) {
      patient_until = absl::Now() + options_.failover_patience;
    }
    if (!unreached.empty()) {
      std::vector<JobShard> shards;
      std::set<int> tasks;
      for (const auto& [shard, task] : unreached) {
        if (moved.count(shard) > 0) continue;
        shards.push_back(shard);
        tasks.insert(task);
      }
      const std::map<JobShard, int> serving =
          shards.empty() ? std::map<JobShard, int>() : find_moved_shard_(shards, tasks);
      for (const auto& [shard, to] : serving) {
        const int task = unreached.at(shard);
        if (to == task || tasks.count(to) > 0) continue;
        moved.emplace(shard, MovedTo{task, to,
                                     absl::StrCat("ps:", task, " cannot be reached; ps:", to,
                                                  " serves the shard, moved there")});
      }
    }
    for (const auto& [shard, failed] : switched) Failover(shard, failed.task, failed.why);
    for (const auto& [shard, to] : moved) {
      MoveRoute(shard.first, shard.second, to.from, to.to, to.why);
    }
    if (!switched.empty() || !moved.empty()) {
      // Every call of a switched or moved shard goes again, answered or not: the chunks of a
      // push must all reach the copy that assembles them (a copy that applied it answers
      // DUPLICATE).
      for (size_t i = 0; i < calls.size(); ++i) {
        if ((calls[i].replicated && switched.count(calls[i].ps) > 0) ||
            (calls[i].routed && moved.count({calls[i].job_id, calls[i].ps}) > 0)) {
          retry.push_back(i);
        }
      }
      std::sort(retry.begin(), retry.end());
      retry.erase(std::unique(retry.begin(), retry.end()), retry.end());
    }
    if ((switched.empty() && moved.empty()) || failed_over) {
      absl::SleepFor(backoff);
      backoff = std::min(2 * backoff, switched.empty() ? options_.max_backoff
                                                       : 4 * options_.initial_backoff);
    }
    failed_over = failed_over || !switched.empty();
    pending = std::move(retry);
  }
}

}  // namespace ps
