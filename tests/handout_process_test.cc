// Data handed out by the job (docs/data_handout.md) with real daemons: an ASYNC job of 3 workers
// on 2 ps reads its data as the first shard hands it out, while worker:1 is killed with kill -9
// and started again (it rejoins as a new incarnation, and what its old process held is handed
// out again) and worker:2 is killed for good (its lease runs out, and the batches it held go to
// the others). The job must end DONE, every batch of every epoch trained on exactly once
// (psctl status reads the first shard's count), and no process left behind.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/daemon_cluster.h"
#include "tests/psctl_testing.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr int kEpochs = 30;

std::string HandoutJob(const std::string& id) {
  return HandoutJobJson(id, kEpochs, R"({"mode": "ASYNC"})",
                        R"(, "worker_lease_s": 1,
                           "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 10})");
}

TEST(HandoutProcessTest, EveryBatchIsTrainedOnceThoughWorkersDie) {
  const std::string dir = TestDir();
  absl::StatusOr<std::unique_ptr<DaemonCluster>> started = DaemonCluster::Start(dir, 2, 3);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<DaemonCluster> cluster = *std::move(started);
  const std::string spec = cluster->spec_path();
  const std::string results = dir + "/results";
  Psctl job({"submit", "--cluster_spec=" + spec, "--job=" + WriteJob(dir, "handout", HandoutJob("handout")),
             "--results=" + results},
            dir);
  absl::SleepFor(absl::Seconds(2));
  ASSERT_FALSE(job.Ended()) << job.Output();
  ASSERT_TRUE(cluster->Kill("worker:1"));
  ASSERT_TRUE(cluster->Kill("worker:2"));
  absl::SleepFor(absl::Seconds(1.5));
  ASSERT_FALSE(job.Ended()) << "the job ended before worker:1 came back: " << job.Output();
  ASSERT_TRUE(cluster->StartTask("worker:1").ok());
  ASSERT_EQ(job.Wait(absl::Minutes(3)), 0) << job.Output();

  nlohmann::json summary = ReadJson(results + "/summary.json");
  EXPECT_EQ(summary["state"], "DONE") << summary.dump();
  EXPECT_GT(summary.value("final_eval_accuracy", -1.0), 0.5) << summary.dump();
  EXPECT_THAT(job.Output(), HasSubstr("worker:1 is back"));

  Psctl status({"status", "--cluster_spec=" + spec, "--job=handout"}, dir);
  status.Wait(absl::Minutes(1));
  EXPECT_THAT(status.Stdout(),
              HasSubstr(EveryBatchUsedOnce(kEpochs)))
      << status.Output();
  // The killed processes held batches, which were given back and trained on by others.
  EXPECT_THAT(status.Stdout(), ::testing::Not(HasSubstr("(0 given back in all)")))
      << status.Output();

  std::vector<std::string> stuck;
  EXPECT_TRUE(cluster->Stop(&stuck)) << ::testing::PrintToString(stuck) << " did not stop";
  EXPECT_THAT(ProcessesMentioning(dir), ::testing::IsEmpty())
      << "processes of this test are left behind";
}

}  // namespace
}  // namespace ps
