// The HTTP server of a daemon's /metrics page (common/net/http_server.h): GET /metrics answers 200
// with MetricsRegistry::Render() as `text/plain; version=0.0.4`, anything else 404.
// Plaintext always, also where the daemon's gRPC port uses TLS: Prometheus scrapes plaintext
// by default, and the page holds counts, not parameters.
//
// Lifecycle: Start() returns a server that is listening; Stop() (or the destructor) closes the
// port and joins its threads, after which the registry is no longer read.
#ifndef PS_COMMON_NET_METRICS_HTTP_SERVER_H_
#define PS_COMMON_NET_METRICS_HTTP_SERVER_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/net/http_server.h"
#include "common/metrics/metrics.h"

namespace ps {

class MetricsHttpServer {
 public:
  // Listens on `host` (a name, or an IP literal without brackets) and `port` (0: a free port, see
  // bound_port()). `registry` is not owned and must outlive Stop(). UNAVAILABLE naming the address
  // when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& host, int port,
                                                                  const MetricsRegistry* registry);

  int bound_port() const { return http_->bound_port(); }

  // Idempotent. Not thread-safe against itself.
  void Stop() { http_->Stop(); }

 private:
  explicit MetricsHttpServer(std::unique_ptr<HttpServer> http) : http_(std::move(http)) {}

  const std::unique_ptr<HttpServer> http_;
};

}  // namespace ps

#endif  // PS_COMMON_NET_METRICS_HTTP_SERVER_H_
