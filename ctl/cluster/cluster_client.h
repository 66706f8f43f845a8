// psctl's one way to reach a running cluster: the worker daemons' control calls (StartJob,
// StopJob, GetStatus, WatchJob), each ps task's listing and statistics, every task's health,
// and a PsClient for the calls that go to all shards at once (deleting a job, its statistics,
// its final parameters).
//
// It lives in ctl/ because only psctl drives the worker daemons' control service and checks
// health; the daemons themselves reach the ps through common/client/ps_client.h alone.
//
// Every call carries a deadline from ClusterClientOptions. Errors keep the daemon's status
// code and name the task, its address and the call: "worker:1 (10.0.0.3:2223): StartJob: ...".
#ifndef PS_CTL_CLUSTER_CLUSTER_CLIENT_H_
#define PS_CTL_CLUSTER_CLUSTER_CLIENT_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cluster/cluster_spec.h"
#include "common/client/ps_client.h"
#include "proto/health.pb.h"
#include "common/security/auth_token.h"
#include "common/security/transport_security.h"
#include "proto/ps_service.grpc.pb.h"
#include "proto/task.pb.h"
#include "proto/worker_service.pb.h"

namespace ps {

struct ClusterClientOptions {
  // StartJob: a worker answers once it has set the job up (data shard read, device chosen).
  absl::Duration start_timeout = absl::Seconds(30);
  // StopJob: a worker answers at once and stops the job at its next step.
  absl::Duration stop_timeout = absl::Seconds(5);
  // Every other call to one task (status, listing, statistics, health), and how long
  // WaitForConnected waits: short, so that a report on a cluster with dead tasks comes quickly.
  absl::Duration status_timeout = absl::Seconds(3);
  // Attempts of the PsClient's calls on UNAVAILABLE: few, since psctl reports a dead ps rather
  // than waiting for it.
  int ps_max_attempts = 2;
  // The checkpoint calls that touch the disk (commit, list, restore).
  absl::Duration checkpoint_timeout = absl::Minutes(5);
  // A shard's move (MoveShard): a copy of the whole shard, then its catch-up.
  absl::Duration move_timeout = absl::Minutes(10);
  // psctl's identity (its --tls_* flags and its token) on every channel.
  TransportSecurity security = ProcessTransportSecurity();
  std::string token = PresentedToken(ProcessAuthTokens());
};

// Thread-safe.
// The calls are virtual so that psctl's decisions (recovery, lost workers, checkpoints) can be
// tested against a fake cluster (ctl/cluster/testing/fake_cluster_client.h).
class ClusterClient {
 public:
  // Connections are made lazily. INVALID_ARGUMENT only for a spec ClusterSpec::Parse refuses.
  static absl::StatusOr<std::unique_ptr<ClusterClient>> Create(
      const ClusterSpec& cluster, const ClusterClientOptions& options = {});
  virtual ~ClusterClient() = default;

  // The cluster as this client has it now: as created, or grown (GrowTo).
  ClusterSpec cluster() const ABSL_LOCKS_EXCLUDED(mu_);
  const ClusterClientOptions& options() const { return options_; }
  int num_ps() const { return num_ps_; }
  int num_workers() const ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the workers a running job grew by (docs/elastic.md "A ClusterSpec that grows"): from
  // now on `grown`'s workers are this client's too. INVALID_ARGUMENT, changing nothing, unless
  // `grown` keeps this client's cluster (ClusterSpec::CheckGrownInto).
  absl::Status GrowTo(const ClusterSpec& grown) ABSL_LOCKS_EXCLUDED(mu_);
  // "worker:1 (10.0.0.3:2223)": how this client's errors name a task of `job` (kPsJob or
  // kWorkerJob).
  std::string TaskName(absl::string_view job, int index) const;
  // What a failed call of this client's says without the "<task>: <call>: " it puts in front
  // (the server's or the transport's own message), for reports that name the task themselves;
  // any other status's message.
  static std::string Detail(const absl::Status& status);

  // The ps admin client over every shard of the cluster.
  PsClient* ps() const { return ps_.get(); }

  // Worker daemons. REQUIRES: 0 <= worker < num_workers().
  virtual absl::StatusOr<StartJobResponse> StartJob(int worker,
                                                    const StartJobRequest& request) const;
  virtual absl::Status StopJob(int worker, const std::string& job_id) const;
  // StopJob with leave: `worker` alone leaves the running job, `others_running` of its workers
  // staying (psctl remove-worker); RejoinJob asks for a worker that left to be taken back.
  virtual absl::Status AskWorkerToLeave(int worker, const std::string& job_id,
                                        int others_running) const;
  virtual absl::Status AskWorkerBack(int worker, const std::string& job_id) const;
  // `worker`'s record of `job_id` (GetWorkerStatus); none when its daemon does not answer or
  // holds none.
  std::optional<JobProgress> JobOnWorker(int worker, const std::string& job_id) const;
  virtual absl::StatusOr<WorkerStatus> GetWorkerStatus(int worker) const;
  // `worker`'s trace of the request's job (JobSpec.trace); empty when it records none.
  virtual absl::StatusOr<Trace> GetWorkerTrace(int worker, const TraceRequest& request) const;
  // Hands each progress report of `job_id` from `worker` to `on_progress` (on this thread)
  // until the stream ends: OK when the worker ended it, else why it broke. No deadline: the
  // stream lasts as long as the job; cancel `context` to end it early.
  virtual absl::Status WatchJob(int worker, const std::string& job_id, grpc::ClientContext* context,
                        const std::function<void(const JobProgress&)>& on_progress) const;

  // Deletes `job_id` on every ps: ps()->DeleteJob, here so that a fake can answer it.
  virtual absl::Status DeleteJob(const std::string& job_id) const;

  // Ps daemons, one task at a time. REQUIRES: 0 <= ps < num_ps().
  virtual absl::StatusOr<ListJobsResponse> ListJobs(int ps) const;
  // ListJobs of every ps in task order (UNAVAILABLE "not asked" for `skip`, -1: none).
  std::vector<absl::StatusOr<ListJobsResponse>> ListEveryPs(int skip = -1) const;
  virtual absl::StatusOr<JobStats> GetJobStats(int ps, const std::string& job_id) const;
  // The trace of the request's job on `ps` (its own shard, or request.shard's copy).
  virtual absl::StatusOr<Trace> GetPsTrace(int ps, const TraceRequest& request) const;
  // Shard `shard`'s statistics: GetJobStats of its own ps, or of the ps it says the shard moved
  // to (MoveShard), and on where that one says it went; or where `replicated` (the job keeps a backup of each shard) of whichever
  // of its two copies serves it (docs/replication.md): the next ps's when the own ps is
  // unavailable or does not answer in time.
  virtual absl::StatusOr<JobStats> GetShardStats(int shard, const std::string& job_id,
                                                 bool replicated) const;
  // Moves a shard of a job without replicas to another ps, or back to its own (asked of the
  // shard's own ps, then of each ps it says the shard went to); the answer comes once the shard
  // is served there: it copies the whole shard, so the call may take a while (move_timeout).
  // INVALID_ARGUMENT when the shard is on request.to_ps already.
  virtual absl::StatusOr<MoveShardResponse> MoveShard(const MoveShardRequest& request) const;
  // Checkpoints (ps_service.proto). RestoreJob reads the shard's file: checkpoint_timeout.
  virtual absl::Status ArmCheckpoint(int ps, const ArmCheckpointRequest& request) const;
  virtual absl::Status CommitCheckpoint(int ps, const CommitCheckpointRequest& request) const;
  virtual absl::StatusOr<ListCheckpointsResponse> ListCheckpoints(
      int ps, const ListCheckpointsRequest& request) const;
  virtual absl::Status RestoreJob(int ps, const RestoreJobRequest& request) const;
  virtual absl::StatusOr<DeleteCheckpointsResponse> DeleteCheckpoints(int ps,
                                                              const std::string& job_id) const;

  // Any task. False when no connection came up within status_timeout.
  virtual bool WaitForConnected(absl::string_view job, int index) const;
  // The task's grpc.health.v1 serving status for the whole server.
  virtual absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> CheckHealth(
      absl::string_view job, int index) const;
  // What the task says of its process (proto/task.proto).
  virtual absl::StatusOr<TaskInfo> GetTaskInfo(absl::string_view job, int index) const;

 protected:
  // A client that makes no connection, for fakes that override every call: ps() is null.
  explicit ClusterClient(const ClusterSpec& cluster)
      : num_ps_(cluster.NumTasks(kPsJob)), cluster_(cluster) {}

 private:
  ClusterClient(const ClusterSpec& cluster, const ClusterClientOptions& options,
                std::unique_ptr<PsClient> ps);
  std::shared_ptr<grpc::Channel> Channel(absl::string_view job, int index) const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<grpc::Channel> WorkerChannel(int worker) const ABSL_LOCKS_EXCLUDED(mu_) {
    return Channel(kWorkerJob, worker);
  }
  // The shards of `job_id` (without replicas) that a ps not their own serves, moved there
  // (MovedShardsIn), from the ListJobs of every ps but `unreached` that answers.
  std::map<int, int> MovedShards(const std::string& job_id, int unreached) const;
  // StopJob and AskWorkerToLeave's call.
  absl::Status CallStopJob(int worker, const StopJobRequest& request) const;
  // Calls `method` of ps task `ps` with a deadline `timeout` from now.
  // `method` asked of ps `*ps`, then of each ps the answer says the shard moved to (at most
  // num_ps hops); `*ps` ends as the one that answered last, whose answer is returned. Where
  // `*ps` itself is down or does not answer in time, of the ps that MovedShards says serves
  // request.shard() of request.job_id(), if any.
  template <typename Request, typename Response>
  grpc::Status CallWhereShardIs(int* ps, const Request& request, Response* response,
                                grpc::Status (ParameterServer::Stub::*method)(
                                    grpc::ClientContext*, const Request&, Response*),
                                absl::Duration timeout) const;
  template <typename Request, typename Response>
  absl::StatusOr<Response> CallPs(int ps, absl::string_view name, const Request& request,
                                  grpc::Status (ParameterServer::Stub::*method)(
                                      grpc::ClientContext*, const Request&, Response*),
                                  absl::Duration timeout) const;
  // `status` as an absl::Status whose message names the task and `method`.
  absl::Status Named(absl::string_view job, int index, absl::string_view method,
                     const grpc::Status& status) const;

  const int num_ps_;
  const ClusterClientOptions options_;
  const std::unique_ptr<PsClient> ps_;
  // One channel per task, in task order.
  const std::vector<std::shared_ptr<grpc::Channel>> ps_channels_;
  mutable absl::Mutex mu_;
  ClusterSpec cluster_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<grpc::Channel>> worker_channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_CTL_CLUSTER_CLUSTER_CLIENT_H_
