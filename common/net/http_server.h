// A small HTTP server on its own threads (cpp-httplib), for the pages a process serves beside its
// gRPC port: a daemon's /metrics (common/net/metrics_http_server.h) and psctl dashboard's status
// page (ctl/dashboard/dashboard.h). It answers GET for the exact paths it was given, 404 for
// anything else. Plaintext, without keep-alive: one request per connection (a scrape every few
// seconds, a page polling once a second need no more), so that Stop never waits more than a second
// on a client's idle connection.
//
// Lifecycle: Start() returns a server that is listening; Stop() (or the destructor) closes the
// port and joins its threads, after which no handler runs.
#ifndef PS_COMMON_NET_HTTP_SERVER_H_
#define PS_COMMON_NET_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace ps {

// A 200 response's body and Content-Type.
struct HttpContent {
  std::string body;
  std::string content_type;
};

struct HttpServerOptions {
  // Names the server in errors ("metrics: cannot listen on ...").
  std::string name;
  // GET handlers by exact path ("/metrics"). Each is called on the server's threads, up to
  // `threads` at once, and must be safe to call that way.
  std::map<std::string, std::function<HttpContent()>> get;
  // Requests answered at once; more wait for a thread.
  int threads = 2;
  // How long a connection may sit without its request before it is closed; also the longest
  // Stop waits for such a connection. A browser may open one ahead of its request (and be slow
  // to send it on a loaded machine), which a short wait would close under it; a scraper sends
  // at once.
  int idle_timeout_seconds = 1;
};

class HttpServer {
 public:
  // Listens on `host` (a name, or an IP literal without brackets) and `port` (0: a free port, see
  // bound_port()). UNAVAILABLE naming the address when it cannot be bound. No SO_REUSEPORT: a
  // second server given a port in use fails instead of sharing it silently.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& host, int port,
                                                           HttpServerOptions options);
  ~HttpServer();

  int bound_port() const { return bound_port_; }

  // Idempotent. Not thread-safe against itself.
  void Stop();

 private:
  HttpServer() = default;

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;  // Runs the server's accept loop.
  std::atomic<bool> loop_ended_{false};
  int bound_port_ = 0;
  bool stopped_ = false;
};

}  // namespace ps

#endif  // PS_COMMON_NET_HTTP_SERVER_H_
