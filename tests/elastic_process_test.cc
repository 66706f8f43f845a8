// Elastic workers (docs/elastic.md) with real daemons: a SYNC job, and an SSP one, with
// "min_workers": 2 and its data handed out is submitted to 2 ps and 3 workers while worker:2's
// daemon is down. It starts on worker:0 and worker:1; worker:2 joins once its daemon is started;
// then worker:1 is killed with kill -9 for good, and the job goes on with worker:0 and worker:2
// once its lease runs out. The job must end DONE with every batch of every epoch trained on exactly once, and no
// process left behind.
#include <iostream>
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

constexpr int kEpochs = 12;

std::string ElasticJob(const std::string& id, const std::string& mode) {
  return HandoutJobJson(id, kEpochs, absl::StrCat(R"({"mode": ")", mode, R"(", "ssp_bound": 3})"),
                        R"(, "worker_lease_s": 1, "min_workers": 2, "checkpoint": {},
                           "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 10})");
}

class ElasticProcessTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ElasticProcessTest, WorkersJoinAndLeaveAndEveryBatchIsTrainedOnce) {
  const std::string dir = TestDir();
  absl::StatusOr<std::unique_ptr<DaemonCluster>> started = DaemonCluster::Start(dir, 2, 3);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<DaemonCluster> cluster = *std::move(started);
  ASSERT_TRUE(cluster->Kill("worker:2"));  // Not up when the job is submitted.
  const std::string spec = cluster->spec_path();
  const std::string results = dir + "/results";
  Psctl job({"submit", "--cluster_spec=" + spec,
             "--job=" + WriteJob(dir, "elastic", ElasticJob("elastic", GetParam())),
             "--results=" + results},
            dir);
  // Until the job runs without worker:2 (psctl's probe of it waits for it a while first).
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (job.Output().find("worker:1 started job") == std::string::npos) {
    ASSERT_FALSE(job.Ended()) << job.Output();
    ASSERT_LT(absl::Now(), deadline) << job.Output();
    absl::SleepFor(absl::Milliseconds(100));
  }
  absl::SleepFor(absl::Seconds(1));
  ASSERT_TRUE(cluster->StartTask("worker:2").ok());  // Joins.
  absl::SleepFor(absl::Seconds(3));
  ASSERT_FALSE(job.Ended()) << "the job ended before worker:1 was killed: " << job.Output();
  ASSERT_TRUE(cluster->Kill("worker:1"));  // Leaves for good.
  ASSERT_EQ(job.Wait(absl::Minutes(3)), 0) << job.Output();

  const std::string output = job.Output();
  EXPECT_THAT(output, HasSubstr("the elastic job starts without it")) << output;
  // It joins where the job is (SYNC: the barrier's step; SSP: the slowest clock), not at 0.
  const size_t back = output.find("worker:2 is back: it rejoins the job at step ");
  ASSERT_NE(back, std::string::npos) << output;
  const std::string joined = output.substr(back, output.find('\n', back) - back);
  std::cout << joined << "\n";
  EXPECT_THAT(joined, ::testing::Not(HasSubstr("at step 0 "))) << joined;
  EXPECT_THAT(output, HasSubstr("elastic: at least 2 workers")) << output;
  nlohmann::json summary = ReadJson(results + "/summary.json");
  EXPECT_EQ(summary["state"], "DONE") << summary.dump();
  EXPECT_GT(summary.value("final_eval_accuracy", -1.0), 0.5) << summary.dump();

  Psctl status({"status", "--cluster_spec=" + spec, "--job=elastic"}, dir);
  status.Wait(absl::Minutes(1));
  EXPECT_THAT(status.Stdout(),
              HasSubstr(EveryBatchUsedOnce(kEpochs)))
      << status.Output();

  std::vector<std::string> stuck;
  EXPECT_TRUE(cluster->Stop(&stuck)) << ::testing::PrintToString(stuck) << " did not stop";
  EXPECT_THAT(ProcessesMentioning(dir), ::testing::IsEmpty())
      << "processes of this test are left behind";
}

// SYNC: the barrier aggregates who is in the job. SSP: the joining worker starts at the slowest
// clock in the job, and the bound stops waiting for the one that died.
INSTANTIATE_TEST_SUITE_P(Modes, ElasticProcessTest, ::testing::Values("SYNC", "SSP"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ps
