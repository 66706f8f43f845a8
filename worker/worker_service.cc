#include "worker/worker_service.h"

#include <glog/logging.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/job/consistency_modes.h"
#include "common/net/grpc_status.h"
#include "common/job/job_schema.h"
#include "common/job/job_spec.h"
#include "common/security/peer_identity.h"
#include "worker/allreduce/grpc_ring_link.h"
#include "worker/program_runner.h"
#include "worker/trainer.h"

namespace ps {

// The newest progress of one job, and the watchers to tell when it changes.
// Lock order: ProgressLog::mu_ before any watcher's lock.
class ProgressLog {
 public:
  class Watcher {
   public:
    virtual ~Watcher() = default;
    // Called with the log's lock held: must not call back into the log.
    virtual void Notify(uint64_t sequence, const JobProgress& progress) = 0;
  };

  void Publish(const JobProgress& progress) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    latest_ = progress;
    ++sequence_;
    for (Watcher* watcher : watchers_) watcher->Notify(sequence_, latest_);
  }
  // The newest progress and its sequence number (0: none yet).
  std::pair<uint64_t, JobProgress> Latest() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return {sequence_, latest_};
  }
  void Subscribe(Watcher* watcher) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    watchers_.push_back(watcher);
    if (sequence_ > 0) watcher->Notify(sequence_, latest_);
  }
  void Unsubscribe(Watcher* watcher) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), watcher), watchers_.end());
  }

 private:
  absl::Mutex mu_;
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  JobProgress latest_ ABSL_GUARDED_BY(mu_);
  std::vector<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
};

namespace {

bool IsFinal(const JobProgress& progress) { return progress.state() != JobProgress::RUNNING; }

// Streams a job's progress: always the newest update, and the final one last.
class WatchReactor : public grpc::ServerWriteReactor<JobProgress>, public ProgressLog::Watcher {
 public:
  explicit WatchReactor(std::shared_ptr<ProgressLog> log) : log_(std::move(log)) {
    log_->Subscribe(this);
  }

  // Keeps the newest update; writes it unless a write is under way, whose end writes it then.
  void Notify(uint64_t sequence, const JobProgress& progress) override {
    absl::MutexLock lock(&mu_);
    if (finished_ || sequence <= newest_sequence_) return;
    newest_sequence_ = sequence;
    newest_ = progress;
    if (!writing_) WriteNewestLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    // A write may complete after OnCancel, which left the finish to this callback.
    if (!ok || cancelled_ || IsFinal(current_)) {
      FinishLocked(ok && !cancelled_
                       ? grpc::Status::OK
                       : grpc::Status(grpc::StatusCode::CANCELLED, "the watcher went away"));
      return;
    }
    if (newest_sequence_ > written_sequence_) WriteNewestLocked();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (!writing_) FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override {
    log_->Unsubscribe(this);
    delete this;
  }

 private:
  // REQUIRES: no write under way, and newest_ not written yet. Finishes instead once cancelled
  // (no write would ever complete).
  void WriteNewestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (cancelled_) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
      return;
    }
    written_sequence_ = newest_sequence_;
    current_ = newest_;
    writing_ = true;
    StartWrite(&current_);
  }
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  const std::shared_ptr<ProgressLog> log_;
  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  // The newest update the log gave, and the one written last (current_: its buffer, kept until
  // its write is done).
  uint64_t newest_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  JobProgress newest_ ABSL_GUARDED_BY(mu_);
  uint64_t written_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  JobProgress current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

WorkerService::WorkerService(WorkerServiceOptions options) : options_(std::move(options)) {
  PsClientOptions client_options = options_.ps_client;
  client_options.ps_addresses = options_.cluster.Tasks(kPsJob);
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(client_options);
  CHECK(client.ok()) << client.status();  // The cluster's addresses were validated.
  ps_client_ = *std::move(client);
}

WorkerService::~WorkerService() { StopAll(); }

void WorkerService::StopLocked(RunningJob* job, const std::string& who) {
  if (!job->stop) job->stopped_by = who;
  job->stop = true;
  // A ring call waits for peers that are stopping too: it ends now, saying why.
  if (job->ring != nullptr) job->ring->Abort(absl::CancelledError("the job was stopped"));
}

void WorkerService::StopAll() {
  std::vector<RunningJob*> jobs;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, job] : jobs_) {
      StopLocked(job.get(), absl::StrCat("worker:", options_.worker_index, " shutting down"));
      jobs.push_back(job.get());
    }
  }
  for (RunningJob* job : jobs) {
    if (job->thread.joinable()) job->thread.join();
  }
}

absl::Status WorkerService::DoStartJob(const StartJobRequest& request) {
  absl::StatusOr<ClusterSpec> cluster = ClusterSpec::FromProto(request.cluster());
  if (!cluster.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cluster: ", cluster.status().message()));
  }
  // The job's cluster is this daemon's, or one grown from it or into it (a job that grew past
  // its ClusterSpec: docs/elastic.md), and lists this worker.
  // Only an elastic job grows (its ring, in the ring modes, is this daemon's cluster).
  const bool same = options_.cluster.CheckGrownInto(*cluster).ok() &&
                    cluster->CheckGrownInto(options_.cluster).ok();
  const bool agrees = same || (request.spec().min_workers() > 0 &&
                               (options_.cluster.CheckGrownInto(*cluster).ok() ||
                                cluster->CheckGrownInto(options_.cluster).ok()));
  if (!agrees || options_.worker_index >= cluster->NumTasks(kWorkerJob)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker:", options_.worker_index,
        " was started with a different ClusterSpec than the job's; start the daemons and "
        "submit with the same one (or one that grew from it by workers added after its own)"));
  }
  const int num_workers = cluster->NumTasks(kWorkerJob);
  const JobSpec& spec = request.spec();
  absl::Status status = ValidateJobSpec(spec, num_workers);
  if (!status.ok()) return status;
  if (spec.has_program() && !options_.allow_programs) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker:", options_.worker_index, " does not run programs (JobSpec.program): its "
        "ps_worker was started without --allow_programs, which lets a job's submitter run "
        "code of their choice on its host; start it with the flag (psctl local's daemons "
        "have it) or submit a job of a built-in model"));
  }
  if (request.first_step() < 0 || request.incarnation() < 0 ||
      !(request.elapsed_s() >= 0 && request.elapsed_s() < 1e9)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "first_step is ", request.first_step(), ", incarnation ", request.incarnation(),
        " and elapsed_s ", request.elapsed_s(), ": each must be >= 0 (elapsed_s under 1e9)"));
  }
  for (const std::string& file : DataFiles(spec.data())) {
    status = options_.data_roots.Check(file, "data");
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("worker:", options_.worker_index, ": ", status.message()));
    }
  }

  absl::MutexLock lock(&mu_);
  ForgetFinishedJobsLocked();
  auto it = jobs_.find(spec.job_id());
  if (it != jobs_.end()) {
    if (!it->second->finished) {
      return absl::AlreadyExistsError(absl::StrCat(
          "job \"", spec.job_id(), "\" is already running on worker:", options_.worker_index));
    }
    // Another user's record (a run that ended, or a worker that left and may be asked back)
    // is theirs until it is forgotten.
    if (it->second->spec.owner() != spec.owner()) {
      return absl::AlreadyExistsError(absl::StrCat(
          "worker:", options_.worker_index, " holds another user's record of job \"",
          spec.job_id(), "\" (kept ", absl::FormatDuration(options_.finished_job_retention),
          " after it ends); choose another job id"));
    }
    it->second->thread.join();
    jobs_.erase(it);
  }
  auto job = std::make_unique<RunningJob>();
  job->spec = spec;
  job->num_workers = num_workers;
  job->progress = std::make_shared<ProgressLog>();
  if (spec.trace() && !spec.has_program()) {
    job->trace = std::make_shared<TraceRecorder>(options_.clock);
  }
  RunningJob* raw = job.get();
  jobs_.emplace(spec.job_id(), std::move(job));
  raw->thread = std::thread(
      [this, spec, raw, first_step = request.first_step(), incarnation = request.incarnation(),
       elapsed = absl::Seconds(request.elapsed_s())] {
        RunJob(spec, first_step, incarnation, elapsed, raw);
      });
  return absl::OkStatus();
}

void WorkerService::RunJob(JobSpec spec, int64_t first_step, int incarnation,
                           absl::Duration elapsed, RunningJob* job) {
  LOG(INFO) << "job " << spec.job_id() << ": starting on " << options_.device.description;
  // A job that cannot start ends FAILED with why.
  auto fail = [&](const absl::Status& status) {
    JobProgress failed;
    failed.set_job_id(spec.job_id());
    failed.set_worker(options_.worker_index);
    failed.set_state(JobProgress::FAILED);
    failed.set_error_code(static_cast<int>(status.code()));
    failed.set_error(std::string(status.message()));
    job->finished_at = options_.clock->Now();
    job->finished = true;
    job->progress->Publish(failed);
  };
  if (spec.has_program()) return RunProgramJob(spec, first_step, incarnation, job);
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = CreateBackend(options_.device);
  if (!backend.ok()) return fail(backend.status());
  absl::StatusOr<std::unique_ptr<RingLink>> ring = MakeRing(spec);
  if (!ring.ok()) return fail(ring.status());
  {
    absl::MutexLock lock(&mu_);
    job->ring = ring->get();
    if (job->stop && job->ring != nullptr) {
      job->ring->Abort(absl::CancelledError("the job was stopped"));
    }
  }
  TrainerContext context;
  context.spec = spec;
  context.worker = options_.worker_index;
  context.num_workers = job->num_workers;
  context.first_step = first_step;
  context.incarnation = incarnation;
  context.elapsed_before = elapsed;
  context.ps = ps_client_.get();
  context.backend = backend->get();
  context.ring = ring->get();
  context.stop = &job->stop;
  context.trace = job->trace.get();
  JobProgress last;
  TrainerOutcome outcome;
  context.outcome = &outcome;
  context.clock = options_.clock;
  context.report = [&](const JobProgress& progress) {
    last = progress;
    job->progress->Publish(progress);
  };
  absl::Status status = RunTrainer(context);
  {
    absl::MutexLock lock(&mu_);
    job->ring = nullptr;  // The link goes with this function.
  }
  last.set_job_id(spec.job_id());
  *last.mutable_data() = outcome.data;
  if (!outcome.note.empty()) last.set_note(outcome.note);
  if (outcome.bytes_sent >= 0) {
    last.set_bytes_sent(outcome.bytes_sent);
    last.set_bytes_received(outcome.bytes_received);
  }
  Finish(spec, status, job, &last);
}

void WorkerService::Finish(const JobSpec& spec, const absl::Status& status, RunningJob* job,
                           JobProgress* last) {
  last->set_job_id(spec.job_id());
  last->set_worker(options_.worker_index);
  if (status.ok()) {
    last->set_state(JobProgress::DONE);
  } else if (absl::IsCancelled(status) || job->stop) {
    // Asked to stop: what the interrupted step then hit (the job deleted on a ps) is no failure.
    absl::MutexLock lock(&mu_);
    last->set_state(job->leave ? JobProgress::LEFT : JobProgress::STOPPED);
    last->set_stopped_by(job->stopped_by);
  } else {
    last->set_state(JobProgress::FAILED);
    last->set_error_code(static_cast<int>(status.code()));
    last->set_error(std::string(status.message()));
  }
  LOG(INFO) << "job " << spec.job_id() << ": " << JobProgress::State_Name(last->state())
            << (status.ok() ? "" : absl::StrCat(": ", status.ToString()));
  job->finished_at = options_.clock->Now();
  job->finished = true;
  job->progress->Publish(*last);
}

void WorkerService::RunProgramJob(const JobSpec& spec, int64_t first_step, int incarnation,
                                  RunningJob* job) {
  ProgramContext context;
  context.spec = spec;
  context.worker = options_.worker_index;
  context.num_workers = job->num_workers;
  context.first_step = first_step;
  context.incarnation = incarnation;
  context.ps = ps_client_->options();  // With the cluster's ps addresses.
  context.stop = &job->stop;
  context.clock = options_.clock;
  JobProgress last;
  context.report = [&](const JobProgress& progress) {
    last = progress;
    job->progress->Publish(progress);
  };
  const absl::Status status = RunProgram(context);
  last.set_process_died(absl::IsUnavailable(status));
  bool leave;
  {
    absl::MutexLock lock(&mu_);
    leave = job->leave;
  }
  if (leave) {  // The program was stopped, as a trainer is; the shards learn it left here.
    absl::Status left = ps_client_->LeaveJob(spec.job_id(), spec.run_id(), options_.worker_index,
                                             spec.replicas() > 1, incarnation);
    if (!left.ok()) LOG(WARNING) << "job " << spec.job_id() << ": leaving: " << left;
  }
  Finish(spec, status, job, &last);
}

absl::StatusOr<std::unique_ptr<RingLink>> WorkerService::MakeRing(const JobSpec& spec) const {
  const ConsistencyConfig::Mode mode = spec.consistency().mode();
  if (ModeTraitsOf(mode).family != ModeFamily::kRing) return std::unique_ptr<RingLink>();
  if (options_.ring_mailbox == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker:", options_.worker_index, " has no ring to the other workers for ",
        ConsistencyConfig::Mode_Name(mode), " (started without a Ring service)"));
  }
  GrpcRingLinkOptions link;
  link.deadline = options_.ps_client.wait_timeout;  // As long as a barrier may wait.
  link.security = options_.ps_client.security;
  link.token = options_.ps_client.token;
  link.max_message_bytes = options_.ps_client.max_message_bytes;
  return MakeGrpcRingLink(options_.cluster, options_.worker_index, spec.job_id(), spec.run_id(),
                          options_.ring_mailbox, link);
}

void WorkerService::ForgetFinishedJobsLocked() {
  const absl::Time now = options_.clock->Now();
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    RunningJob& job = *it->second;
    if (job.finished && now - job.finished_at > options_.finished_job_retention) {
      job.thread.join();
      LOG(INFO) << "job " << it->first << ": forgotten, " << options_.finished_job_retention
                << " after it ended (ps_worker --finished_job_retention_s)";
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
}

grpc::ServerUnaryReactor* WorkerService::StartJob(grpc::CallbackServerContext* context,
                                                  const StartJobRequest* request,
                                                  StartJobResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const Peer peer = PeerOf(*context);
  absl::Status status = RequireUser(peer, "StartJob");
  if (status.ok()) {
    StartJobRequest owned = *request;
    owned.mutable_spec()->set_owner(peer.name);  // Only its owner may stop it.
    status = DoStartJob(owned);
  }
  if (status.ok()) response->set_device(options_.device.description);
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::StopJob(grpc::CallbackServerContext* context,
                                                 const StopJobRequest* request,
                                                 StopJobResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const Peer peer = PeerOf(*context);
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(request->job_id());
  if (it == jobs_.end()) {
    absl::Status unknown = RequireUser(peer, "StopJob");
    if (unknown.ok()) {
      unknown = absl::NotFoundError(absl::StrCat("unknown job \"", request->job_id(),
                                                 "\" on worker:", options_.worker_index));
    }
    reactor->Finish(ToGrpcStatus(unknown));
    return reactor;
  }
  absl::Status allowed = RequireOwner(peer, it->second->spec.owner(), request->job_id(), "stop");
  if (allowed.ok() && request->leave()) {
    allowed = CheckLeave(*it->second, request->others_running());
  }
  if (allowed.ok()) {
    if (request->leave()) it->second->leave = true;  // CheckLeave: not stopping already.
    StopLocked(it->second.get(), peer.Describe());
  }
  reactor->Finish(ToGrpcStatus(allowed));
  return reactor;
}

absl::Status WorkerService::CheckLeave(const RunningJob& job, int others_running) const {
  const std::string who = absl::StrCat("worker:", options_.worker_index);
  const JobSpec& spec = job.spec;
  const std::string prefix =
      absl::StrCat(who, " cannot leave job \"", spec.job_id(), "\"");
  if (job.finished || job.stop) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix, ": it is no longer running there (ended or stopping)"));
  }
  if (ModeTraitsOf(spec.consistency().mode()).family == ModeFamily::kRing) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, ": ", ConsistencyConfig::Mode_Name(spec.consistency().mode()),
        "'s ring needs every worker; stop the job (psctl stop) or use a mode with ps"));
  }
  if (options_.worker_index == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, ": it is the chief, which evaluates the model and ends the job; remove another "
                "worker, or stop the job"));
  }
  const int needed = std::max(1, spec.min_workers());
  if (others_running < needed) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, ": ", others_running, " other worker", others_running == 1 ? "" : "s",
        " would be left running it, and the job needs at least ", needed,
        spec.min_workers() > 0 ? " (min_workers)" : "",
        "; add a worker first (start its daemon, or psctl add-worker), or stop the job"));
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* WorkerService::RejoinJob(grpc::CallbackServerContext* context,
                                                   const RejoinJobRequest* request,
                                                   RejoinJobResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const Peer peer = PeerOf(*context);
  absl::MutexLock lock(&mu_);
  ForgetFinishedJobsLocked();
  auto it = jobs_.find(request->job_id());
  absl::Status status;
  if (it == jobs_.end()) {
    status = RequireUser(peer, "RejoinJob");
    if (status.ok()) {
      status = absl::NotFoundError(absl::StrCat(
          "worker:", options_.worker_index, " has no record of job \"", request->job_id(),
          "\" (never run here, it ended over ",
          absl::FormatDuration(options_.finished_job_retention),
          " ago, or this daemon was restarted since): only a worker that left the running job "
          "(psctl remove-worker) is taken back this way; a worker whose daemon was down when "
          "the job started, or that was lost, joins an elastic job by itself once its daemon "
          "is up"));
    }
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  RunningJob& job = *it->second;
  status = RequireOwner(peer, job.spec.owner(), request->job_id(), "rejoin");
  if (status.ok()) {
    auto [sequence, latest] = job.progress->Latest();
    if (!job.finished || latest.state() != JobProgress::LEFT) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "worker:", options_.worker_index, " did not leave job \"", request->job_id(), "\" (",
          job.finished ? JobProgress::State_Name(latest.state()) : std::string("RUNNING"),
          "): only a worker that left (psctl remove-worker) is taken back this way"));
    } else if (!latest.rejoin_asked()) {
      latest.set_rejoin_asked(true);
      job.progress->Publish(latest);
    }
  }
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::GetStatus(grpc::CallbackServerContext* context,
                                                   const WorkerStatusRequest* /*request*/,
                                                   WorkerStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const Peer peer = PeerOf(*context);
  if (absl::Status member = RequireMember(peer, "GetStatus"); !member.ok()) {
    reactor->Finish(ToGrpcStatus(member));
    return reactor;
  }
  response->set_worker(options_.worker_index);
  response->set_device(options_.device.description);
  // Only the jobs the caller may read: another user's are not shown.
  for (JobProgress& latest : LatestProgress(&peer)) *response->add_jobs() = std::move(latest);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

std::vector<JobProgress> WorkerService::LatestProgress(const Peer* reader) {
  std::vector<JobProgress> jobs;
  absl::MutexLock lock(&mu_);
  ForgetFinishedJobsLocked();
  for (const auto& [id, job] : jobs_) {
    if (reader != nullptr &&
        !RequireJobAccess(*reader, job->spec.owner(), id, JobAccess::kRead, "GetStatus").ok()) {
      continue;
    }
    auto [sequence, latest] = job->progress->Latest();
    if (sequence == 0) latest.set_job_id(id);
    jobs.push_back(std::move(latest));
  }
  return jobs;
}

grpc::ServerWriteReactor<JobProgress>* WorkerService::WatchJob(grpc::CallbackServerContext* context,
                                                               const WatchJobRequest* request) {
  std::shared_ptr<ProgressLog> log;
  const Peer peer = PeerOf(*context);
  absl::Status status = RequireMember(peer, "WatchJob");
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(request->job_id());
    if (it != jobs_.end()) {
      status = RequireJobAccess(peer, it->second->spec.owner(), request->job_id(), JobAccess::kRead,
                                "WatchJob");
      if (status.ok()) log = it->second->progress;
    }
  }
  if (log == nullptr) {
    class Refused : public grpc::ServerWriteReactor<JobProgress> {
     public:
      explicit Refused(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
      void OnDone() override { delete this; }
    };
    if (status.ok()) {
      status = absl::NotFoundError(absl::StrCat("unknown job \"", request->job_id(),
                                                "\" on worker:", options_.worker_index));
    }
    return new Refused(status);
  }
  return new WatchReactor(std::move(log));
}

grpc::ServerUnaryReactor* WorkerService::GetTrace(grpc::CallbackServerContext* context,
                                                  const TraceRequest* request, Trace* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const Peer peer = PeerOf(*context);
  absl::Status status = RequireMember(peer, "GetTrace");
  std::shared_ptr<TraceRecorder> trace;
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    ForgetFinishedJobsLocked();
    auto it = jobs_.find(request->job_id());
    if (it == jobs_.end()) {
      status = absl::NotFoundError(absl::StrCat("unknown job \"", request->job_id(),
                                                "\" on worker:", options_.worker_index));
    } else {
      status = RequireJobAccess(peer, it->second->spec.owner(), request->job_id(),
                                JobAccess::kRead, "GetTrace");
      trace = it->second->trace;
    }
  }
  // A trace is up to 10 MiB of messages: a few at once, so that callers cannot run the worker
  // out of memory.
  const bool counted = status.ok();
  if (counted && trace_calls_.fetch_add(1) >= kMaxTraceCalls) {
    status = absl::ResourceExhaustedError(absl::StrCat(
        "worker:", options_.worker_index, " is answering ", kMaxTraceCalls,
        " GetTrace calls already; try again when they are done"));
  }
  // Copied outside the lock: a long trace must not hold up the worker's other calls.
  if (status.ok() && trace != nullptr) *response = trace->Snapshot(*request);
  if (counted) trace_calls_.fetch_sub(1);
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace ps
