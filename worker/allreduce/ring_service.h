// The Ring gRPC service of a ps_worker (proto/ring.proto): takes the ring messages the
// previous worker of a ring sends, and holds them in the worker's mailbox for its all-reduce.
// Callers must be cluster members (common/security/peer_identity.h, RequireMember), as on the other
// worker services.
#ifndef PS_WORKER_ALLREDUCE_RING_SERVICE_H_
#define PS_WORKER_ALLREDUCE_RING_SERVICE_H_

#include "proto/ring.grpc.pb.h"
#include "worker/allreduce/ring_mailbox.h"

namespace ps {

// Thread-safe. Answers every call at once (the mailbox never waits).
class RingService final : public Ring::WithRawCallbackMethod_Deliver<Ring::Service> {
 public:
  // `mailbox` is not owned and must outlive the service.
  explicit RingService(RingMailbox* mailbox) : mailbox_(mailbox) {}

  grpc::ServerUnaryReactor* Deliver(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;

 private:
  RingMailbox* const mailbox_;
};

}  // namespace ps

#endif  // PS_WORKER_ALLREDUCE_RING_SERVICE_H_
