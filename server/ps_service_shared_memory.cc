// OpenSharedMemory, and the segments a Push, Pull or PushPull names (docs/shared_memory.md,
// server/shared_memory_registry.h); the checks every link of a worker to this ps (a segment, a
// bulk stream) opens with.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/job/shared_memory_rule.h"
#include "server/ps_service.h"

namespace ps {

grpc::ServerUnaryReactor* ParameterService::OpenSharedMemory(
    grpc::CallbackServerContext* context, const OpenSharedMemoryRequest* request,
    OpenSharedMemoryResponse* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "OpenSharedMemory", RequireMember, &slot, &peer)) {
    return refused;
  }
  return Answer(context, &slot, DoOpenSharedMemory(peer, *request, response));
}

absl::Status ParameterService::DoOpenSharedMemory(const Peer& peer,
                                                  const OpenSharedMemoryRequest& request,
                                                  OpenSharedMemoryResponse* response) {
  // Before the job is found: a DeleteJob between here and the segment's fetch drops it.
  const uint64_t drop_mark = shared_memory_ == nullptr ? 0 : shared_memory_->DropMark();
  absl::StatusOr<std::shared_ptr<ShardJob>> job = FindJobForWorkerLink(
      peer, request.job_id(), request.worker(), request.run_id(), "OpenSharedMemory");
  if (!job.ok()) return job.status();
  const ParameterSpec& spec = (*job)->spec();
  const std::string prefix = absl::StrCat("job \"", request.job_id(), "\" on ", TaskName(), ": ");
  if (shared_memory_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "this ps serves no shared memory (--shared_memory_mb=0, or its socket could "
        "not be made: see its log); send tensors in the requests"));
  }
  const std::string why_not = WhyNoSharedMemory(spec);
  if (!why_not.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix, "no shared memory: ", why_not, "; send tensors in the requests"));
  }
  const int64_t floats = (*job)->num_parameters();
  if (floats == 0) {
    return absl::FailedPreconditionError(absl::StrCat(prefix, "this shard holds no values"));
  }
  absl::StatusOr<SharedMemoryRegistry::Opened> opened =
      shared_memory_->Open(request.job_id(), drop_mark, request.worker(), floats, floats);
  if (!opened.ok()) return opened.status();
  response->set_segment(opened->segment);
  response->set_ticket(opened->ticket);
  response->set_socket_path(opened->socket_path);
  response->set_push_floats(floats);
  response->set_pull_floats(floats);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ShardJob>> ParameterService::FindJobForWorkerLink(
    const Peer& peer, const std::string& job_id, int worker, const std::string& run_id,
    absl::string_view method) {
  absl::Status allowed = RequireWorker(peer, job_id, worker, method);
  if (!allowed.ok()) return allowed;
  absl::StatusOr<std::shared_ptr<ShardJob>> job =
      FindJobFor(peer, job_id, JobAccess::kData, method);
  if (!job.ok()) return job.status();
  const ParameterSpec& spec = (*job)->spec();
  const std::string prefix = absl::StrCat("job \"", job_id, "\" on ", TaskName(), ": ");
  if (worker < 0 || worker >= spec.num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "worker ", worker,
                                                   " is out of range: the job has ",
                                                   spec.num_workers(), " workers"));
  }
  if (run_id != spec.run_id()) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "run \"", run_id, "\" is not the job's run here (\"", spec.run_id(), "\")"));
  }
  return job;
}

absl::StatusOr<SharedMemoryRegistry::Region> ParameterService::SharedMemoryOf(
    uint64_t segment, const std::string& job_id, int worker) const {
  if (shared_memory_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        TaskName(), " serves no shared memory: send the tensor in the request"));
  }
  return shared_memory_->Find(segment, job_id, worker);
}

}  // namespace ps
