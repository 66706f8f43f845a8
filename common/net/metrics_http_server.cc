#include "common/net/metrics_http_server.h"

#include <utility>

namespace ps {

// The content type of Prometheus's text exposition format.
constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, const MetricsRegistry* registry) {
  HttpServerOptions options;
  options.name = "metrics";
  // Scrapes are rare and small: two threads.
  options.threads = 2;
  options.get["/metrics"] = [registry] {
    return HttpContent{registry->Render(), kMetricsContentType};
  };
  absl::StatusOr<std::unique_ptr<HttpServer>> http =
      HttpServer::Start(host, port, std::move(options));
  if (!http.ok()) return http.status();
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(*std::move(http)));
}

}  // namespace ps
