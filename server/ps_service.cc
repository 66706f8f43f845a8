#include "server/ps_service.h"

#include <thread>

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <variant>
#include <utility>

#include <glog/logging.h>
#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/str_cat.h"
#include "common/cluster/host_port.h"
#include "common/job/job_schema.h"
#include "common/net/grpc_status.h"
#include "common/metrics/machine_info.h"
#include "common/security/peer_identity.h"
#include "common/net/proto_byte_buffer.h"
#include "common/tensor/tensor_coding.h"
#include "server/push_request.h"
#include "server/replica_input.h"

namespace ps {
namespace {

// Pulls end this long before the client's own deadline, so the client gets the server's
// explanation (who the barrier waits for) rather than a bare DEADLINE_EXCEEDED.
constexpr absl::Duration kDeadlineMargin = absl::Milliseconds(100);

// absl's codes are gRPC's, number for number.
grpc::StatusCode GrpcCode(const absl::Status& status) {
  return static_cast<grpc::StatusCode>(status.code());
}

}  // namespace

// One Pull call. It may finish at once (in Start), or later from whichever thread completes the
// parked pull: a push, the timer, OnCancel or Shutdown. ShardJob guarantees the result callback
// runs once; `mu_` orders it against Start's bookkeeping.
class ParameterService::PullReactor : public grpc::ServerUnaryReactor {
 public:
  // `slot` is the call's place among its peer's requests in flight, given back as it finishes.
  // The call counts in its job's traffic as `method`, with `received` bytes in.
  PullReactor(ParameterService* service, grpc::CallbackServerContext* context,
              grpc::ByteBuffer* response, RequestsInFlight::Slot slot, JobMethod method,
              int64_t received)
      : service_(service),
        context_(context),
        response_(response),
        slot_(std::move(slot)),
        method_(method),
        received_(received) {}

  // Answers `request` of `job` (found, and the caller allowed, by the handler), now or once it
  // may proceed; `push` (PushPull) goes into the header.
  void Start(std::shared_ptr<ShardJob> job, const PullRequest& request,
             std::optional<PushResponse> push = std::nullopt) {
    push_ = std::move(push);
    job_ = job;
    if (request.shared_memory() != 0) {
      absl::StatusOr<SharedMemoryRegistry::Region> region = PullRegion(request);
      if (!region.ok()) {
        if (!absl::IsUnavailable(region.status())) job->CountRejected("shared_memory");
        FinishWith(region.status());
        return;
      }
      region_ = *std::move(region);
    } else if (request.bulk_stream() != 0) {
      absl::StatusOr<std::shared_ptr<BulkStream>> stream = BulkStreamFor(request);
      if (stream.ok()) {
        bulk_ = *std::move(stream);
        bulk_frame_ = request.bulk_frame();
      } else if (!absl::IsUnavailable(stream.status())) {
        job->CountRejected("bulk_stream");
        FinishWith(stream.status());
        return;
      }
      // A stream this ps does not have (closed, or never here): the values go in the answer,
      // which the worker takes as such. Not an error: a PushPull's push is applied by now.
    }
    int64_t waiter = job->Pull(request, [this](absl::StatusOr<ShardJob::PullSnapshot> result) {
      OnResult(std::move(result));
    });
    // Start may run after the handler returned (a replicated push or rejoin went first), so the
    // call is never finished under mu_: OnDone may delete this reactor as soon as it is.
    std::optional<absl::StatusOr<ShardJob::PullSnapshot>> ready;
    bool cancel = false;
    {
      absl::MutexLock lock(&mu_);
      started_ = true;
      if (result_.has_value()) {
        ready = std::move(result_);
      } else if (cancelled_) {
        waiter_ = waiter;
        cancel = true;
      } else {
        waiter_ = waiter;
        absl::Duration wait = request.wait_timeout_ms() > 0
                                  ? absl::Milliseconds(request.wait_timeout_ms())
                                  : service_->options_.default_wait_timeout;
        absl::Time deadline = service_->options_.clock->Now() + wait;
        absl::Time client_deadline = absl::FromChrono(context_->deadline());
        if (client_deadline - kDeadlineMargin < deadline) {
          deadline = client_deadline - kDeadlineMargin;
        }
        std::weak_ptr<ShardJob> weak_job = job;
        // Under mu_, which a result takes before it finishes the call: OnDone reads it after.
        timer_handle_ = service_->timer_.Schedule(deadline, [weak_job, waiter] {
          if (std::shared_ptr<ShardJob> job = weak_job.lock()) job->ExpireWaiter(waiter);
        });
      }
    }
    if (ready.has_value()) {
      FinishWith(*std::move(ready));
    } else if (cancel) {
      // The job completes the waiter through OnResult, which finishes the call.
      job->CancelWaiter(waiter, absl::CancelledError("the client cancelled the pull"));
    }
  }

  // Keeps `charge` (the request's bytes in the byte budget) until the call is answered: given
  // back before the answer, after which its client may send its next call.
  void HoldUntilDone(ByteBudget::Charge charge) { request_charge_ = std::move(charge); }

  // Ends the call with `status` before any pull started (its push or rejoin failed); `job` is
  // null where the request named none found.
  void Fail(std::shared_ptr<ShardJob> job, const absl::Status& status) {
    job_ = std::move(job);
    FinishWith(status);
  }

  void OnCancel() override {
    int64_t waiter;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      waiter = waiter_;
    }
    if (waiter != 0) job_->CancelWaiter(waiter, absl::CancelledError("the client cancelled"));
  }

  void OnDone() override {
    if (timer_handle_ != 0) service_->timer_.Cancel(timer_handle_);
    delete this;
  }

 private:
  void OnResult(absl::StatusOr<ShardJob::PullSnapshot> result) {
    {
      absl::MutexLock lock(&mu_);
      if (!started_) {
        result_ = std::move(result);
        return;
      }
    }
    // Not under mu_: once finished, OnDone may delete this reactor on another thread at once.
    FinishWith(std::move(result));
  }

  // Finishes the call; `this` may be gone when it returns.
  void FinishWith(absl::StatusOr<ShardJob::PullSnapshot> result) {
    if (!result.ok()) {
      if (job_ != nullptr) job_->traffic().Count(method_, GrpcCode(result.status()), received_, 0);
      FinishCall(result.status());
      return;
    }
    if (push_.has_value()) *result->header.mutable_push() = *std::move(push_);
    if (region_.segment != nullptr) {
      // Into the pull's segment (PullRegion checked that the values fit); the answer carries
      // the header only.
      size_t floats = 0;
      for (absl::Span<const float> piece : result->pieces) floats += piece.size();
      if (floats > region_.pull.size()) {
        FinishWith(absl::InternalError("a pull's values outgrew its shared memory segment"));
        return;
      }
      float* to = region_.pull.data();
      for (absl::Span<const float> piece : result->pieces) {
        std::memcpy(to, piece.data(), piece.size() * sizeof(float));
        to += piece.size();
      }
      result->header.set_in_shared_memory(true);
      result->pieces.clear();
    } else if (bulk_ != nullptr && bulk_->Send(bulk_frame_, result->pieces, result->keep_alive).ok()) {
      // As frame bulk_frame_ on the stream; a stream that cannot take it leaves the values in
      // the answer.
      result->header.set_on_bulk_stream(true);
      result->pieces.clear();
    }
    *response_ = EncodeTensorMessage(result->header, result->pieces, result->keep_alive,
                                     result->header.encoding());
    job_->traffic().Count(method_, grpc::StatusCode::OK, received_, response_->Length());
    FinishCall(absl::OkStatus());
  }

  // Gives the request's bytes back to the byte budget, then finishes the call with `status`.
  void FinishCall(const absl::Status& status) {
    request_charge_.reset();
    ParameterService::Finish(this, &slot_, status);
  }

  // The bulk stream a pull names: its worker's, for dense float32 values.
  absl::StatusOr<std::shared_ptr<BulkStream>> BulkStreamFor(const PullRequest& request) const {
    if (!request.sparse().empty() || request.encoding() != FLOAT32) {
      return absl::InvalidArgumentError(absl::StrCat(
          JobPrefix(request.job_id()), "a pull on a bulk stream reads dense float32 values "
          "only: no sparse rows or 16-bit encoding"));
    }
    return service_->BulkStreamOf(request.bulk_stream(), request.job_id(), request.worker());
  }

  // The segment a pull into shared memory names, checked to hold the values it asks for.
  absl::StatusOr<SharedMemoryRegistry::Region> PullRegion(const PullRequest& request) const {
    if (!request.sparse().empty() || request.encoding() != FLOAT32) {
      return absl::InvalidArgumentError(absl::StrCat(
          JobPrefix(request.job_id()), "a pull through shared memory reads dense float32 values "
          "only: no sparse rows or 16-bit encoding"));
    }
    absl::StatusOr<SharedMemoryRegistry::Region> region =
        service_->SharedMemoryOf(request.shared_memory(), request.job_id(), request.worker());
    if (!region.ok()) return region.status();
    int64_t floats = 0;
    if (request.slices().empty()) {
      floats = job_->num_parameters();
    } else {
      for (const SliceRef& ref : request.slices()) {
        for (const VariableDef& variable : job_->spec().variables()) {
          if (variable.name() != ref.variable()) continue;
          int64_t row_size = 1;
          for (int d = 1; d < variable.shape_size(); ++d) row_size *= variable.shape(d);
          // At most the region's floats count: larger row counts are refused below without
          // overflowing (the job's variables are validated: row_size >= 1 and fits).
          const int64_t most = static_cast<int64_t>(region->pull.size()) / row_size + 1;
          floats += std::min<int64_t>(std::max<int64_t>(ref.row_count(), 0), most) * row_size;
          if (floats > static_cast<int64_t>(region->pull.size())) break;
        }
      }
    }
    if (floats > static_cast<int64_t>(region->pull.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          JobPrefix(request.job_id()), "the pull asks for ", floats,
          " floats, more than its segment's ", region->pull.size(), " hold"));
    }
    return region;
  }

  ParameterService* const service_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const response_;
  RequestsInFlight::Slot slot_;  // Released by whichever thread finishes the call.
  const JobMethod method_;
  const int64_t received_;
  std::shared_ptr<ShardJob> job_;  // Set before a result can arrive.
  std::optional<PushResponse> push_;  // Written in Start, before the result can arrive.
  uint64_t timer_handle_ = 0;         // Written in Start before any path can reach OnDone.
  SharedMemoryRegistry::Region region_;  // A pull into shared memory's; written in Start.
  std::shared_ptr<BulkStream> bulk_;  // A pull on a bulk stream's; written in Start.
  uint64_t bulk_frame_ = 0;
  // Written before any path can finish the call; reset only by the one that does.
  ByteBudget::Charge request_charge_;

  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int64_t waiter_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::StatusOr<ShardJob::PullSnapshot>> result_ ABSL_GUARDED_BY(mu_);
};

namespace {

// Three quarters of the memory this process may use: the machine's, or its container's (cgroup)
// limit when that is lower, so that a job too large is refused rather than the ps killed.
int64_t DefaultTotalBytes() {
  const int64_t usable = UsableMemoryBytes();
  return usable > 0 ? usable / 4 * 3 : int64_t{16} << 30;
}

// --max_inflight_mb's bytes: `configured`, or where -1 the quarter of the memory this process may
// use that DefaultTotalBytes leaves to traffic.
int64_t InflightBytes(int64_t configured) {
  if (configured >= 0) return configured;
  const int64_t usable = UsableMemoryBytes();
  return usable > 0 ? usable / 4 : int64_t{1} << 30;
}

// The shared memory segments for this host's workers, or null: none asked for, or the handout's
// socket could not be made (logged; every tensor then goes in the requests).
std::unique_ptr<SharedMemoryRegistry> StartSharedMemory(const ParameterServiceOptions& options,
                                                        const std::string& task) {
  if (options.shared_memory_bytes <= 0) return nullptr;
  absl::StatusOr<std::unique_ptr<SharedMemoryRegistry>> registry =
      SharedMemoryRegistry::Create(options.shared_memory_dir, options.shared_memory_bytes);
  if (!registry.ok()) {
    LOG(WARNING) << task << " serves no shared memory to workers on its host ("
                 << registry.status().message() << "); their tensors go in their requests";
    return nullptr;
  }
  return *std::move(registry);
}

// The bulk streams for workers' large pulls, or null: none asked for, or their port could not be
// bound (logged; every pull's values then go in its answer).
std::unique_ptr<BulkStreams> StartBulkStreams(const ParameterServiceOptions& options,
                                              const std::string& task) {
  if (options.bulk_port < 0) return nullptr;
  absl::StatusOr<std::unique_ptr<BulkStreams>> streams =
      BulkStreams::Start(options.bulk_host, options.bulk_port);
  if (!streams.ok()) {
    LOG(WARNING) << task << " opens no bulk streams (" << streams.status().message()
                 << "); pulls' values go in their answers";
    return nullptr;
  }
  LOG(INFO) << task << ": bulk streams on port " << (*streams)->port();
  return *std::move(streams);
}

}  // namespace

ParameterService::ParameterService(const ParameterServiceOptions& options)
    : options_(options),
      worker_hosts_(HostsOf(options.worker_addresses)),
      checkpoints_(options.file_system, options.checkpoint_dir),
      max_total_bytes_(options.limits.max_total_bytes > 0 ? options.limits.max_total_bytes
                                                          : DefaultTotalBytes()),
      requests_in_flight_(options.limits.max_requests_per_peer, TaskName()),
      byte_budget_(ByteBudget::Create(
          InflightBytes(options.limits.max_inflight_bytes), TaskName(), &timer_,
          [this](std::function<void()> work) { RunOnPushThread(std::move(work)); },
          options.clock)),
      shared_memory_(StartSharedMemory(options, TaskName())),
      bulk_streams_(StartBulkStreams(options, TaskName())),
      timer_(DeadlineTimerOptions{options.clock}) {
  ps_addresses_ = options.ps_addresses;
  // As many as the cores: pushes let in by the budget decode and apply in parallel.
  const int threads = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  for (int i = 0; i < threads; ++i) push_threads_.push_back(std::make_unique<IoThread>());
}

ParameterService::~ParameterService() { Shutdown(); }

void ParameterService::RunOnPushThread(std::function<void()> work) {
  const uint64_t next = next_push_thread_.fetch_add(1, std::memory_order_relaxed);
  push_threads_[next % push_threads_.size()]->Schedule(std::move(work));
}

grpc::ServerUnaryReactor* ParameterService::Admit(grpc::CallbackServerContext* context,
                                                  absl::string_view method, AccessRule rule,
                                                  RequestsInFlight::Slot* slot, Peer* peer_out) {
  const Peer peer = PeerOf(*context);
  absl::Status allowed = rule != nullptr ? rule(peer, method) : absl::OkStatus();
  if (allowed.ok()) {
    absl::StatusOr<RequestsInFlight::Slot> taken =
        requests_in_flight_.Take(PeerKey(peer, context->peer()));
    if (taken.ok()) {
      *slot = *std::move(taken);
      if (peer_out != nullptr) *peer_out = peer;
      return nullptr;
    }
    allowed = taken.status();
  }
  RequestsInFlight::Slot none;
  return Answer(context, &none, allowed);
}

void ParameterService::Finish(grpc::ServerUnaryReactor* reactor, RequestsInFlight::Slot* slot,
                              const absl::Status& status) {
  slot->Release();
  reactor->Finish(ToGrpcStatus(status));
}

grpc::ServerUnaryReactor* ParameterService::Answer(grpc::CallbackServerContext* context,
                                                   RequestsInFlight::Slot* slot,
                                                   const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Finish(reactor, slot, status);
  return reactor;
}

std::string ParameterService::TaskName() const { return absl::StrCat("ps:", options_.ps_index); }

void ParameterService::Shutdown() {
  std::map<std::string, std::shared_ptr<ShardJob>> jobs;
  std::map<ShardKey, std::shared_ptr<ShardReplicator>> replicators;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    jobs = jobs_;
    replicators.swap(replicators_);
    for (const auto& [key, copy] : backups_) {
      if (copy.promoted) jobs.emplace(absl::StrCat(key.first, "@", key.second), copy.job);
    }
  }
  byte_budget_->CancelWaiters(
      absl::UnavailableError(TaskName() + " is shutting down; retry once it is back"));
  // Pushes waiting for their frames are answered UNAVAILABLE (on push_threads_, still here).
  if (bulk_streams_ != nullptr) bulk_streams_->DropAll();
  // Stopped first: updates waiting for a backup are answered UNAVAILABLE.
  replicators.clear();
  for (auto& [id, job] : jobs) {
    job->CancelAllWaiters(
        absl::UnavailableError(TaskName() + " is shutting down; retry once it is back"));
  }
}

absl::StatusOr<std::shared_ptr<ShardJob>> ParameterService::FindJobFor(
    const Peer& peer, const std::string& job_id, JobAccess access, absl::string_view method,
    std::optional<int> shard, bool unreplicated) {
  const bool other_shard = shard.has_value() && *shard != options_.ps_index;
  absl::StatusOr<std::shared_ptr<ShardJob>> job =
      other_shard ? (unreplicated ? MovedInCopy(job_id, *shard, peer, access, method)
                                  : PromotedCopy(job_id, *shard, peer, access, method))
                  : FindJob(job_id);
  if (shard.has_value() && !unreplicated && absl::IsNotFound(job.status())) {
    // Its own shard, which this ps no longer serves (it was started again): a backup of it,
    // installed by the ps that took it over, takes it back once that one is gone.
    absl::StatusOr<std::shared_ptr<ShardJob>> copy =
        PromotedCopy(job_id, *shard, peer, access, method);
    if (copy.ok()) job = std::move(copy);
  }
  if (shard.has_value() && !unreplicated && absl::IsNotFound(job.status())) {
    // A replicated job's request (it names its shard) to a ps that does not hold the shard: one
    // restarted empty, whose shard its backup took over. The shard's other copy answers.
    return absl::UnavailableError(absl::StrCat(
        job.status().message(), "; shard ", *shard,
        " of a replicated job is then served by its other copy, on ps:",
        (*shard + 1) % options_.num_ps));
  }
  if (!job.ok()) return job;
  absl::Status allowed = RequireJobAccess(peer, (*job)->spec().owner(), job_id, access, method);
  if (!allowed.ok()) return allowed;
  if (std::shared_ptr<ShardReplicator> replicator = ReplicatorFor(*job)) {
    // No wait while the shard goes back to its own ps (no handler waits on another call): the
    // worker tries the two copies until one serves (PsClientOptions::failover_patience).
    absl::Status fenced = replicator->Fenced();
    if (!fenced.ok()) return fenced;
  }
  return job;
}

absl::StatusOr<std::shared_ptr<ShardJob>> ParameterService::FindJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) {
    return absl::UnavailableError(TaskName() + " is shutting down; retry once it is back");
  }
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown job \"", job_id, "\" on ", TaskName(),
                                            ": create it first (CreateJob), or check the id"));
  }
  return it->second;
}

absl::Status ParameterService::CheckTask(int num_ps, int ps_index) const {
  if (num_ps == options_.num_ps && ps_index == options_.ps_index) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("this server is ps:", options_.ps_index, " of ", options_.num_ps,
                   " but the request is for ps:", ps_index, " of ", num_ps,
                   "; the client and the servers must use the same ClusterSpec"));
}

absl::Status ParameterService::CheckInitialValuesGiven(const CreateJobRequest& request) const {
  const std::string& id = request.spec().job_id();
  if (request.spec().chief_initializes() && request.replaying()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job \"", id, "\" started at its chief's values, which the apply log does not record: "
        "it cannot be replayed"));
  }
  if (request.spec().chief_initializes() && !request.from_chief()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job \"", id, "\" takes its initial values from its chief (worker 0), which has not "
        "created it on ", TaskName(), " yet; the other workers wait for it (PsClient::CreateJob)"));
  }
  if (!request.spec().chief_initializes() &&
      (request.from_chief() || !request.initial_values().empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job \"", id, "\": initial values were sent for a job whose variables start at their "
        "initializers; set ParameterSpec.chief_initializes to start from the chief's"));
  }
  return absl::OkStatus();
}

namespace {

// Whether a create's `requested` spec is the job's `existing` one, or, for a job that grew past
// its ClusterSpec (ParameterSpec.worker_addresses), one it had: a worker started with the
// ClusterSpec the job began with, or one it grew to since, creates the job as it was then.
bool SameJob(const ParameterSpec& existing, const ParameterSpec& requested) {
  if (existing.worker_addresses_size() == 0 || requested.worker_addresses_size() > 0 ||
      requested.num_workers() < existing.workers_before_growth() ||
      requested.num_workers() > existing.num_workers()) {
    return google::protobuf::util::MessageDifferencer::Equals(existing, requested);
  }
  return google::protobuf::util::MessageDifferencer::Equals(WithoutMembership(existing),
                                                            WithoutMembership(requested));
}

}  // namespace

absl::StatusOr<CreateJobResponse> ParameterService::DoCreateJob(const CreateJobRequest& request) {
  absl::Status task = CheckTask(request.num_ps(), request.ps_index());
  if (!task.ok()) return task;
  const std::string& id = request.spec().job_id();
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError(TaskName() + " is shutting down");
    // A replicated job whose shard this ps holds as a backup (it was started again, and the
    // next ps serves the shard now): the job exists; a fresh shard would shadow the real one.
    auto copy = backups_.find({id, options_.ps_index});
    if (copy != backups_.end() && jobs_.count(id) == 0) {
      CreateJobResponse response;
      response.set_already_existed(true);
      for (const SliceRef& ref : copy->second.job->SliceRefs()) *response.add_slices() = ref;
      response.set_num_parameters(copy->second.job->num_parameters());
      return response;
    }
    auto it = jobs_.find(id);
    if (it != jobs_.end()) {
      if (!SameJob(it->second->spec(), request.spec())) {
        return absl::AlreadyExistsError(
            absl::StrCat("job \"", id, "\" already exists on ", TaskName(),
                         " with a different spec; delete it first or use another id"));
      }
      CreateJobResponse response;
      response.set_already_existed(true);
      for (const SliceRef& ref : it->second->SliceRefs()) *response.add_slices() = ref;
      response.set_num_parameters(it->second->num_parameters());
      return response;
    }
  }
  absl::Status values = CheckInitialValuesGiven(request);
  if (!values.ok()) return values;
  absl::Status replicas = CheckReplicas(request.spec());
  if (!replicas.ok()) return replicas;
  if (request.spec().replicas() > 1 && request.replaying()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job \"", id, "\": a replay runs without replicas; set replicas to 0 for it"));
  }
  absl::StatusOr<std::unique_ptr<Reservation>> reserved = Reserve(request.spec());
  if (!reserved.ok()) return reserved.status();
  // Initializing may take a while for big models: done outside the lock.
  absl::StatusOr<std::unique_ptr<ShardJob>> created =
      ShardJob::Create(request.spec(), options_.num_ps, options_.ps_index, options_.clock);
  if (!created.ok()) return created.status();
  if (request.spec().chief_initializes()) {
    values = (*created)->SetInitialValues(request.initial_values());
    if (!values.ok()) return values;
  }
  if (request.replaying()) (*created)->StartReplay(request.replay());
  std::shared_ptr<ShardJob> job = *std::move(created);
  job->UseByteBudget(byte_budget_);
  // Made before the job is found by any call, so that every change to it is replicated; a
  // replicator left unused (the job was created concurrently) stops as the function returns.
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = jobs_.emplace(id, job);
  // Under the lock that makes the job found, so that every change to it is replicated.
  if (inserted) {
    if (std::shared_ptr<ShardReplicator> replicator =
            MakeReplicatorLocked(job, (options_.ps_index + 1) % options_.num_ps)) {
      replicators_[{id, options_.ps_index}] = std::move(replicator);
    }
  }
  if (!inserted && !SameJob(it->second->spec(), request.spec())) {
    return absl::AlreadyExistsError(absl::StrCat("job \"", id,
                                                 "\" was created concurrently with a "
                                                 "different spec; delete it first"));
  }
  CreateJobResponse response;
  response.set_already_existed(!inserted);
  for (const SliceRef& ref : it->second->SliceRefs()) *response.add_slices() = ref;
  response.set_num_parameters(it->second->num_parameters());
  if (inserted) {
    LOG(INFO) << "created job " << id << ": " << response.slices_size() << " slices, "
              << response.num_parameters() << " parameters on " << TaskName();
    WatchLeases(id, it->second);
  }
  return response;
}

grpc::ServerUnaryReactor* ParameterService::CreateJob(grpc::CallbackServerContext* context,
                                                      const CreateJobRequest* request,
                                                      CreateJobResponse* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "CreateJob", RequireMember, &slot, &peer)) {
    return refused;
  }
  // A job a user creates (psctl replay) is that user's; a task creates it for the owner the
  // worker recorded when the user started it (StartJob).
  std::optional<CreateJobRequest> owned;
  if (peer.role == Peer::Role::kUser) {
    owned = *request;
    owned->mutable_spec()->set_owner(peer.name);
  }
  // A job's starting values are its chief's to give, not any member's.
  absl::Status chief =
      request->from_chief()
          ? RequireWorkerHost(peer, /*worker=*/0, worker_hosts_, "CreateJob")
          : absl::OkStatus();
  if (!chief.ok()) return Answer(context, &slot, chief);
  absl::StatusOr<CreateJobResponse> result = DoCreateJob(owned ? *owned : *request);
  if (result.ok()) *response = *std::move(result);
  return Answer(context, &slot, result.status());
}

grpc::ServerUnaryReactor* ParameterService::DeleteJob(grpc::CallbackServerContext* context,
                                                      const DeleteJobRequest* request,
                                                      DeleteJobResponse* /*response*/) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused = Admit(context, "DeleteJob", RequireUser, &slot, &peer)) {
    return refused;
  }
  std::shared_ptr<ShardJob> job;
  std::vector<std::shared_ptr<ShardReplicator>> replicators;  // Stopped outside mu_.
  std::vector<std::shared_ptr<ShardJob>> promoted;  // Copies of shards it served for others.
  absl::Status allowed;
  bool copies_only = false;  // This ps held the job only as copies of other shards.
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(request->job_id());
    auto copy = backups_.lower_bound({request->job_id(), -1});
    auto arriving = incoming_.lower_bound({request->job_id(), -1});
    const bool has_copy = copy != backups_.end() && copy->first.first == request->job_id();
    // A move's copy coming in (one that adopts the job too) goes with the job.
    const bool has_incoming =
        arriving != incoming_.end() && arriving->first.first == request->job_id();
    if (it == jobs_.end() && (has_copy || has_incoming)) {
      const ShardJob& held = has_copy ? *copy->second.job : *arriving->second.job;
      allowed = RequireOwner(peer, held.spec().owner(), request->job_id(), "delete");
      if (allowed.ok()) {
        ForgetCopiesLocked(request->job_id(), &replicators, &promoted);
        copies_only = true;
      }
    }
    if (it != jobs_.end()) {
      allowed = RequireOwner(peer, it->second->spec().owner(), request->job_id(), "delete");
      if (allowed.ok()) {
        job = std::move(it->second);
        jobs_.erase(it);
        ForgetCopiesLocked(request->job_id(), &replicators, &promoted);
      }
    }
  }
  replicators.clear();
  for (const std::shared_ptr<ShardJob>& copy : promoted) {
    copy->CancelAllWaiters(absl::AbortedError(
        absl::StrCat("job \"", request->job_id(), "\" was deleted while this pull waited")));
  }
  if (copies_only) return Answer(context, &slot, absl::OkStatus());
  if (job == nullptr) {
    return Answer(context, &slot,
                  allowed.ok() ? absl::NotFoundError(absl::StrCat(
                                     "unknown job \"", request->job_id(), "\" on ", TaskName()))
                               : allowed);
  }
  job->CancelAllWaiters(absl::AbortedError(
      absl::StrCat("job \"", request->job_id(), "\" was deleted while this pull waited")));
  job.reset();
  if (shared_memory_ != nullptr) shared_memory_->DropJob(request->job_id());
  if (bulk_streams_ != nullptr) bulk_streams_->DropJob(request->job_id());
  // The process keeps freed memory for the next tensors (TuneForTensorTraffic); a deleted job's
  // goes back to the system.
  malloc_trim(0);
  LOG(INFO) << "deleted job " << request->job_id();
  return Answer(context, &slot, absl::OkStatus());
}

grpc::ServerUnaryReactor* ParameterService::Pull(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused = Admit(context, "Pull", RequireMember, &slot, &peer)) {
    return refused;
  }
  PullRequest pull;
  absl::Status status = ParseFromByteBuffer(*request, &pull);
  if (status.ok()) status = RequireWorker(peer, pull.job_id(), pull.worker(), "Pull");
  absl::StatusOr<std::shared_ptr<ShardJob>> job =
      status.ok() ? FindJobFor(peer, pull.job_id(), JobAccess::kData, "Pull",
                               pull.has_shard() ? std::optional<int>(pull.shard()) : std::nullopt,
                               pull.unreplicated())
                  : status;
  if (!job.ok()) return Answer(context, &slot, job.status());
  SendWindow(context, pull.job_id());
  auto* reactor = new PullReactor(this, context, response, std::move(slot), JobMethod::kPull,
                                  request->Length());
  // A pull of a worker's new incarnation changes the shard (it rejoins).
  absl::ReaderMutexLock direct(&move_gate_);
  absl::StatusOr<std::shared_ptr<ShardReplicator>> changes = ChangesThrough(*job);
  if (!changes.ok()) {
    reactor->Fail(*job, changes.status());
    return reactor;
  }
  std::shared_ptr<ShardReplicator> replicator = *std::move(changes);
  if (replicator != nullptr && pull.incarnation() != OBSERVER_INCARNATION &&
      (*job)->IsNewIncarnation(pull.worker(), pull.incarnation())) {
    // A worker's new incarnation changes the shard (it rejoins): both copies take it first.
    ReplicaInput rejoin;
    rejoin.mutable_rejoin()->set_worker(pull.worker());
    rejoin.mutable_rejoin()->set_incarnation(pull.incarnation());
    rejoin.mutable_rejoin()->set_clock(pull.clock());
    auto rejoined = [reactor, job = *job, pull](absl::StatusOr<ReplicaOutcome> outcome) {
      if (outcome.ok()) {
        reactor->Start(job, pull);
      } else {
        reactor->Fail(job, outcome.status());
      }
    };
    // A move's copy applies it at once.
    if (auto now = replicator->Submit(std::move(rejoin), rejoined)) rejoined(*std::move(now));
    return reactor;
  }
  reactor->Start(*std::move(job), pull);
  return reactor;
}

grpc::ServerUnaryReactor* ParameterService::PushPull(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "PushPull", RequireMember, &slot, &peer)) {
    return refused;
  }
  auto* reactor = new PullReactor(this, context, response, std::move(slot), JobMethod::kPushPull,
                                  request->Length());
  reactor->HoldUntilDone(byte_budget_->ChargeRequest(request->Length()));
  DecodePushInBudget(
      context, peer, request, /*allow_chunks=*/false, nullptr,
      [this, reactor](std::shared_ptr<ShardJob> job, const PushRequestHeader& header,
                      absl::StatusOr<DecodedPush> decoded) {
        if (!decoded.ok()) {
          reactor->Fail(job, decoded.status());
          return;
        }
        PullRequest pull = header.then_pull();
        pull.set_job_id(header.job_id());
        pull.set_worker(header.worker());
        pull.set_run_id(header.run_id());
        if (header.has_shard()) pull.set_shard(header.shard());
        auto then_pull = [reactor, job, pull](absl::StatusOr<PushResponse> pushed) {
          if (pushed.ok()) {
            reactor->Start(job, pull, *std::move(pushed));
          } else {
            reactor->Fail(job, pushed.status());
          }
        };
        if (PushResponse* answer = std::get_if<PushResponse>(&*decoded)) {
          then_pull(*answer);
        } else {
          ApplyPush(job, std::get<ShardJob::ReadyPush>(*std::move(decoded)),
                    std::move(then_pull));
        }
      });
  return reactor;
}

absl::StatusOr<DecodedPush> ParameterService::DoDecodePush(
    const Peer& peer, const grpc::ByteBuffer& request, bool allow_chunks,
    PushRequestHeader* header, std::shared_ptr<ShardJob>* job, PushAdmission* admission) {
  const char* method = allow_chunks ? "Push" : "PushPull";
  return DecodePush(
      request, allow_chunks,
      [&](const PushRequestHeader& decoded) -> absl::StatusOr<std::shared_ptr<ShardJob>> {
        absl::Status allowed =
            RequireWorker(peer, decoded.job_id(), decoded.worker(), method);
        if (!allowed.ok()) return allowed;
        absl::StatusOr<std::shared_ptr<ShardJob>> found = FindJobFor(
            peer, decoded.job_id(), JobAccess::kData, method,
            decoded.has_shard() ? std::optional<int>(decoded.shard()) : std::nullopt,
            decoded.unreplicated());
        if (!found.ok() || admission == nullptr) return found;
        const int64_t bytes = (*found)->NewPushBufferBytes(decoded);
        if (bytes == 0) return found;
        admission->reservation =
            byte_budget_->TryReserveBuffer(bytes, ShardJob::PushGroup(decoded));
        if (admission->reservation != nullptr) return found;
        admission->wait_bytes = bytes;
        admission->parked = ShardJob::ParkPush(*found, decoded.worker());
        // Stops the decoder before anything is taken; the caller parks the call.
        return absl::ResourceExhaustedError("no room in the byte budget now");
      },
      header, job,
      [this](const PushRequestHeader& decoded) {
        return SharedMemoryOf(decoded.shared_memory(), decoded.job_id(), decoded.worker());
      });
}

void ParameterService::ApplyPush(const std::shared_ptr<ShardJob>& job, ShardJob::ReadyPush push,
                                 std::function<void(absl::StatusOr<PushResponse>)> done) {
  std::optional<absl::StatusOr<PushResponse>> answer;  // Unset: the replicator answers.
  {
    absl::ReaderMutexLock direct(&move_gate_);
    absl::StatusOr<std::shared_ptr<ShardReplicator>> replicator = ChangesThrough(job);
    if (!replicator.ok()) {
      answer = replicator.status();
    } else if (*replicator != nullptr) {
      ReplicaInput input = PushInput(push);
      std::optional<absl::StatusOr<ReplicaOutcome>> now = (*replicator)->Submit(
          std::move(input),
          [done](absl::StatusOr<ReplicaOutcome> outcome) {
            done(outcome.ok() ? absl::StatusOr<PushResponse>(outcome->push()) : outcome.status());
          },
          std::move(push));
      if (now.has_value()) {  // A move's copy applied it at once.
        answer = now->ok() ? absl::StatusOr<PushResponse>((*now)->push()) : now->status();
      }
    } else {
      answer = job->Push(push.header, *push.buffer, push.known_finite);
    }
  }
  if (answer.has_value()) done(*std::move(answer));
}

void ParameterService::ApplyInput(const std::shared_ptr<ShardJob>& job, ReplicaInput input,
                                  ShardReplicator::Done done) {
  std::optional<absl::StatusOr<ReplicaOutcome>> answer;  // Unset: the replicator answers.
  {
    absl::ReaderMutexLock direct(&move_gate_);
    absl::StatusOr<std::shared_ptr<ShardReplicator>> replicator = ChangesThrough(job);
    if (!replicator.ok()) {
      answer = replicator.status();
    } else if (*replicator != nullptr) {
      answer = (*replicator)->Submit(std::move(input), done);  // Set where applied at once.
    } else {
      answer = ApplyReplicaInput(*job, input);
    }
  }
  if (answer.has_value()) done(*std::move(answer));
}

grpc::ServerUnaryReactor* ParameterService::Push(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused = Admit(context, "Push", RequireMember, &slot, &peer)) {
    return refused;
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  DecodePushInBudget(
      context, peer, request, /*allow_chunks=*/true, nullptr,
      [this, reactor, response, received = request->Length(),
       slot = std::make_shared<RequestsInFlight::Slot>(std::move(slot)),
       charge = std::make_shared<ByteBudget::Charge>(byte_budget_->ChargeRequest(
           request->Length()))](std::shared_ptr<ShardJob> job, const PushRequestHeader& header,
                                absl::StatusOr<DecodedPush> decoded) {
        auto answer = [reactor, response, job, received, slot, charge](
                          absl::StatusOr<PushResponse> result) {
          if (result.ok()) *response = SerializeToByteBuffer(*result);
          if (job != nullptr) {
            job->traffic().Count(JobMethod::kPush, GrpcCode(result.status()), received,
                                 result.ok() ? response->Length() : 0);
          }
          // The request's bytes go back before its answer, after which its client may send
          // the next: they are never counted with the next call's.
          charge->reset();
          Finish(reactor, slot.get(), result.status());
        };
        auto settle = [this, job, answer](SettledPush settled) {
          if (!settled.ok()) {
            answer(settled.status());
          } else if (PushResponse* answered = std::get_if<PushResponse>(&*settled)) {
            answer(*answered);
          } else {
            ApplyPush(job, std::get<ShardJob::ReadyPush>(*std::move(settled)), answer);
          }
        };
        if (decoded.ok() && std::holds_alternative<AwaitedFrame>(*decoded)) {
          ReceiveBulkPush(header, std::get<AwaitedFrame>(*std::move(decoded)), settle);
          return;
        }
        // Only a caller let in as the header's worker (its job found) speaks for its stream.
        if (job != nullptr && header.bulk_stream() != 0) RefuseBulkFrame(header);
        if (!decoded.ok()) {
          settle(decoded.status());
        } else if (PushResponse* answered = std::get_if<PushResponse>(&*decoded)) {
          settle(*answered);
        } else {
          settle(std::get<ShardJob::ReadyPush>(*std::move(decoded)));
        }
      });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterService::LeaveJob(grpc::CallbackServerContext* context,
                                                     const LeaveJobRequest* request,
                                                     LeaveJobResponse* /*response*/) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "LeaveJob", RequireMember, &slot, &peer)) {
    return refused;
  }
  absl::Status allowed =
      RequireWorker(peer, request->job_id(), request->worker(), "LeaveJob");
  if (!allowed.ok()) return Answer(context, &slot, allowed);
  absl::StatusOr<std::shared_ptr<ShardJob>> job =
      FindJobFor(peer, request->job_id(), JobAccess::kData, "LeaveJob",
                 request->has_shard() ? std::optional<int>(request->shard()) : std::nullopt,
                 request->unreplicated());
  if (!job.ok()) return Answer(context, &slot, job.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ReplicaInput leave;
  *leave.mutable_leave() = *request;
  ApplyInput(*job, std::move(leave),
             [this, reactor, id = request->job_id(), worker = request->worker(), job = *job,
              slot = std::make_shared<RequestsInFlight::Slot>(std::move(slot))](
                 absl::StatusOr<ReplicaOutcome> left) {
               if (left.ok() && shared_memory_ != nullptr) {
                 shared_memory_->DropWorker(id, worker);
               }
               if (left.ok() && bulk_streams_ != nullptr) bulk_streams_->DropWorker(id, worker);
               if (left.ok() && job->AllWorkersLeft()) ForgetAfterRetention(id, job);
               Finish(reactor, slot.get(), left.status());
             });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterService::NextBatches(grpc::CallbackServerContext* context,
                                                        const NextBatchesRequest* request,
                                                        NextBatchesResponse* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "NextBatches", RequireMember, &slot, &peer)) {
    return refused;
  }
  absl::Status allowed =
      RequireWorker(peer, request->job_id(), request->worker(), "NextBatches");
  if (!allowed.ok()) return Answer(context, &slot, allowed);
  absl::StatusOr<std::shared_ptr<ShardJob>> job =
      FindJobFor(peer, request->job_id(), JobAccess::kData, "NextBatches",
                 request->has_shard() ? std::optional<int>(request->shard()) : std::nullopt,
                 request->unreplicated());
  if (!job.ok()) return Answer(context, &slot, job.status());
  // A replicated shard hands batches out on both copies, in the order of its other inputs.
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ReplicaInput input;
  *input.mutable_next_batches() = *request;
  ApplyInput(*job, std::move(input),
             [reactor, response, slot = std::make_shared<RequestsInFlight::Slot>(std::move(slot))](
                 absl::StatusOr<ReplicaOutcome> outcome) {
               if (outcome.ok()) *response = outcome->batches();
               Finish(reactor, slot.get(), outcome.status());
             });
  return reactor;
}

void ParameterService::WatchLeases(const std::string& id, const std::weak_ptr<ShardJob>& job) {
  const std::shared_ptr<ShardJob> alive = job.lock();
  if (alive == nullptr || alive->spec().worker_lease_ms() <= 0) return;
  const absl::Duration lease = absl::Milliseconds(alive->spec().worker_lease_ms());
  const absl::Time next = options_.clock->Now() + std::max(lease / 4, absl::Milliseconds(50));
  timer_.Schedule(next, [this, id, job, lease, next] {
    const std::shared_ptr<ShardJob> watched = job.lock();
    if (watched == nullptr) return;  // Deleted.
    // This ps did not run for a while (stopped, its host paused): it heard nothing from anyone
    // meanwhile, which says nothing of the workers, so that time counts as no one's silence. A
    // tick merely late (a busy timer thread: requests were heard meanwhile) is not forgiven.
    const absl::Duration late = options_.clock->Now() - next;
    if (late > std::max(lease / 2, absl::Seconds(1))) {
      LOG(WARNING) << "job " << id << ": " << TaskName() << " did not run for about " << late
                   << " (stopped or paused): that time counts as no worker's silence on shard "
                   << watched->ps_index();
      watched->ForgiveLeases(late);
    }
    absl::ReaderMutexLock direct(&move_gate_);
    absl::StatusOr<std::shared_ptr<ShardReplicator>> changes = ChangesThrough(watched);
    if (!changes.ok()) return;  // Stopping, or another copy serves the shard now.
    std::shared_ptr<ShardReplicator> replicator = *std::move(changes);
    // A copy that no longer serves its shard (fenced off, gone back to its own ps) judges no
    // lease; one going back judges none until it knows whether it went.
    if (replicator != nullptr && replicator->Superseded()) return;
    if (replicator != nullptr && !replicator->Fenced().ok()) {
      WatchLeases(id, job);
      return;
    }
    // A replicated shard's primary decides who is lost; both copies then lose them in order.
    const std::vector<int> lost = replicator != nullptr
                                      ? watched->TakeExpiredLeases(options_.clock->Now())
                                      : watched->ExpireLeases(options_.clock->Now());
    for (int worker : lost) {
      LOG(WARNING) << "job " << id << ": worker " << worker << " is lost: " << TaskName()
                   << " has heard nothing from it for over its lease (" << lease << ")";
    }
    if (replicator != nullptr && !lost.empty()) {
      ReplicaInput input;
      input.mutable_lost()->mutable_workers()->Add(lost.begin(), lost.end());
      replicator->Submit(std::move(input), [](absl::StatusOr<ReplicaOutcome>) {});  // Heard.
    }
    if (!lost.empty() && watched->AllWorkersLeft()) {
      ForgetAfterRetention(id, job);
    } else if (!watched->AllWorkersLeft()) {
      WatchLeases(id, job);
    }
  });
}

void ParameterService::ForgetAfterRetention(const std::string& id,
                                            const std::weak_ptr<ShardJob>& job) {
  if (options_.finished_job_retention == absl::InfiniteDuration()) return;
  timer_.Schedule(options_.clock->Now() + options_.finished_job_retention,
                  [this, id, job] { ForgetFinishedJob(id, job); });
}

void ParameterService::ForgetFinishedJob(const std::string& id,
                                         const std::weak_ptr<ShardJob>& job) {
  const std::shared_ptr<ShardJob> finished = job.lock();
  if (finished == nullptr) return;  // Deleted already.
  std::vector<std::shared_ptr<ShardReplicator>> replicators;  // Stopped outside mu_.
  std::vector<std::shared_ptr<ShardJob>> promoted;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second == finished) {
      jobs_.erase(it);
    } else {
      // A copy this ps took over (not its own shard): forgotten with the job's other copies.
      auto copy = backups_.find({id, finished->ps_index()});
      if (copy == backups_.end() || copy->second.job != finished) return;
    }
    ForgetCopiesLocked(id, &replicators, &promoted);
  }
  replicators.clear();
  if (shared_memory_ != nullptr) shared_memory_->DropJob(id);
  if (bulk_streams_ != nullptr) bulk_streams_->DropJob(id);
  LOG(INFO) << "job " << id << ": forgotten on " << TaskName() << ", "
            << options_.finished_job_retention
            << " after its last worker left (ps_server --finished_job_retention_s)";
}

}  // namespace ps
