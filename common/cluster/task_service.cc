#include "common/cluster/task_service.h"

#include <unistd.h>

#include <cmath>
#include <utility>

#include "common/process/build_info.h"
#include "common/net/grpc_status.h"
#include "common/metrics/machine_info.h"
#include "common/security/peer_identity.h"
#include "common/metrics/process_stats.h"

namespace ps {

TaskService::TaskService(std::string job, int index, std::string device)
    : job_(std::move(job)),
      index_(index),
      device_(std::move(device)),
      machine_(DescribeMachine()) {}

grpc::ServerUnaryReactor* TaskService::GetTaskInfo(grpc::CallbackServerContext* context,
                                                   const TaskInfoRequest* /*request*/,
                                                   TaskInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status member = RequireMember(PeerOf(*context), "GetTaskInfo"); !member.ok()) {
    reactor->Finish(ToGrpcStatus(member));
    return reactor;
  }
  const ProcessStats stats = ReadProcessStats();
  response->set_job(job_);
  response->set_index(index_);
  response->set_version(VersionString());
  response->set_pid(getpid());
  response->set_start_time_ms(static_cast<int64_t>(std::llround(stats.start_time_seconds * 1000)));
  response->set_cpu_seconds(stats.cpu_seconds);
  response->set_resident_bytes(stats.resident_bytes);
  response->set_threads(stats.threads);
  response->set_insecure(insecure_);
  response->set_metrics_port(metrics_port_.load(std::memory_order_relaxed));
  response->set_device(device_);
  *response->mutable_machine() = machine_;
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace ps
