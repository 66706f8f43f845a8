// How every daemon starts its gRPC server: the standard health service (grpc.health.v1),
// server reflection when asked for, SO_REUSEPORT off (else a second server on a taken port
// "succeeds"), and a message size limit.
#ifndef PS_COMMON_NET_GRPC_SERVER_H_
#define PS_COMMON_NET_GRPC_SERVER_H_

#include <grpcpp/server.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics/rpc_metrics.h"
#include "common/security/transport_security.h"

namespace ps {

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int bound_port = 0;
};

// Starts a server listening on `address` ("host:port"; port 0 picks a free one) with `services`
// (not owned; each must outlive the server), speaking TLS as `security` says. UNAVAILABLE naming
// the address when it cannot listen. A plaintext server on a host other than loopback logs a
// warning: anyone who can reach the port can call it.
// With `reflection`, the server also lists its services and their messages to anyone who asks
// (grpc_cli, grpcurl): handy when debugging, off by default. With `rpc_metrics` (not owned;
// must outlive the server), every call answered is counted there.
absl::StatusOr<StartedServer> StartGrpcServer(const std::string& address,
                                              const std::vector<grpc::Service*>& services,
                                              int max_message_bytes,
                                              const TransportSecurity& security = {},
                                              bool reflection = false,
                                              RpcMetrics* rpc_metrics = nullptr);

}  // namespace ps

#endif  // PS_COMMON_NET_GRPC_SERVER_H_
