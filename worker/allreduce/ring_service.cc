#include "worker/allreduce/ring_service.h"

#include "common/net/grpc_status.h"
#include "common/security/peer_identity.h"
#include "common/net/proto_byte_buffer.h"
#include "worker/allreduce/ring_piece.h"

namespace ps {

grpc::ServerUnaryReactor* RingService::Deliver(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) {
  absl::Status status = RequireTask(PeerOf(*context), "Deliver");
  if (status.ok()) {
    absl::StatusOr<RingPieceHeader> header = PeekRingPieceHeader(*request);
    status = header.status();
    if (status.ok() && !header->gave_up().empty()) {
      mailbox_->EndRun(header->job_id(), header->run_id(),
                       absl::FailedPreconditionError(header->gave_up()));
    } else if (status.ok()) {
      status = mailbox_->Put(header->job_id(), header->run_id(), header->tag(), *request);
    }
  }
  if (status.ok()) *response = SerializeToByteBuffer(RingAck());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace ps
