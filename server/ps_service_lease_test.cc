// The ps's lease watcher (ParameterService::WatchLeases) on a clock the test moves: a ps that did
// not run for a while (stopped with SIGSTOP, its host paused) heard nothing from anyone
// meanwhile, so its pause counts as no worker's silence (WorkerLeases::Forgive); a worker then
// silent for its lease is lost as always.
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "common/client/ps_client.h"
#include "common/testing/simulated_clock.h"
#include "server/shard_job_testing.h"
#include "server/testing/in_process_ps_cluster.h"

namespace ps {
namespace {

class LeaseWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InProcessPsClusterOptions options;
    options.server.service.clock = &clock_;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    absl::StatusOr<std::unique_ptr<PsClient>> created = cluster_->NewClient();
    ASSERT_TRUE(created.ok()) << created.status();
    client_ = *std::move(created);
    ParameterSpec spec = CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::SGD);
    spec.set_job_id("leased");
    spec.set_num_workers(2);
    spec.set_worker_lease_ms(1000);  // Watched every 250 ms.
    ASSERT_TRUE(client_->CreateJob(spec).ok());
  }

  // How many workers the shard has taken for lost, once the watcher's ticks due by now had
  // (real) time to run.
  int Lost() {
    absl::SleepFor(absl::Milliseconds(500));
    absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats("leased");
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok()) return -1;
    int lost = 0;
    for (const auto& worker : (*stats)[0].workers()) lost += worker.lost();
    return lost;
  }

  SimulatedClock clock_;
  std::unique_ptr<InProcessPsCluster> cluster_;
  std::unique_ptr<PsClient> client_;
};

TEST_F(LeaseWatcherTest, APausedPsTakesItsPauseForNoWorkersSilence) {
  EXPECT_EQ(Lost(), 0);
  // The watcher's tick due 250 ms in comes 30 s late, as after a SIGSTOP of 30 s.
  clock_.Advance(absl::Seconds(30));
  EXPECT_EQ(Lost(), 0) << "the ps took its own pause for the workers' silence";
  // Then, ticking on time, a lease of silence after the pause loses both: within a few ticks,
  // not at once.
  clock_.Advance(absl::Milliseconds(250));
  EXPECT_EQ(Lost(), 0);
  int ticks = 1;
  while (Lost() < 2 && ticks < 20) {
    clock_.Advance(absl::Milliseconds(250));
    ++ticks;
  }
  EXPECT_EQ(Lost(), 2);
  EXPECT_GE(ticks, 4) << "lost before a lease of silence";
}

}  // namespace
}  // namespace ps
