// Elastic workers (docs/elastic.md) with real daemons: a SYNC job, and an SSP one, with
// "min_workers": 2 and its data handed out is submitted to 2 ps and 3 workers while worker:2's
// daemon is down. It starts on worker:0 and worker:1; worker:2 joins once its daemon is started;
// then worker:1 is killed with kill -9 for good, and the job goes on with worker:0 and worker:2
// once its lease runs out. The job must end DONE with every batch of every epoch trained on exactly once, and no
// process left behind. Then the same with psctl remove-worker and add-worker.
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

// psctl remove-worker and add-worker: worker:2 leaves the running job and is taken back; the
// chief, and a worker whose leaving would break min_workers, are refused and keep running.
class MembershipCommandsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MembershipCommandsTest, AWorkerIsRemovedAndAddedBackAndEveryBatchIsTrainedOnce) {
  const std::string dir = TestDir();
  absl::StatusOr<std::unique_ptr<DaemonCluster>> started = DaemonCluster::Start(dir, 2, 3);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<DaemonCluster> cluster = *std::move(started);
  const std::string spec = cluster->spec_path();
  const std::string results = dir + "/results";
  constexpr int kLongerEpochs = 2 * kEpochs;
  Psctl job({"submit", "--cluster_spec=" + spec,
             "--job=" + WriteJob(dir, "members",
                                 HandoutJobJson("members", kLongerEpochs,
                                                absl::StrCat(R"({"mode": ")", GetParam(), R"("})"),
                                                R"(, "worker_lease_s": 2, "min_workers": 2,
                                                   "checkpoint": {}, "stragglers":
                                                   {"distribution": "UNIFORM",
                                                    "mean_delay_ms": 10})")),
             "--results=" + results},
            dir);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (job.Output().find("step ") == std::string::npos) {  // A progress line: it runs.
    ASSERT_FALSE(job.Ended()) << job.Output();
    ASSERT_LT(absl::Now(), deadline) << job.Output();
    absl::SleepFor(absl::Milliseconds(100));
  }
  auto run = [&](const std::string& command, const std::string& task) {
    auto psctl = std::make_unique<Psctl>(
        std::vector<std::string>{command, "--cluster_spec=" + spec, "--job=members",
                                 "--task=" + task},
        dir);
    psctl->Wait(absl::Minutes(1));
    return psctl;
  };

  std::unique_ptr<Psctl> chief = run("remove-worker", "worker:0");
  EXPECT_EQ(chief->Wait(), 2) << chief->Output();
  EXPECT_THAT(chief->Stderr(), HasSubstr("it is the chief")) << chief->Output();
  std::unique_ptr<Psctl> removed = run("remove-worker", "worker:2");
  ASSERT_EQ(removed->Wait(), 0) << removed->Output() << job.Output();
  EXPECT_THAT(removed->Stdout(), HasSubstr("worker:2 left job members at step ")) << removed->Output();
  // Two are left, and the job needs two.
  std::unique_ptr<Psctl> too_few = run("remove-worker", "worker:1");
  EXPECT_EQ(too_few->Wait(), 2) << too_few->Output();
  EXPECT_THAT(too_few->Stderr(), HasSubstr("1 other worker would be left running it, and the job "
                                           "needs at least 2 (min_workers)"))
      << too_few->Output();
  absl::SleepFor(absl::Seconds(2));  // The job goes on with worker:0 and worker:1.
  ASSERT_FALSE(job.Ended()) << "the job ended before worker:2 was added back: " << job.Output();
  std::unique_ptr<Psctl> added = run("add-worker", "worker:2");
  ASSERT_EQ(added->Wait(), 0) << added->Output() << job.Output();
  EXPECT_THAT(added->Stdout(), HasSubstr("worker:2 rejoined job members")) << added->Output();
  std::cout << removed->Stdout() << added->Stdout();
  // Once in, it cannot be asked back again.
  std::unique_ptr<Psctl> again = run("add-worker", "worker:2");
  EXPECT_EQ(again->Wait(), 2) << again->Output();
  EXPECT_THAT(again->Stderr(), HasSubstr("did not leave job \"members\"")) << again->Output();
  ASSERT_EQ(job.Wait(absl::Minutes(3)), 0) << job.Output();

  const std::string output = job.Output();
  EXPECT_THAT(output, HasSubstr("worker:2 left the job at step ")) << output;
  EXPECT_THAT(output, HasSubstr("worker:2 is back: it rejoins the job at step ")) << output;
  nlohmann::json summary = ReadJson(results + "/summary.json");
  EXPECT_EQ(summary["state"], "DONE") << summary.dump();
  EXPECT_TRUE(summary["left_workers"].empty()) << "worker:2 came back: " << summary.dump();
  const std::string events = ReadFile(results + "/events.csv");
  EXPECT_THAT(events, HasSubstr("worker_left,worker:2,")) << events;
  EXPECT_THAT(events, HasSubstr("worker_rejoined,worker:2,")) << events;
  Psctl status({"status", "--cluster_spec=" + spec, "--job=members"}, dir);
  status.Wait(absl::Minutes(1));
  EXPECT_THAT(status.Stdout(), HasSubstr(EveryBatchUsedOnce(kLongerEpochs))) << status.Output();

  std::vector<std::string> stuck;
  EXPECT_TRUE(cluster->Stop(&stuck)) << ::testing::PrintToString(stuck) << " did not stop";
  EXPECT_THAT(ProcessesMentioning(dir), ::testing::IsEmpty())
      << "processes of this test are left behind";
}

// A ClusterSpec that grows: a job submitted to 2 ps and 2 workers gets a third worker, listed in
// a grown ClusterSpec only (the ps daemons and the first workers keep theirs), with psctl
// add-worker; the psctl following the job starts it there once its daemon is up. A grown spec
// that moves a worker is refused and changes nothing.
class GrowTest : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr int kLongerEpochs = 2 * kEpochs;

  // Submits the job to 2 ps and 2 workers and grows it by worker:2 once it runs; a grown spec
  // that moves a worker is refused first.
  void StartAndGrow() {
    dir_ = TestDir();
    absl::StatusOr<std::unique_ptr<DaemonCluster>> started = DaemonCluster::Start(dir_, 2, 2);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = *std::move(started);
    results_ = dir_ + "/results";
    job_ = std::make_unique<Psctl>(
        std::vector<std::string>{
            "submit", "--cluster_spec=" + cluster_->spec_path(),
            "--job=" + WriteJob(dir_, "grows",
                                HandoutJobJson("grows", kLongerEpochs,
                                               absl::StrCat(R"({"mode": ")", GetParam(), R"("})"),
                                               R"(, "worker_lease_s": 2, "min_workers": 2,
                                                  "checkpoint": {"every_steps": 100},
                                                  "stragglers": {"distribution": "UNIFORM",
                                                                 "mean_delay_ms": 10})")),
            "--results=" + results_},
        dir_);
    ASSERT_TRUE(AwaitOutput("step ")) << job_->Output();  // A progress line: it runs.
    absl::StatusOr<std::string> grown = cluster_->Grow(1);
    ASSERT_TRUE(grown.ok()) << grown.status();
    grown_ = *grown;
    // worker:1 moved to worker:2's address: not the job's cluster grown.
    const std::string moved = dir_ + "/cluster-moved.json";
    {
      nlohmann::json spec_json = ReadJson(grown_);
      std::swap(spec_json["cluster"]["worker"][1], spec_json["cluster"]["worker"][2]);
      std::ofstream(moved) << spec_json.dump();
    }
    std::unique_ptr<Psctl> refused = Add(moved);
    EXPECT_EQ(refused->Wait(), 2) << refused->Output();
    EXPECT_THAT(refused->Stderr(), HasSubstr("a cluster grows by adding workers after its own"))
        << refused->Output();
    ASSERT_TRUE(cluster_->StartTask("worker:2").ok());
    std::unique_ptr<Psctl> added = Add(grown_);
    ASSERT_EQ(added->Wait(), 0) << added->Output() << job_->Output();
    EXPECT_THAT(added->Stdout(), HasSubstr("job grows grew from 2 to 3 workers"))
        << added->Output();
    EXPECT_THAT(added->Stdout(), HasSubstr("worker:2 joined job grows")) << added->Output();
    std::cout << added->Stdout();
  }

  std::unique_ptr<Psctl> Add(const std::string& spec_path) {
    auto psctl = std::make_unique<Psctl>(
        std::vector<std::string>{"add-worker", "--cluster_spec=" + spec_path, "--job=grows",
                                 "--task=worker:2"},
        dir_);
    psctl->Wait(absl::Minutes(1));
    return psctl;
  }

  // Whether the job's output has `text` within 30 s (from now, or `after` its first such).
  bool AwaitOutput(const std::string& text, size_t after = 0) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (job_->Output().find(text, after) == std::string::npos) {
      if (job_->Ended() || absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return true;
  }

  // The job ended DONE, worker:2 among its workers, with every batch trained on once.
  void ExpectDoneWithTheNewWorker() {
    ASSERT_EQ(job_->Wait(absl::Minutes(3)), 0) << job_->Output();
    const std::string output = job_->Output();
    EXPECT_THAT(output, HasSubstr("job grows grew by worker:2")) << output;
    EXPECT_THAT(output, HasSubstr("worker:2 is up: it joins the job at step ")) << output;
    nlohmann::json summary = ReadJson(results_ + "/summary.json");
    EXPECT_EQ(summary["state"], "DONE") << summary.dump();
    EXPECT_TRUE(summary["lost_workers"].empty()) << "worker:2 ran: " << summary.dump();
    const std::string events = ReadFile(results_ + "/events.csv");
    EXPECT_THAT(events, HasSubstr("worker_added,worker:2,")) << events;
    Psctl status({"status", "--cluster_spec=" + grown_, "--job=grows"}, dir_);
    status.Wait(absl::Minutes(1));
    EXPECT_THAT(status.Stdout(), HasSubstr(EveryBatchUsedOnce(kLongerEpochs)))
        << status.Output();
    EXPECT_THAT(status.Stdout(), ::testing::ContainsRegex("worker:2 [^\n]*\n  grows: DONE"))
        << status.Output();
    std::cout << status.Stdout();
    std::vector<std::string> stuck;
    EXPECT_TRUE(cluster_->Stop(&stuck)) << ::testing::PrintToString(stuck) << " did not stop";
    EXPECT_THAT(ProcessesMentioning(dir_), ::testing::IsEmpty())
        << "processes of this test are left behind";
  }

  std::string dir_, results_, grown_;
  std::unique_ptr<DaemonCluster> cluster_;
  std::unique_ptr<Psctl> job_;
};

TEST_P(GrowTest, AJobGrowsByAWorkerItsClusterSpecLackedAndEveryBatchIsTrainedOnce) {
  StartAndGrow();
  if (HasFatalFailure()) return;
  ExpectDoneWithTheNewWorker();
}

// A ps lost after the job grew: psctl recovers the job from its latest checkpoint on the grown
// cluster, the new worker started again with the others.
TEST_P(GrowTest, AGrownJobRecoversWithItsNewWorkerWhenAPsIsLost) {
  StartAndGrow();
  if (HasFatalFailure()) return;
  const size_t grown_at = job_->Output().find("job grows grew by worker:2");
  ASSERT_NE(grown_at, std::string::npos) << job_->Output();
  ASSERT_TRUE(AwaitOutput("checkpoint", grown_at)) << job_->Output();
  ASSERT_TRUE(cluster_->Kill("ps:1"));
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(cluster_->StartTask("ps:1").ok());
  ExpectDoneWithTheNewWorker();
  const std::string output = job_->Output();
  EXPECT_THAT(output, HasSubstr("recovered")) << output;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StrContains(line, "recover") || absl::StrContains(line, "worker:2")) {
      std::cout << line << "\n";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, GrowTest, ::testing::Values("SYNC", "ASYNC"),
                         [](const auto& info) { return info.param; });

// SYNC: the barrier aggregates the workers in the job; ASYNC: none waits for another; SSP: the
// bound stops counting the clock of the worker that left, and it comes back at the slowest clock.
INSTANTIATE_TEST_SUITE_P(Modes, MembershipCommandsTest, ::testing::Values("SYNC", "ASYNC", "SSP"),
                         [](const auto& info) { return info.param; });

// SYNC: the barrier aggregates who is in the job. SSP: the joining worker starts at the slowest
// clock in the job, and the bound stops waiting for the one that died.
INSTANTIATE_TEST_SUITE_P(Modes, ElasticProcessTest, ::testing::Values("SYNC", "SSP"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ps
