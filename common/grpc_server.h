// How every daemon starts its gRPC server: the standard health service (grpc.health.v1),
// server reflection, SO_REUSEPORT off (else a second server on a taken port "succeeds"), and a
// message size limit.
#ifndef PS_COMMON_GRPC_SERVER_H_
#define PS_COMMON_GRPC_SERVER_H_

#include <memory>
#include <string>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"

namespace ps {

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int bound_port = 0;
};

// Starts a server listening on `address` ("host:port"; port 0 picks a free one) with `service`
// (not owned; must outlive the server). UNAVAILABLE naming the address when it cannot listen.
absl::StatusOr<StartedServer> StartGrpcServer(const std::string& address, grpc::Service* service,
                                              int max_message_bytes);

}  // namespace ps

#endif  // PS_COMMON_GRPC_SERVER_H_
