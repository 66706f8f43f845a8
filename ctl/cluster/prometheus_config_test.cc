#include "ctl/cluster/prometheus_config.h"

#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/net/grpc_deadline.h"
#include "common/net/grpc_server.h"
#include "common/cluster/task_service.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ClusterSpec Cluster(const std::string& json) {
  absl::StatusOr<ClusterSpec> cluster = ClusterSpec::Parse(json, "cluster.json");
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return *cluster;
}

TEST(PrometheusConfigTest, OneTargetPerTaskOnItsHostLabelledWithTheTask) {
  const ClusterSpec cluster =
      Cluster(R"({"ps": ["10.0.0.1:2222", "[fd00::2]:2222"], "worker": ["worker-0.worker:2222"]})");
  const MetricsPorts ports = {{"ps", {9100, 9102}}, {"worker", {9101}}};
  absl::StatusOr<std::string> yaml = PrometheusConfig(cluster, ports, "5s", "cluster.json");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(*yaml,
            "# Prometheus scrape configuration for the cluster of cluster.json,\n"
            "# written by psctl prometheus-config.\n"
            "global:\n"
            "  scrape_interval: 5s\n"
            "scrape_configs:\n"
            "  - job_name: \"ps\"\n"
            "    static_configs:\n"
            "      - targets: [\"10.0.0.1:9100\"]\n"
            "        labels:\n"
            "          task: \"ps:0\"\n"
            "      - targets: [\"[fd00::2]:9102\"]\n"
            "        labels:\n"
            "          task: \"ps:1\"\n"
            "  - job_name: \"worker\"\n"
            "    static_configs:\n"
            "      - targets: [\"worker-0.worker:9101\"]\n"
            "        labels:\n"
            "          task: \"worker:0\"\n");
}

TEST(PrometheusConfigTest, FixedMetricsPortsGiveEachJobsTasksItsPort) {
  const ClusterSpec cluster =
      Cluster(R"({"ps": ["h1:2222", "h2:2222"], "worker": ["h3:2222", "h4:2222", "h5:2222"]})");
  EXPECT_EQ(FixedMetricsPorts(cluster, 9100, 9101),
            (MetricsPorts{{"ps", {9100, 9100}}, {"worker", {9101, 9101, 9101}}}));
}

TEST(PrometheusConfigTest, TakesPrometheusDurationsOnly) {
  const ClusterSpec cluster = Cluster(R"({"ps": ["h1:2222"], "worker": ["h2:2222"]})");
  const MetricsPorts ports = FixedMetricsPorts(cluster, 9100, 9100);
  for (const char* good : {"1s", "15s", "1m30s", "500ms", "2h", "1d12h", "1w", "1y"}) {
    absl::StatusOr<std::string> yaml = PrometheusConfig(cluster, ports, good, "c");
    ASSERT_TRUE(yaml.ok()) << good << ": " << yaml.status();
    EXPECT_THAT(*yaml, HasSubstr(absl::StrCat("scrape_interval: ", good, "\n")));
  }
  for (const char* bad :
       {"", "5", "s", "0s", "0m0s", "1.5s", "5 s", "30s1m", "1s1s", "5sec", "-5s", "5s\nfoo: 1"}) {
    absl::StatusOr<std::string> yaml = PrometheusConfig(cluster, ports, bad, "c");
    EXPECT_TRUE(absl::IsInvalidArgument(yaml.status())) << "\"" << bad << "\"";
    EXPECT_THAT(yaml.status().message(), HasSubstr("write one like 5s, 1m30s or 500ms"));
  }
}

TEST(PrometheusConfigTest, RefusesPortsThatDoNotFitTheCluster) {
  const ClusterSpec cluster = Cluster(R"({"ps": ["h1:2222"], "worker": ["h2:2222", "h3:2222"]})");
  absl::StatusOr<std::string> short_list =
      PrometheusConfig(cluster, {{"ps", {9100}}, {"worker", {9100}}}, "5s", "c");
  EXPECT_TRUE(absl::IsInvalidArgument(short_list.status()));
  EXPECT_THAT(short_list.status().message(), HasSubstr("do not cover the worker tasks"));
  absl::StatusOr<std::string> zero =
      PrometheusConfig(cluster, {{"ps", {9100}}, {"worker", {9100, 0}}}, "5s", "c");
  EXPECT_TRUE(absl::IsInvalidArgument(zero.status()));
  EXPECT_THAT(zero.status().message(), HasSubstr("worker:1: metrics port 0 is not in 1..65535"));
}

// A daemon's Task service alone, served on a free port of 127.0.0.1.
class ServedTask {
 public:
  ServedTask(const std::string& job, int index, int metrics_port) : service_(job, index) {
    service_.set_metrics_port(metrics_port);
    absl::StatusOr<StartedServer> started = StartGrpcServer("127.0.0.1:0", {&service_}, 1 << 20);
    EXPECT_TRUE(started.ok()) << started.status();
    server_ = std::move(started->server);
    address_ = absl::StrCat("127.0.0.1:", started->bound_port);
  }
  ~ServedTask() { Stop(); }
  void Stop() {
    if (server_ != nullptr) server_->Shutdown(GrpcDeadline(absl::Seconds(1)));
    server_.reset();
  }
  const std::string& address() const { return address_; }

 private:
  TaskService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

std::unique_ptr<ClusterClient> ClientOf(const std::string& ps0, const std::string& ps1,
                                        const std::string& worker0) {
  ClusterClientOptions options;
  options.status_timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<ClusterClient>> client =
      ClusterClient::Create(Cluster(absl::StrCat(R"({"ps": [")", ps0, R"(", ")", ps1,
                                                 R"("], "worker": [")", worker0, R"("]})")),
                            options);
  EXPECT_TRUE(client.ok()) << client.status();
  return *std::move(client);
}

TEST(AskMetricsPortsTest, EveryTasksOwnPort) {
  ServedTask ps0("ps", 0, 40001), ps1("ps", 1, 40002), worker0("worker", 0, 40003);
  absl::StatusOr<MetricsPorts> ports =
      AskMetricsPorts(*ClientOf(ps0.address(), ps1.address(), worker0.address()));
  ASSERT_TRUE(ports.ok()) << ports.status();
  EXPECT_EQ(*ports, (MetricsPorts{{"ps", {40001, 40002}}, {"worker", {40003}}}));
}

TEST(AskMetricsPortsTest, NamesEveryTaskThatIsDownOrServesNoMetricsAndSaysWhatToDo) {
  ServedTask ps0("ps", 0, 40001), ps1("ps", 1, 0), worker0("worker", 0, 40003);
  worker0.Stop();
  absl::StatusOr<MetricsPorts> ports =
      AskMetricsPorts(*ClientOf(ps0.address(), ps1.address(), worker0.address()));
  EXPECT_TRUE(absl::IsUnavailable(ports.status())) << ports.status();
  const std::string message(ports.status().message());
  EXPECT_THAT(message, Not(HasSubstr("ps:0")));
  EXPECT_THAT(message, HasSubstr(absl::StrCat("ps:1 (", ps1.address(),
                                              "): serves no /metrics; start it with "
                                              "--metrics_port\n")));
  EXPECT_THAT(message, HasSubstr(absl::StrCat("worker:0 (", worker0.address(),
                                              "): cannot ask for its /metrics port (")));
  EXPECT_THAT(message, HasSubstr("is the daemon running?"));
  EXPECT_THAT(message, HasSubstr("--metrics_port=PORT for every task, and "
                                 "--worker_metrics_port=PORT for the workers where theirs "
                                 "differs"));
}

TEST(AskMetricsPortsTest, MetricsOffAloneIsAFailedPrecondition) {
  ServedTask ps0("ps", 0, 0), ps1("ps", 1, 40002), worker0("worker", 0, 40003);
  absl::StatusOr<MetricsPorts> ports =
      AskMetricsPorts(*ClientOf(ps0.address(), ps1.address(), worker0.address()));
  EXPECT_TRUE(absl::IsFailedPrecondition(ports.status())) << ports.status();
  EXPECT_THAT(ports.status().message(), HasSubstr("ps:0 ("));
}

TEST(AskMetricsPortsTest, ATaskThatAnswersAsAnotherIsNamed) {
  ServedTask ps0("ps", 0, 40001), ps1("ps", 1, 40002), worker0("ps", 1, 40003);
  absl::StatusOr<MetricsPorts> ports =
      AskMetricsPorts(*ClientOf(ps0.address(), ps1.address(), worker0.address()));
  EXPECT_FALSE(ports.ok());
  EXPECT_THAT(ports.status().message(),
              HasSubstr("): this is ps:1; the daemons use a different ClusterSpec"));
}

}  // namespace
}  // namespace ps
