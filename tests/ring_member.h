// One member of a ring all-reduce over gRPC in a process of its own, on 127.0.0.1, served as a
// ps_worker serves it (a Ring service and mailbox), for tests/ring_process_test.cc (through
// ring_member_main.cc) and bench/allreduce_bench.
#ifndef PS_TESTS_RING_MEMBER_H_
#define PS_TESTS_RING_MEMBER_H_

#include <grpcpp/server.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security/transport_security.h"
#include "worker/allreduce/ring_link.h"
#include "worker/allreduce/ring_mailbox.h"
#include "worker/allreduce/ring_service.h"

namespace ps {

class GrpcRingMember {
 public:
  // Serves the Ring service on 127.0.0.1:ports[rank], makes the link of worker:`rank` in the
  // ring of workers at `ports` (Send and Receive wait at most `deadline`), both secured as
  // `security` says, and waits up to a minute for the next member to listen.
  static absl::StatusOr<std::unique_ptr<GrpcRingMember>> Start(
      const std::vector<int>& ports, int rank, absl::Duration deadline,
      const TransportSecurity& security = {});
  // Ends the run and stops serving.
  ~GrpcRingMember();

  RingLink* link() { return link_.get(); }

 private:
  GrpcRingMember() : service_(&mailbox_) {}

  RingMailbox mailbox_;
  RingService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RingLink> link_;
};

}  // namespace ps

#endif  // PS_TESTS_RING_MEMBER_H_
