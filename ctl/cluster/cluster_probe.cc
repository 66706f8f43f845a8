#include "ctl/cluster/cluster_probe.h"

#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ctl/cluster/cluster_client.h"

namespace ps {
namespace {

using ::grpc::health::v1::HealthCheckResponse;

// "" when the task is up, healthy and of its role; else the problem, and in `*wrong_role`
// whether it is a daemon of the other role.
std::string ProbeTask(const ClusterClient& client, absl::string_view job, int index,
                      bool* wrong_role) {
  const std::string task = client.TaskName(job, index);
  if (!client.WaitForConnected(job, index)) {
    return absl::StrCat(task, ": unreachable within ",
                        absl::FormatDuration(client.options().status_timeout),
                        "; is the daemon running there, and is the port open?");
  }
  absl::StatusOr<HealthCheckResponse::ServingStatus> health = client.CheckHealth(job, index);
  if (!health.ok()) {
    return absl::StrCat(task, ": not healthy (", ClusterClient::Detail(health.status()),
                        "); restart the daemon");
  }
  if (*health != HealthCheckResponse::SERVING) {
    return absl::StrCat(task, ": not healthy (", HealthCheckResponse::ServingStatus_Name(*health),
                        "); restart the daemon");
  }
  absl::Status status;
  if (job == kPsJob) {
    status = client.ListJobs(index).status();
  } else {
    absl::StatusOr<WorkerStatus> worker = client.GetWorkerStatus(index);
    if (worker.ok() && worker->worker() != index) {
      return absl::StrCat(task, ": this is worker:", worker->worker(), ", not worker:", index,
                          "; the daemons use a different ClusterSpec");
    }
    status = worker.status();
  }
  if (absl::IsUnimplemented(status)) {
    *wrong_role = true;
    return absl::StrCat(task, ": not a ", job == kPsJob ? "ps_server" : "ps_worker",
                        " (it does not serve the ", job, " service); start ",
                        job == kPsJob ? "ps_server --task=ps:" : "ps_worker --task=worker:",
                        index, " there");
  }
  if (!status.ok()) return absl::StrCat(task, ": ", ClusterClient::Detail(status));
  return "";
}

}  // namespace

std::vector<std::string> ProbeCluster(const ClusterSpec& cluster, absl::Duration timeout,
                                      std::vector<int>* workers_not_ready, int* wrong_roles) {
  ClusterClientOptions options;
  options.status_timeout = timeout;
  absl::StatusOr<std::unique_ptr<ClusterClient>> client = ClusterClient::Create(cluster, options);
  if (!client.ok()) return {std::string(client.status().message())};
  struct Probe {
    absl::string_view job;
    int index;
    std::string problem;
    bool wrong_role = false;
  };
  std::vector<Probe> probes;
  for (absl::string_view job : {kPsJob, kWorkerJob}) {
    for (int i = 0; i < cluster.NumTasks(job); ++i) probes.push_back({job, i, ""});
  }
  std::vector<std::thread> threads;
  for (Probe& probe : probes) {
    threads.emplace_back(
        [&probe, &client] {
          probe.problem = ProbeTask(**client, probe.job, probe.index, &probe.wrong_role);
        });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<std::string> problems;
  for (const Probe& probe : probes) {
    if (probe.problem.empty()) continue;
    problems.push_back(probe.problem);
    if (wrong_roles != nullptr && probe.wrong_role) ++*wrong_roles;
    if (workers_not_ready != nullptr && probe.job == kWorkerJob) {
      workers_not_ready->push_back(probe.index);
    }
  }
  return problems;
}

}  // namespace ps
