#include "common/net/metrics_http_server.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>

namespace ps {
namespace {

TEST(MetricsHttpServerTest, ServesTheRegistryAtMetricsAndNothingElse) {
  MetricsRegistry registry;
  registry.AddCounter("scrapes_total", "Scrapes.")->Increment(3);
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
      MetricsHttpServer::Start("127.0.0.1", 0, &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->bound_port(), 0);

  httplib::Client client("127.0.0.1", (*server)->bound_port());
  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(metrics->body,
            "# HELP scrapes_total Scrapes.\n# TYPE scrapes_total counter\nscrapes_total 3\n");

  httplib::Result other = client.Get("/");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  (*server)->Stop();
  EXPECT_FALSE(httplib::Client("127.0.0.1", (*server)->bound_port()).Get("/metrics"));
}

}  // namespace
}  // namespace ps
