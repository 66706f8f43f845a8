// A cluster of no daemons for unit tests of psctl's decisions (lost workers, checkpoints,
// recovery): each call answers what the test set and is recorded; a call the test did not set
// up answers UNIMPLEMENTED naming it, except the per-ps listings, where a ps not set is down.
#ifndef PS_CTL_CLUSTER_TESTING_FAKE_CLUSTER_CLIENT_H_
#define PS_CTL_CLUSTER_TESTING_FAKE_CLUSTER_CLIENT_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctl/cluster/cluster_client.h"

namespace ps {

class FakeClusterClient : public ClusterClient {
 public:
  explicit FakeClusterClient(const ClusterSpec& cluster) : ClusterClient(cluster) {}

  // What the cluster answers.
  std::set<int> workers_up;           // GetWorkerStatus: OK for these, UNAVAILABLE for others.
  std::map<int, std::vector<JobProgress>> worker_jobs;  // GetWorkerStatus's jobs by worker.
  std::map<int, JobStats> job_stats;  // GetJobStats by ps; NOT_FOUND for a ps not here.
  absl::Status start_job_status;      // StartJob's answer.
  absl::Status arm_status;            // ArmCheckpoint's answer.
  absl::Status commit_status;         // CommitCheckpoint's answer.
  absl::Status stop_job_status;       // StopJob's answer.
  absl::Status delete_job_status;     // DeleteJob's answer.
  // ListJobs and ListCheckpoints by ps; UNAVAILABLE ("ps:N is down") for a ps not here.
  std::map<int, ListJobsResponse> ps_jobs;
  std::map<int, ListCheckpointsResponse> ps_checkpoints;
  std::map<int, absl::Status> restore_status;  // RestoreJob's answer by ps; OK for a ps not here.

  // What was called, in order.
  mutable std::vector<std::pair<int, StartJobRequest>> started;
  mutable std::vector<std::pair<int, ArmCheckpointRequest>> armed;
  mutable std::vector<std::pair<int, CommitCheckpointRequest>> committed;
  mutable std::vector<std::pair<int, std::string>> stopped;  // StopJob: worker, job id.
  mutable std::vector<std::string> deleted;                   // DeleteJob's job ids.
  mutable std::vector<std::pair<int, RestoreJobRequest>> restored;

  // A client whose every call this fake answers and records, for code that makes its clients
  // afresh (a recovery reconnects for each probe). It must not outlive this fake.
  std::unique_ptr<ClusterClient> NewHandle() const;

  absl::StatusOr<StartJobResponse> StartJob(int worker,
                                            const StartJobRequest& request) const override {
    started.emplace_back(worker, request);
    if (!start_job_status.ok()) return start_job_status;
    return StartJobResponse();
  }
  absl::Status StopJob(int worker, const std::string& job_id) const override {
    stopped.emplace_back(worker, job_id);
    return stop_job_status;
  }
  absl::Status DeleteJob(const std::string& job_id) const override {
    deleted.push_back(job_id);
    return delete_job_status;
  }
  absl::StatusOr<WorkerStatus> GetWorkerStatus(int worker) const override {
    if (workers_up.count(worker) == 0) {
      return absl::UnavailableError(absl::StrCat("worker:", worker, " is down"));
    }
    WorkerStatus status;
    status.set_worker(worker);
    auto jobs = worker_jobs.find(worker);
    if (jobs != worker_jobs.end()) {
      for (const JobProgress& job : jobs->second) *status.add_jobs() = job;
    }
    return status;
  }
  absl::Status WatchJob(int, const std::string&, grpc::ClientContext*,
                        const std::function<void(const JobProgress&)>&) const override {
    return Unfaked("WatchJob");
  }
  absl::StatusOr<ListJobsResponse> ListJobs(int ps) const override { return OfPs(ps_jobs, ps); }
  absl::StatusOr<JobStats> GetJobStats(int ps, const std::string& job_id) const override {
    auto it = job_stats.find(ps);
    if (it == job_stats.end()) {
      return absl::NotFoundError(absl::StrCat("ps:", ps, " has no job \"", job_id, "\""));
    }
    return it->second;
  }
  absl::StatusOr<JobStats> GetShardStats(int shard, const std::string& job_id,
                                         bool) const override {
    return GetJobStats(shard, job_id);
  }
  absl::Status ArmCheckpoint(int ps, const ArmCheckpointRequest& request) const override {
    armed.emplace_back(ps, request);
    return arm_status;
  }
  absl::Status CommitCheckpoint(int ps, const CommitCheckpointRequest& request) const override {
    committed.emplace_back(ps, request);
    return commit_status;
  }
  absl::StatusOr<ListCheckpointsResponse> ListCheckpoints(
      int ps, const ListCheckpointsRequest&) const override {
    return OfPs(ps_checkpoints, ps);
  }
  absl::Status RestoreJob(int ps, const RestoreJobRequest& request) const override {
    restored.emplace_back(ps, request);
    auto it = restore_status.find(ps);
    return it == restore_status.end() ? absl::OkStatus() : it->second;
  }
  absl::StatusOr<DeleteCheckpointsResponse> DeleteCheckpoints(int,
                                                              const std::string&) const override {
    return Unfaked("DeleteCheckpoints");
  }
  bool WaitForConnected(absl::string_view, int) const override { return false; }
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> CheckHealth(
      absl::string_view, int) const override {
    return Unfaked("CheckHealth");
  }
  absl::StatusOr<TaskInfo> GetTaskInfo(absl::string_view, int) const override {
    return Unfaked("GetTaskInfo");
  }

 private:
  static absl::Status Unfaked(absl::string_view call) {
    return absl::UnimplementedError(absl::StrCat(call, " is not faked"));
  }
  template <typename Response>
  static absl::StatusOr<Response> OfPs(const std::map<int, Response>& answers, int ps) {
    auto it = answers.find(ps);
    if (it == answers.end()) return absl::UnavailableError(absl::StrCat("ps:", ps, " is down"));
    return it->second;
  }
};

// Forwards every call to the fake it was made from.
class FakeClusterClientHandle : public ClusterClient {
 public:
  explicit FakeClusterClientHandle(const ClusterClient& fake)
      : ClusterClient(fake.cluster()), fake_(fake) {}

  absl::StatusOr<StartJobResponse> StartJob(int worker,
                                            const StartJobRequest& request) const override {
    return fake_.StartJob(worker, request);
  }
  absl::Status StopJob(int worker, const std::string& job_id) const override {
    return fake_.StopJob(worker, job_id);
  }
  absl::StatusOr<WorkerStatus> GetWorkerStatus(int worker) const override {
    return fake_.GetWorkerStatus(worker);
  }
  absl::Status WatchJob(int worker, const std::string& job_id, grpc::ClientContext* context,
                        const std::function<void(const JobProgress&)>& on_progress) const override {
    return fake_.WatchJob(worker, job_id, context, on_progress);
  }
  absl::Status DeleteJob(const std::string& job_id) const override {
    return fake_.DeleteJob(job_id);
  }
  absl::StatusOr<ListJobsResponse> ListJobs(int ps) const override { return fake_.ListJobs(ps); }
  absl::StatusOr<JobStats> GetJobStats(int ps, const std::string& job_id) const override {
    return fake_.GetJobStats(ps, job_id);
  }
  absl::StatusOr<JobStats> GetShardStats(int shard, const std::string& job_id,
                                         bool replicated) const override {
    return fake_.GetShardStats(shard, job_id, replicated);
  }
  absl::Status ArmCheckpoint(int ps, const ArmCheckpointRequest& request) const override {
    return fake_.ArmCheckpoint(ps, request);
  }
  absl::Status CommitCheckpoint(int ps, const CommitCheckpointRequest& request) const override {
    return fake_.CommitCheckpoint(ps, request);
  }
  absl::StatusOr<ListCheckpointsResponse> ListCheckpoints(
      int ps, const ListCheckpointsRequest& request) const override {
    return fake_.ListCheckpoints(ps, request);
  }
  absl::Status RestoreJob(int ps, const RestoreJobRequest& request) const override {
    return fake_.RestoreJob(ps, request);
  }
  absl::StatusOr<DeleteCheckpointsResponse> DeleteCheckpoints(
      int ps, const std::string& job_id) const override {
    return fake_.DeleteCheckpoints(ps, job_id);
  }
  bool WaitForConnected(absl::string_view job, int index) const override {
    return fake_.WaitForConnected(job, index);
  }
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> CheckHealth(
      absl::string_view job, int index) const override {
    return fake_.CheckHealth(job, index);
  }
  absl::StatusOr<TaskInfo> GetTaskInfo(absl::string_view job, int index) const override {
    return fake_.GetTaskInfo(job, index);
  }

 private:
  const ClusterClient& fake_;
};

inline std::unique_ptr<ClusterClient> FakeClusterClient::NewHandle() const {
  return std::make_unique<FakeClusterClientHandle>(*this);
}

}  // namespace ps

#endif  // PS_CTL_CLUSTER_TESTING_FAKE_CLUSTER_CLIENT_H_
