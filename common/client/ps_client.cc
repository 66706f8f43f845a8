#include "common/client/ps_client.h"

#include <functional>
#include <memory>

#include <google/protobuf/message.h>

#include "absl/strings/str_cat.h"
#include "common/net/proto_byte_buffer.h"

namespace ps {
namespace {

absl::Status IgnoreResponse(const grpc::ByteBuffer&) { return absl::OkStatus(); }

// A job-management call of `method` to shard `ps`, sending `request` (copied).
PsConnections::Call AdminCall(
    const PsConnections& connections, int ps, const std::string& method,
    const google::protobuf::Message& request,
    std::function<absl::Status(const grpc::ByteBuffer&)> on_response = IgnoreResponse) {
  std::shared_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  return PsConnections::Call{ps, method, [copy] { return SerializeToByteBuffer(*copy); },
                             std::move(on_response), connections.options().call_timeout, 0};
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(const PsClientOptions& options) {
  absl::StatusOr<std::unique_ptr<PsConnections>> connections = PsConnections::Create(options);
  if (!connections.ok()) return connections.status();
  return std::unique_ptr<PsClient>(new PsClient(*std::move(connections)));
}

absl::StatusOr<Placement> PsClient::CreateJob(const ParameterSpec& spec,
                                              const std::vector<ApplyLog>* replay) {
  absl::StatusOr<Placement> placement = PlaceVariables(spec, num_ps());
  if (!placement.ok()) return placement.status();
  if (replay != nullptr && static_cast<int>(replay->size()) != num_ps()) {
    return absl::InvalidArgumentError(absl::StrCat("a replay needs one apply log per ps: ",
                                                   replay->size(), " for ", num_ps(), " ps"));
  }
  std::vector<PsConnections::Call> calls;
  for (int ps = 0; ps < num_ps(); ++ps) {
    CreateJobRequest request;
    *request.mutable_spec() = spec;
    request.set_num_ps(num_ps());
    request.set_ps_index(ps);
    if (replay != nullptr) {
      *request.mutable_replay() = (*replay)[ps];
      request.set_replaying(true);
    }
    calls.push_back(AdminCall(*connections_, ps, "CreateJob", request));
  }
  absl::Status status = connections_->RunCalls(std::move(calls));
  if (!status.ok()) return status;
  return placement;
}

absl::Status PsClient::DeleteJob(const std::string& job_id) {
  DeleteJobRequest request;
  request.set_job_id(job_id);
  int not_found = 0;
  absl::Status first_error;
  for (int ps = 0; ps < num_ps(); ++ps) {
    absl::Status status =
        connections_->RunCalls({AdminCall(*connections_, ps, "DeleteJob", request)});
    if (absl::IsNotFound(status)) {
      ++not_found;
    } else if (!status.ok() && first_error.ok()) {
      first_error = status;
    }
  }
  if (!first_error.ok()) return first_error;
  if (not_found == num_ps()) {
    return absl::NotFoundError(absl::StrCat("unknown job \"", job_id, "\": no ps task has it"));
  }
  return absl::OkStatus();
}

absl::Status PsClient::LeaveJob(const std::string& job_id, const std::string& run_id,
                                int worker) {
  LeaveJobRequest request;
  request.set_job_id(job_id);
  request.set_run_id(run_id);
  request.set_worker(worker);
  std::vector<PsConnections::Call> calls;
  for (int ps = 0; ps < num_ps(); ++ps) {
    calls.push_back(AdminCall(*connections_, ps, "LeaveJob", request));
  }
  return connections_->RunCalls(std::move(calls));
}

absl::StatusOr<std::vector<ApplyLog>> PsClient::GetApplyLogs(const std::string& job_id) {
  ApplyLogRequest request;
  request.set_job_id(job_id);
  std::vector<ApplyLog> logs(num_ps());
  std::vector<PsConnections::Call> calls;
  for (int ps = 0; ps < num_ps(); ++ps) {
    calls.push_back(AdminCall(*connections_, ps, "GetApplyLog", request,
                              [&logs, ps](const grpc::ByteBuffer& response) {
                                return ParseFromByteBuffer(response, &logs[ps]);
                              }));
  }
  absl::Status status = connections_->RunCalls(std::move(calls));
  if (!status.ok()) return status;
  return logs;
}

absl::StatusOr<std::vector<JobStats>> PsClient::GetJobStats(const std::string& job_id) {
  JobStatsRequest request;
  request.set_job_id(job_id);
  std::vector<JobStats> stats(num_ps());
  std::vector<PsConnections::Call> calls;
  for (int ps = 0; ps < num_ps(); ++ps) {
    calls.push_back(AdminCall(*connections_, ps, "GetJobStats", request,
                              [&stats, ps](const grpc::ByteBuffer& response) {
                                return ParseFromByteBuffer(response, &stats[ps]);
                              }));
  }
  absl::Status status = connections_->RunCalls(std::move(calls));
  if (!status.ok()) return status;
  return stats;
}

}  // namespace ps
