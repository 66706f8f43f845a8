#include "ctl/cluster/cluster_snapshot.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "server/testing/in_process_ps_cluster.h"

namespace ps {
namespace {

// A port nothing listens on: one this test bound and let go.
int ClosedPort() {
  absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
      InProcessPsCluster::Start(InProcessPsClusterOptions());
  EXPECT_TRUE(cluster.ok());
  const std::string address = (*cluster)->addresses()[0];
  (*cluster)->Shutdown();
  return std::stoi(address.substr(address.rfind(':') + 1));
}

ParameterSpec Spec() {
  ParameterSpec spec;
  spec.set_job_id("seen");
  spec.set_num_workers(2);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  spec.mutable_learning_rate()->set_base(0.1f);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  VariableDef* variable = spec.add_variables();
  variable->set_name("w");
  variable->add_shape(4);
  variable->mutable_initializer()->set_kind(InitializerConfig::ZEROS);
  return spec;
}

TEST(ClusterSnapshotTest, SeesEveryTaskUpOrDownAndEveryJobItsShardsHold) {
  const int closed = ClosedPort();
  absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
      InProcessPsCluster::Start(InProcessPsClusterOptions());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  PsClientOptions options;
  options.ps_addresses = (*cluster)->addresses();
  absl::StatusOr<std::unique_ptr<PsClient>> ps = PsClient::Create(options);
  ASSERT_TRUE(ps.ok()) << ps.status();
  ASSERT_TRUE((*ps)->CreateJob(Spec()).ok());
  // Worker 1 pushes twice from version 0: staleness 0, then 1.
  absl::StatusOr<std::unique_ptr<WorkerSession>> session =
      WorkerSession::Create(ps->get(), Spec(), 1);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<float> gradient(4, 1.0f);
  for (int push = 0; push < 2; ++push) {
    WorkerSession::PushOptions read_zero;
    read_zero.read_versions = {0};
    ASSERT_TRUE((*session)->Push(read_zero, {{"w", absl::MakeConstSpan(gradient)}}).ok());
  }

  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(
      absl::StrCat(R"({"ps": [")", (*cluster)->addresses()[0], R"("], "worker": ["127.0.0.1:)",
                   closed, R"("]})"),
      "test");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ClusterClientOptions client_options;
  client_options.status_timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<ClusterClient>> client =
      ClusterClient::Create(*spec, client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  const ClusterSnapshot snapshot = TakeClusterSnapshot(**client);

  ASSERT_EQ(snapshot.tasks.size(), 2u);
  EXPECT_EQ(snapshot.tasks[0].task, "ps:0");
  EXPECT_TRUE(snapshot.tasks[0].up) << snapshot.tasks[0].error;
  EXPECT_EQ(snapshot.tasks[0].info.pid(), getpid());
  EXPECT_EQ(snapshot.tasks[1].task, "worker:0");
  EXPECT_FALSE(snapshot.tasks[1].up);
  EXPECT_FALSE(snapshot.tasks[1].error.empty());
  ASSERT_EQ(snapshot.jobs.size(), 1u);
  EXPECT_EQ(snapshot.jobs[0].job_id, "seen");
  EXPECT_EQ(snapshot.jobs[0].state, "CREATED");
  ASSERT_EQ(snapshot.jobs[0].shards.size(), 1u);
  EXPECT_EQ(snapshot.jobs[0].shards[0].version(), 2);

  const nlohmann::json json = nlohmann::json::parse(ClusterSnapshotJson(snapshot));
  EXPECT_EQ(json["time_ms"], snapshot.time_ms);
  EXPECT_EQ(json["tasks"][0]["up"], true);
  EXPECT_EQ(json["tasks"][1]["up"], false);
  EXPECT_EQ(json["tasks"][1]["address"], absl::StrCat("127.0.0.1:", closed));
  const nlohmann::json& job = json["jobs"][0];
  EXPECT_EQ(job["mode"], "ASYNC");
  EXPECT_EQ(job["shards"][0]["version"], 2);
  EXPECT_GT(job["shards"][0]["bytes_received"], 2 * 16);
  // Both workers are in the job; worker 1's two gradients had staleness 0 and 1.
  ASSERT_EQ(job["workers"].size(), 2u);
  EXPECT_EQ(job["workers"][0]["state"], "UNKNOWN");
  EXPECT_EQ(job["workers"][0]["staleness_counts"], nlohmann::json::array());
  EXPECT_EQ(job["workers"][1]["staleness_counts"], nlohmann::json({1, 1}));
  EXPECT_EQ(job["workers"][1]["staleness_max"], 1);
  EXPECT_EQ(job["workers"][1]["staleness_mean"], 0.5);
}

}  // namespace
}  // namespace ps
