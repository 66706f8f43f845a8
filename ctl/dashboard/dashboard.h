// psctl dashboard's HTTP server (common/net/http_server.h): GET / answers the status page
// (ctl/dashboard/page.h), GET /api/snapshot a cluster snapshot's JSON
// (ctl/cluster/cluster_snapshot.h) and GET /api/history the charts' history
// (ctl/dashboard/job_history.h), which the page polls once a second; anything else 404.
// Plaintext HTTP: psctl binds 127.0.0.1 unless told otherwise.
//
// Lifecycle: Start() returns a server that is listening; Stop() (or the destructor) closes the
// port and joins its threads, after which the snapshot function is no longer called.
#ifndef PS_CTL_DASHBOARD_DASHBOARD_H_
#define PS_CTL_DASHBOARD_DASHBOARD_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/net/http_server.h"

namespace ps {

class DashboardServer {
 public:
  // The JSON of the latest snapshot of the cluster, or of the charts' history. Called for each
  // GET /api/snapshot, or /api/history, on the server's threads, up to a few at once.
  using SnapshotFunction = std::function<std::string()>;

  // Listens on `host` (a name, or an IP literal without brackets) and `port` (0: a free port, see
  // bound_port()). UNAVAILABLE naming the address when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<DashboardServer>> Start(const std::string& host, int port,
                                                                SnapshotFunction snapshot,
                                                                SnapshotFunction history);

  int bound_port() const { return http_->bound_port(); }

  // Idempotent. Not thread-safe against itself.
  void Stop() { http_->Stop(); }

 private:
  explicit DashboardServer(std::unique_ptr<HttpServer> http) : http_(std::move(http)) {}

  const std::unique_ptr<HttpServer> http_;
};

}  // namespace ps

#endif  // PS_CTL_DASHBOARD_DASHBOARD_H_
