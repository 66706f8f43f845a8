#include "common/net/http_server.h"

#include <sys/socket.h>

#include <chrono>
#include <utility>

#include <httplib.h>

#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& host, int port,
                                                              HttpServerOptions options) {
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->server_ = std::make_unique<httplib::Server>();
  httplib::Server& http = *server->server_;
  // cpp-httplib's default is a thread per core.
  const int threads = options.threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // One request per connection, and a short wait for it (idle_timeout_seconds): else a client's
  // idle keep-alive connection holds Stop (a daemon's SIGTERM) for cpp-httplib's 5 s.
  http.set_keep_alive_max_count(1);
  http.set_keep_alive_timeout(options.idle_timeout_seconds);
  http.set_read_timeout(options.idle_timeout_seconds);
  // SO_REUSEADDR (a restarted process gets its port back) without cpp-httplib's default
  // SO_REUSEPORT, under which a second server given the same port would share it silently.
  http.set_socket_options([](int socket) {
    int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  for (auto& [path, handler] : options.get) {
    http.Get(path,
             [handler = std::move(handler)](const httplib::Request&, httplib::Response& response) {
               const HttpContent content = handler();
               response.set_content(content.body, content.content_type);
             });
  }
  if (port == 0) {
    server->bound_port_ = http.bind_to_any_port(host);
    if (server->bound_port_ < 0) {
      return absl::UnavailableError(absl::StrCat(options.name, ": cannot listen on ", host,
                                                 " (any port): no such interface?"));
    }
  } else {
    if (!http.bind_to_port(host, port)) {
      return absl::UnavailableError(absl::StrCat(options.name, ": cannot listen on ", host, ":",
                                                 port, ": in use, or no such interface"));
    }
    server->bound_port_ = port;
  }
  HttpServer* raw = server.get();
  server->thread_ = std::thread([raw] {
    raw->server_->listen_after_bind();
    raw->loop_ended_.store(true);
  });
  return server;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (stopped_ || !thread_.joinable()) return;  // Stopped, or never listened.
  stopped_ = true;
  // httplib's stop() does nothing before the accept loop runs: wait for it to start (or end).
  while (!server_->is_running() && !loop_ended_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  server_->stop();
  thread_.join();
}

}  // namespace ps
