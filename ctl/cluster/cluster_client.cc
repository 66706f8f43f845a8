#include "ctl/cluster/cluster_client.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "common/net/grpc_deadline.h"
#include "common/net/grpc_keepalive.h"
#include "common/net/grpc_reconnect.h"
#include "common/net/grpc_status.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps_service.grpc.pb.h"
#include "proto/task.grpc.pb.h"
#include "proto/worker_service.grpc.pb.h"

namespace ps {
namespace {

// Where Named keeps the call's own message, for Detail.
constexpr char kDetailPayload[] = "ps.cluster_client.detail";

// How long a channel waits at most between attempts to reach a task that went away.
constexpr absl::Duration kMaxReconnectBackoff = absl::Milliseconds(500);

std::vector<std::shared_ptr<grpc::Channel>> Channels(const std::vector<std::string>& addresses,
                                                     const TransportSecurity& security,
                                                     const std::string& token) {
  grpc::ChannelArguments arguments;
  SetQuickReconnect(&arguments, kMaxReconnectBackoff);
  SetKeepalive(&arguments);
  // A worker's trace (GetTrace) of TraceRecorder::kMaxEvents events is about 6 MiB, over gRPC's
  // default of 4.
  arguments.SetMaxReceiveMessageSize(64 << 20);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const std::string& address : addresses) {
    channels.push_back(grpc::experimental::CreateCustomChannelWithInterceptors(
        address, ChannelCredentialsFor(security), arguments, BearerTokenInterceptors(token)));
  }
  return channels;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterClient>> ClusterClient::Create(
    const ClusterSpec& cluster, const ClusterClientOptions& options) {
  PsClientOptions ps_options;
  ps_options.ps_addresses = cluster.Tasks(kPsJob);
  ps_options.max_attempts = options.ps_max_attempts;
  ps_options.security = options.security;
  ps_options.token = options.token;
  absl::StatusOr<std::unique_ptr<PsClient>> ps = PsClient::Create(ps_options);
  if (!ps.ok()) return ps.status();
  return std::unique_ptr<ClusterClient>(new ClusterClient(cluster, options, *std::move(ps)));
}

ClusterClient::ClusterClient(const ClusterSpec& cluster, const ClusterClientOptions& options,
                             std::unique_ptr<PsClient> ps)
    : num_ps_(cluster.NumTasks(kPsJob)),
      options_(options),
      ps_(std::move(ps)),
      ps_channels_(Channels(cluster.Tasks(kPsJob), options.security, options.token)),
      cluster_(cluster),
      worker_channels_(Channels(cluster.Tasks(kWorkerJob), options.security, options.token)) {}

ClusterSpec ClusterClient::cluster() const {
  absl::MutexLock lock(&mu_);
  return cluster_;
}

int ClusterClient::num_workers() const {
  absl::MutexLock lock(&mu_);
  return cluster_.NumTasks(kWorkerJob);
}

absl::Status ClusterClient::GrowTo(const ClusterSpec& grown) {
  absl::MutexLock lock(&mu_);
  absl::Status keeps = cluster_.CheckGrownInto(grown);
  if (!keeps.ok()) return keeps;
  const std::vector<std::string>& workers = grown.Tasks(kWorkerJob);
  std::vector<std::string> added(workers.begin() + cluster_.NumTasks(kWorkerJob), workers.end());
  for (std::shared_ptr<grpc::Channel>& channel :
       Channels(added, options_.security, options_.token)) {
    worker_channels_.push_back(std::move(channel));
  }
  cluster_ = grown;
  return absl::OkStatus();
}

std::string ClusterClient::TaskName(absl::string_view job, int index) const {
  absl::MutexLock lock(&mu_);
  return absl::StrCat(job, ":", index, " (", cluster_.Tasks(job)[index], ")");
}

std::shared_ptr<grpc::Channel> ClusterClient::Channel(absl::string_view job, int index) const {
  if (job == kPsJob) return ps_channels_[index];
  absl::MutexLock lock(&mu_);
  return worker_channels_[index];
}

absl::Status ClusterClient::Named(absl::string_view job, int index, absl::string_view method,
                                  const grpc::Status& status) const {
  if (status.ok()) return absl::OkStatus();
  std::string message = status.error_message();
  // A connection the task closed before any answer: most often a TLS handshake it refused.
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      (absl::StrContains(message, "Socket closed") || absl::StrContains(message, "andshake"))) {
    absl::StrAppend(&message,
                    options_.security.tls()
                        ? "; if the task is up, it refused this connection: it may not speak TLS, "
                          "or psctl's --tls_cert is not signed by the --tls_ca the task trusts"
                        : "; if the task is up, it may require TLS: give psctl --tls_cert, "
                          "--tls_key and --tls_ca (psctl certs makes them)");
  }
  absl::Status named(FromGrpcStatus(status).code(),
                     absl::StrCat(TaskName(job, index), ": ", method, ": ", message));
  named.SetPayload(kDetailPayload, absl::Cord(message));
  return named;
}

std::string ClusterClient::Detail(const absl::Status& status) {
  absl::optional<absl::Cord> detail = status.GetPayload(kDetailPayload);
  return detail.has_value() ? std::string(*detail) : std::string(status.message());
}

absl::StatusOr<StartJobResponse> ClusterClient::StartJob(int worker,
                                                         const StartJobRequest& request) const {
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(options_.start_timeout));
  StartJobResponse response;
  absl::Status status = Named(
      kWorkerJob, worker, "StartJob",
      Worker::NewStub(WorkerChannel(worker))->StartJob(&context, request, &response));
  if (!status.ok()) return status;
  return response;
}

absl::Status ClusterClient::StopJob(int worker, const std::string& job_id) const {
  StopJobRequest request;
  request.set_job_id(job_id);
  return CallStopJob(worker, request);
}

absl::Status ClusterClient::AskWorkerToLeave(int worker, const std::string& job_id,
                                            int others_running) const {
  StopJobRequest request;
  request.set_job_id(job_id);
  request.set_leave(true);
  request.set_others_running(others_running);
  return CallStopJob(worker, request);
}

absl::Status ClusterClient::CallStopJob(int worker, const StopJobRequest& request) const {
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(options_.stop_timeout));
  StopJobResponse response;
  return Named(kWorkerJob, worker, "StopJob",
               Worker::NewStub(WorkerChannel(worker))->StopJob(&context, request, &response));
}

absl::Status ClusterClient::AskWorkerBack(int worker, const std::string& job_id) const {
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(options_.stop_timeout));
  RejoinJobRequest request;
  request.set_job_id(job_id);
  RejoinJobResponse response;
  return Named(kWorkerJob, worker, "RejoinJob",
               Worker::NewStub(WorkerChannel(worker))->RejoinJob(&context, request, &response));
}

std::optional<JobProgress> ClusterClient::JobOnWorker(int worker,
                                                     const std::string& job_id) const {
  absl::StatusOr<WorkerStatus> status = GetWorkerStatus(worker);
  if (!status.ok()) return std::nullopt;
  for (const JobProgress& job : status->jobs()) {
    if (job.job_id() == job_id) return job;
  }
  return std::nullopt;
}

absl::StatusOr<WorkerStatus> ClusterClient::GetWorkerStatus(int worker) const {
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(options_.status_timeout));
  WorkerStatus response;
  absl::Status status = Named(kWorkerJob, worker, "GetStatus",
                              Worker::NewStub(WorkerChannel(worker))
                                  ->GetStatus(&context, WorkerStatusRequest(), &response));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<Trace> ClusterClient::GetWorkerTrace(int worker,
                                                    const TraceRequest& request) const {
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(options_.status_timeout));
  Trace response;
  absl::Status status =
      Named(kWorkerJob, worker, "GetTrace",
            Worker::NewStub(WorkerChannel(worker))->GetTrace(&context, request, &response));
  if (!status.ok()) return status;
  return response;
}

absl::Status ClusterClient::WatchJob(
    int worker, const std::string& job_id, grpc::ClientContext* context,
    const std::function<void(const JobProgress&)>& on_progress) const {
  WatchJobRequest request;
  request.set_job_id(job_id);
  std::unique_ptr<grpc::ClientReader<JobProgress>> reader =
      Worker::NewStub(WorkerChannel(worker))->WatchJob(context, request);
  JobProgress progress;
  while (reader->Read(&progress)) on_progress(progress);
  return Named(kWorkerJob, worker, "WatchJob", reader->Finish());
}

absl::Status ClusterClient::DeleteJob(const std::string& job_id) const {
  return ps_->DeleteJob(job_id);
}

absl::StatusOr<ListJobsResponse> ClusterClient::ListJobs(int ps) const {
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(options_.status_timeout));
  ListJobsResponse response;
  absl::Status status = Named(kPsJob, ps, "ListJobs",
                              ParameterServer::NewStub(ps_channels_[ps])
                                  ->ListJobs(&context, ListJobsRequest(), &response));
  if (!status.ok()) return status;
  return response;
}

std::vector<absl::StatusOr<ListJobsResponse>> ClusterClient::ListEveryPs(int skip) const {
  std::vector<absl::StatusOr<ListJobsResponse>> answers;
  for (int ps = 0; ps < num_ps(); ++ps) {
    answers.push_back(ps == skip ? absl::UnavailableError("not asked") : ListJobs(ps));
  }
  return answers;
}

std::map<int, int> ClusterClient::MovedShards(const std::string& job_id, int unreached) const {
  const std::vector<absl::StatusOr<ListJobsResponse>> answers = ListEveryPs(unreached);
  std::vector<const ListJobsResponse*> listed;
  for (const absl::StatusOr<ListJobsResponse>& answer : answers) {
    listed.push_back(answer.ok() ? &*answer : nullptr);
  }
  return MovedShardsIn(job_id, listed);
}

absl::StatusOr<JobStats> ClusterClient::GetJobStats(int ps, const std::string& job_id) const {
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(options_.status_timeout));
  JobStatsRequest request;
  request.set_job_id(job_id);
  JobStats response;
  absl::Status status = Named(
      kPsJob, ps, "GetJobStats",
      ParameterServer::NewStub(ps_channels_[ps])->GetJobStats(&context, request, &response));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<JobStats> ClusterClient::GetShardStats(int shard, const std::string& job_id,
                                                      bool replicated) const {
  if (!replicated) {
    // A shard moved to another ps (MoveShard) is asked where each ps says it went, from its
    // own ps on (a shard moved on twice is a hop further).
    JobStatsRequest request;
    request.set_job_id(job_id);
    request.set_shard(shard);
    request.set_unreplicated(true);
    JobStats response;
    int ps = shard;
    const grpc::Status answered = CallWhereShardIs(
        &ps, request, &response, &ParameterServer::Stub::GetJobStats, options_.status_timeout);
    absl::Status status = Named(kPsJob, ps, "GetJobStats", answered);
    if (!status.ok()) return status;
    return response;
  }
  JobStatsRequest request;
  request.set_job_id(job_id);
  request.set_shard(shard);
  absl::StatusOr<JobStats> stats = CallPs(shard, "GetJobStats", request,
                                          &ParameterServer::Stub::GetJobStats,
                                          options_.status_timeout);
  if (stats.ok() ||
      !(absl::IsUnavailable(stats.status()) || absl::IsDeadlineExceeded(stats.status()))) {
    return stats;
  }
  // Its ps is down, hangs, or no longer serves it: the other copy, on the next ps, does.
  return CallPs((shard + 1) % num_ps(), "GetJobStats", request,
                &ParameterServer::Stub::GetJobStats, options_.status_timeout);
}

absl::StatusOr<Trace> ClusterClient::GetPsTrace(int ps, const TraceRequest& request) const {
  return CallPs(ps, "GetTrace", request, &ParameterServer::Stub::GetTrace,
                options_.status_timeout);
}

template <typename Request, typename Response>
grpc::Status ClusterClient::CallWhereShardIs(
    int* ps, const Request& request, Response* response,
    grpc::Status (ParameterServer::Stub::*method)(grpc::ClientContext*, const Request&,
                                                  Response*),
    absl::Duration timeout) const {
  for (int hop = 0;; ++hop) {
    grpc::ClientContext context;
    context.set_deadline(GrpcDeadline(timeout));
    std::unique_ptr<ParameterServer::Stub> stub = ParameterServer::NewStub(ps_channels_[*ps]);
    const grpc::Status answered = ((*stub).*method)(&context, request, response);
    std::optional<int> moved_to = ShardMovedTo(answered);
    if (hop == 0 && !moved_to.has_value() &&
        (answered.error_code() == grpc::StatusCode::UNAVAILABLE ||
         answered.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         answered.error_code() == grpc::StatusCode::NOT_FOUND)) {
      // Its own ps is gone, hangs, or was started again empty while the shard was away: a ps
      // it moved to says so itself.
      const std::map<int, int> moved = MovedShards(request.job_id(), *ps);
      auto serving = moved.find(request.shard());
      if (serving != moved.end()) moved_to = serving->second;
    }
    if (!moved_to.has_value() || *moved_to == *ps || *moved_to < 0 || *moved_to >= num_ps() ||
        hop >= num_ps()) {
      return answered;
    }
    *ps = *moved_to;
  }
}

template <typename Request, typename Response>
absl::StatusOr<Response> ClusterClient::CallPs(
    int ps, absl::string_view name, const Request& request,
    grpc::Status (ParameterServer::Stub::*method)(grpc::ClientContext*, const Request&,
                                                  Response*),
    absl::Duration timeout) const {
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(timeout));
  Response response;
  std::unique_ptr<ParameterServer::Stub> stub = ParameterServer::NewStub(ps_channels_[ps]);
  absl::Status status =
      Named(kPsJob, ps, name, ((*stub).*method)(&context, request, &response));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<MoveShardResponse> ClusterClient::MoveShard(const MoveShardRequest& request) const {
  // Asked of the shard's own ps, then where each ps says it went (a moved shard moves on, or
  // back home, from the ps that serves it).
  int ps = request.shard();
  MoveShardResponse response;
  const grpc::Status answered = CallWhereShardIs(&ps, request, &response,
                                                 &ParameterServer::Stub::MoveShard,
                                                 options_.move_timeout);
  // (A ps's record of where the shard went may be a hop behind: the ps that serves it says
  // whether it is on to_ps already.)
  absl::Status status = Named(kPsJob, ps, "MoveShard", answered);
  // A shard that moves on and on (or a ps that names itself): not a ps out of reach.
  if (ShardMovedTo(answered).has_value()) status = absl::FailedPreconditionError(status.message());
  if (!status.ok()) return status;
  return response;
}

absl::Status ClusterClient::ArmCheckpoint(int ps, const ArmCheckpointRequest& request) const {
  return CallPs(ps, "ArmCheckpoint", request, &ParameterServer::Stub::ArmCheckpoint,
                options_.status_timeout)
      .status();
}

absl::Status ClusterClient::CommitCheckpoint(int ps,
                                             const CommitCheckpointRequest& request) const {
  return CallPs(ps, "CommitCheckpoint", request, &ParameterServer::Stub::CommitCheckpoint,
                options_.checkpoint_timeout)
      .status();
}

absl::StatusOr<ListCheckpointsResponse> ClusterClient::ListCheckpoints(
    int ps, const ListCheckpointsRequest& request) const {
  return CallPs(ps, "ListCheckpoints", request, &ParameterServer::Stub::ListCheckpoints,
                options_.checkpoint_timeout);
}

absl::Status ClusterClient::RestoreJob(int ps, const RestoreJobRequest& request) const {
  return CallPs(ps, "RestoreJob", request, &ParameterServer::Stub::RestoreJob,
                options_.checkpoint_timeout)
      .status();
}

absl::StatusOr<DeleteCheckpointsResponse> ClusterClient::DeleteCheckpoints(
    int ps, const std::string& job_id) const {
  DeleteCheckpointsRequest request;
  request.set_job_id(job_id);
  return CallPs(ps, "DeleteCheckpoints", request, &ParameterServer::Stub::DeleteCheckpoints,
                options_.checkpoint_timeout);
}

bool ClusterClient::WaitForConnected(absl::string_view job, int index) const {
  return Channel(job, index)->WaitForConnected(GrpcDeadline(options_.status_timeout));
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> ClusterClient::CheckHealth(
    absl::string_view job, int index) const {
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(options_.status_timeout));
  grpc::health::v1::HealthCheckResponse response;
  absl::Status status =
      Named(job, index, "Check",
            grpc::health::v1::Health::NewStub(Channel(job, index))
                ->Check(&context, grpc::health::v1::HealthCheckRequest(), &response));
  if (!status.ok()) return status;
  return response.status();
}

absl::StatusOr<TaskInfo> ClusterClient::GetTaskInfo(absl::string_view job, int index) const {
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(options_.status_timeout));
  TaskInfo response;
  std::unique_ptr<Task::Stub> stub = Task::NewStub(Channel(job, index));
  absl::Status status = Named(job, index, "GetTaskInfo",
                              stub->GetTaskInfo(&context, TaskInfoRequest(), &response));
  if (!status.ok()) return status;
  return response;
}

}  // namespace ps
