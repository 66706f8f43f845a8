#include "common/net/http_server.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>
#include <httplib.h>

namespace ps {
namespace {

HttpServerOptions Hello() {
  HttpServerOptions options;
  options.name = "hello";
  options.get["/hello"] = [] { return HttpContent{"hello\n", "text/plain"}; };
  return options;
}

TEST(HttpServerTest, AnswersItsPathsAnd404Elsewhere) {
  HttpServerOptions options = Hello();
  std::atomic<int> calls{0};
  options.get["/count"] = [&calls] {
    return HttpContent{std::to_string(++calls), "application/json"};
  };
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start("127.0.0.1", 0, std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->bound_port(), 0);

  httplib::Client client("127.0.0.1", (*server)->bound_port());
  httplib::Result hello = client.Get("/hello");
  ASSERT_TRUE(hello) << httplib::to_string(hello.error());
  EXPECT_EQ(hello->status, 200);
  EXPECT_EQ(hello->get_header_value("Content-Type"), "text/plain");
  EXPECT_EQ(hello->body, "hello\n");
  // A handler runs for each request.
  EXPECT_EQ(client.Get("/count")->body, "1");
  EXPECT_EQ(client.Get("/count")->body, "2");

  for (const char* path : {"/", "/hello/", "/hellox", "/other"}) {
    httplib::Result other = client.Get(path);
    ASSERT_TRUE(other) << path;
    EXPECT_EQ(other->status, 404) << path;
  }
  (*server)->Stop();
  EXPECT_FALSE(httplib::Client("127.0.0.1", (*server)->bound_port()).Get("/hello"));
}

TEST(HttpServerTest, AnotherServerCannotTakeABoundPort) {
  absl::StatusOr<std::unique_ptr<HttpServer>> first = HttpServer::Start("127.0.0.1", 0, Hello());
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<HttpServer>> second =
      HttpServer::Start("127.0.0.1", (*first)->bound_port(), Hello());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("hello: cannot listen on 127.0.0.1:"), std::string::npos)
      << second.status();
}

// A client keeps its connection open between requests; Stop (a SIGTERM) does not wait for it to
// go.
TEST(HttpServerTest, StopsPromptlyWhileAClientKeepsItsConnectionOpen) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start("127.0.0.1", 0, Hello());
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->bound_port());
  client.set_keep_alive(true);
  ASSERT_TRUE(client.Get("/hello"));
  const auto start = std::chrono::steady_clock::now();
  (*server)->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
}

TEST(HttpServerTest, StopsRightAfterStart) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start("127.0.0.1", 0, Hello());
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Stop();
  (*server)->Stop();
}

}  // namespace
}  // namespace ps
