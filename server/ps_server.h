// A running ps task: the gRPC server with the ParameterServer service, the Task service
// (common/cluster/task_service.h), the standard health service (grpc.health.v1) and, when asked
// for, server reflection.
//
// Lifecycle: Start() returns a server in STARTED; Shutdown() moves it to STOPPED: it refuses
// new calls, ends parked pulls with UNAVAILABLE, and lets calls in flight finish within
// `grace`. The destructor shuts down if needed. With a metrics port, an HTTP server beside the
// gRPC one serves the service's metrics (ParameterService::WriteMetrics) at /metrics, in
// plaintext also under TLS (common/net/metrics_http_server.h); Shutdown closes it first.
#ifndef PS_SERVER_PS_SERVER_H_
#define PS_SERVER_PS_SERVER_H_

#include <memory>
#include <string>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"
#include "common/net/metrics_http_server.h"
#include "common/metrics/rpc_metrics.h"
#include "common/cluster/task_service.h"
#include "common/security/transport_security.h"
#include "server/ps_service.h"

namespace ps {

struct PsServerOptions {
  // Where to listen, "host:port"; port 0 picks a free port (see bound_port()).
  std::string listen_address = "0.0.0.0:0";
  ParameterServiceOptions service;
  // Largest request or response; a bigger one fails with RESOURCE_EXHAUSTED. Clients use the
  // same limit (PsClientOptions::max_message_bytes).
  int max_message_bytes = 1 << 30;
  TransportSecurity security;  // Plaintext by default.
  // The bulk streams' port (docs/bulk_streams.md) on listen_address's host: 0 a free one, -1
  // none. None where the server serves TLS: the streams would leave its channels' protection.
  int bulk_port = 0;
  bool reflection = false;     // Server reflection (--reflection).
  // /metrics: the port (0: a free one, see metrics_port()), or -1 for none; on metrics_host.
  int metrics_port = -1;
  std::string metrics_host = "127.0.0.1";
};

class PsServer {
 public:
  // UNAVAILABLE naming the address when it cannot be bound (in use, no such interface).
  static absl::StatusOr<std::unique_ptr<PsServer>> Start(const PsServerOptions& options);
  ~PsServer();

  int bound_port() const { return bound_port_; }
  // The bulk streams' port, or -1 without them.
  int bulk_port() const { return service_->bulk_port(); }
  // The /metrics port, or -1 without one (PsServerOptions::metrics_port).
  int metrics_port() const {
    return metrics_server_ == nullptr ? -1 : metrics_server_->bound_port();
  }

  // The ParameterServer service this server runs (for in-process clusters and tests).
  ParameterService& service() { return *service_; }

  // STARTED -> STOPPED; idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(5));
  // Blocks until Shutdown has been called (from another thread or a signal handler thread).
  void Wait();

 private:
  PsServer() = default;

  std::unique_ptr<ParameterService> service_;
  std::unique_ptr<TaskService> task_service_;
  // Before server_, whose calls it counts. Null without a metrics port.
  std::unique_ptr<RpcMetrics> rpc_metrics_;
  std::unique_ptr<grpc::Server> server_;
  MetricsRegistry metrics_;                            // Its collector reads service_.
  std::unique_ptr<MetricsHttpServer> metrics_server_;  // Null without a metrics port.
  int bound_port_ = 0;
  bool stopped_ = false;
};

}  // namespace ps

#endif  // PS_SERVER_PS_SERVER_H_
