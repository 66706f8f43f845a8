#include "ctl/dashboard/dashboard.h"

#include "ctl/dashboard/page.h"

namespace ps {

absl::StatusOr<std::unique_ptr<DashboardServer>> DashboardServer::Start(const std::string& host,
                                                                        int port,
                                                                        SnapshotFunction snapshot,
                                                                        SnapshotFunction history) {
  HttpServerOptions options;
  options.name = "dashboard";
  // A page polls once a second, one request at a time; a few threads serve a few viewers.
  options.threads = 4;
  // Browsers open connections ahead of their requests: closed after 1 s (the /metrics
  // default), one could be gone by the time a slowed browser sends the request on it.
  options.idle_timeout_seconds = 10;
  options.get["/"] = [] {
    return HttpContent{std::string(DashboardPage()), "text/html; charset=utf-8"};
  };
  options.get["/api/snapshot"] = [snapshot = std::move(snapshot)] {
    return HttpContent{snapshot(), "application/json"};
  };
  options.get["/api/history"] = [history = std::move(history)] {
    return HttpContent{history(), "application/json"};
  };
  absl::StatusOr<std::unique_ptr<HttpServer>> http =
      HttpServer::Start(host, port, std::move(options));
  if (!http.ok()) return http.status();
  return std::unique_ptr<DashboardServer>(new DashboardServer(*std::move(http)));
}

}  // namespace ps
