// A cluster of no daemons for unit tests of psctl's decisions (lost workers, checkpoints,
// recovery): each call answers what the test set and is recorded; a call the test did not set
// up answers UNIMPLEMENTED naming it.
#ifndef PS_CTL_CLUSTER_TESTING_FAKE_CLUSTER_CLIENT_H_
#define PS_CTL_CLUSTER_TESTING_FAKE_CLUSTER_CLIENT_H_

#include <map>
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
  std::map<int, JobStats> job_stats;  // GetJobStats by ps; NOT_FOUND for a ps not here.
  absl::Status start_job_status;      // StartJob's answer.
  absl::Status arm_status;            // ArmCheckpoint's answer.
  absl::Status commit_status;         // CommitCheckpoint's answer.

  // What was called, in order.
  mutable std::vector<std::pair<int, StartJobRequest>> started;
  mutable std::vector<std::pair<int, ArmCheckpointRequest>> armed;
  mutable std::vector<std::pair<int, CommitCheckpointRequest>> committed;

  absl::StatusOr<StartJobResponse> StartJob(int worker,
                                            const StartJobRequest& request) const override {
    started.emplace_back(worker, request);
    if (!start_job_status.ok()) return start_job_status;
    return StartJobResponse();
  }
  absl::Status StopJob(int, const std::string&) const override { return Unfaked("StopJob"); }
  absl::StatusOr<WorkerStatus> GetWorkerStatus(int worker) const override {
    if (workers_up.count(worker) == 0) {
      return absl::UnavailableError(absl::StrCat("worker:", worker, " is down"));
    }
    return WorkerStatus();
  }
  absl::Status WatchJob(int, const std::string&, grpc::ClientContext*,
                        const std::function<void(const JobProgress&)>&) const override {
    return Unfaked("WatchJob");
  }
  absl::StatusOr<ListJobsResponse> ListJobs(int) const override { return Unfaked("ListJobs"); }
  absl::StatusOr<JobStats> GetJobStats(int ps, const std::string& job_id) const override {
    auto it = job_stats.find(ps);
    if (it == job_stats.end()) {
      return absl::NotFoundError(absl::StrCat("ps:", ps, " has no job \"", job_id, "\""));
    }
    return it->second;
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
      int, const ListCheckpointsRequest&) const override {
    return Unfaked("ListCheckpoints");
  }
  absl::Status RestoreJob(int, const RestoreJobRequest&) const override {
    return Unfaked("RestoreJob");
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
};

}  // namespace ps

#endif  // PS_CTL_CLUSTER_TESTING_FAKE_CLUSTER_CLIENT_H_
