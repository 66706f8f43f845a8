// OpenBulkStream, the streams a Pull names, and the pushes' frames read from them
// (docs/bulk_streams.md, server/bulk_streams.h).
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/ps_service.h"

namespace ps {

grpc::ServerUnaryReactor* ParameterService::OpenBulkStream(grpc::CallbackServerContext* context,
                                                           const OpenBulkStreamRequest* request,
                                                           OpenBulkStreamResponse* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "OpenBulkStream", RequireMember, &slot, &peer)) {
    return refused;
  }
  return Answer(context, &slot, DoOpenBulkStream(peer, *request, response));
}

absl::Status ParameterService::DoOpenBulkStream(const Peer& peer,
                                                const OpenBulkStreamRequest& request,
                                                OpenBulkStreamResponse* response) {
  absl::StatusOr<std::shared_ptr<ShardJob>> job = FindJobForWorkerLink(
      peer, request.job_id(), request.worker(), request.run_id(), "OpenBulkStream");
  if (!job.ok()) return job.status();
  const std::string prefix = absl::StrCat("job \"", request.job_id(), "\" on ", TaskName(), ": ");
  if (bulk_streams_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "this ps opens no bulk streams (it serves TLS, whose channels they would leave, "
        "or runs with --bulk_port=-1, or its port could not be bound: see its log); pulls' "
        "values go in their answers"));
  }
  if ((*job)->num_parameters() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(prefix, "this shard holds no values"));
  }
  absl::StatusOr<BulkStreams::Opened> opened =
      bulk_streams_->Open(request.job_id(), request.worker());
  if (!opened.ok()) return opened.status();
  response->set_stream(opened->stream);
  response->set_ticket(opened->ticket);
  response->set_port(bulk_streams_->port());
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<BulkStream>> ParameterService::BulkStreamOf(
    uint64_t stream, const std::string& job_id, int worker) const {
  if (bulk_streams_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat(TaskName(), " opens no bulk streams: the values go in the answer"));
  }
  return bulk_streams_->Find(stream, job_id, worker);
}

void ParameterService::ReceiveBulkPush(const PushRequestHeader& header, AwaitedFrame awaited,
                                       std::function<void(SettledPush)> then) {
  absl::StatusOr<std::shared_ptr<BulkStream>> stream =
      BulkStreamOf(header.bulk_stream(), header.job_id(), header.worker());
  if (!stream.ok()) {
    then(awaited.finish(stream.status(), false));
    return;
  }
  (*stream)->Receive(
      header.bulk_frame(), std::move(awaited.destinations), awaited.buffer,
      [this, finish = std::move(awaited.finish), then = std::move(then)](absl::Status received,
                                                                         bool finite) {
        // Off the stream's reader thread, which goes on to the next frame.
        RunOnPushThread([finish, then, received, finite] { then(finish(received, finite)); });
      });
}

void ParameterService::RefuseBulkFrame(const PushRequestHeader& header) {
  absl::StatusOr<std::shared_ptr<BulkStream>> stream =
      BulkStreamOf(header.bulk_stream(), header.job_id(), header.worker());
  if (stream.ok()) (*stream)->Refuse(header.bulk_frame());
}

}  // namespace ps
