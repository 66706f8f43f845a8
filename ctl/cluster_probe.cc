#include "ctl/cluster_probe.h"

#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps_service.grpc.pb.h"
#include "proto/worker_service.grpc.pb.h"

namespace ps {
namespace {

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

// "" when the task is up, healthy and of its role; else the problem.
std::string ProbeTask(const std::string& job, int index, const std::string& address,
                      absl::Duration timeout) {
  std::string task = absl::StrCat(job, ":", index, " (", address, ")");
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    return absl::StrCat(task, ": unreachable within ", absl::FormatDuration(timeout),
                        "; is the daemon running there, and is the port open?");
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context, timeout);
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status status =
        grpc::health::v1::Health::NewStub(channel)->Check(&context, request, &response);
    if (!status.ok() ||
        response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::StrCat(task, ": not healthy (",
                          status.ok() ? grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                                            response.status())
                                      : status.error_message(),
                          "); restart the daemon");
    }
  }
  grpc::ClientContext context;
  SetDeadline(&context, timeout);
  grpc::Status status;
  if (job == kPsJob) {
    ListJobsRequest request;
    ListJobsResponse response;
    status = ParameterServer::NewStub(channel)->ListJobs(&context, request, &response);
  } else {
    WorkerStatusRequest request;
    WorkerStatus response;
    status = Worker::NewStub(channel)->GetStatus(&context, request, &response);
    if (status.ok() && response.worker() != index) {
      return absl::StrCat(task, ": this is worker:", response.worker(),
                          ", not worker:", index, "; the daemons use a different ClusterSpec");
    }
  }
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    return absl::StrCat(task, ": not a ", job == kPsJob ? "ps_server" : "ps_worker",
                        " (it does not serve the ", job, " service); start ",
                        job == kPsJob ? "ps_server --task=ps:" : "ps_worker --task=worker:",
                        index, " there");
  }
  if (!status.ok()) return absl::StrCat(task, ": ", status.error_message());
  return "";
}

}  // namespace

std::vector<std::string> ProbeCluster(const ClusterSpec& cluster, absl::Duration timeout) {
  struct Probe {
    std::string job;
    int index;
    std::string address;
    std::string problem;
  };
  std::vector<Probe> probes;
  for (absl::string_view job : {kPsJob, kWorkerJob}) {
    const std::vector<std::string>& tasks = cluster.Tasks(job);
    for (size_t i = 0; i < tasks.size(); ++i) {
      probes.push_back({std::string(job), static_cast<int>(i), tasks[i], ""});
    }
  }
  std::vector<std::thread> threads;
  for (Probe& probe : probes) {
    threads.emplace_back(
        [&probe, timeout] { probe.problem = ProbeTask(probe.job, probe.index, probe.address, timeout); });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<std::string> problems;
  for (const Probe& probe : probes) {
    if (!probe.problem.empty()) problems.push_back(probe.problem);
  }
  return problems;
}

}  // namespace ps
