// A recovery never restores another run's state (shared/DESIGN.md section 8; issue 30 item 3),
// with psctl and the daemons as processes. A job id's earlier run leaves checkpoints behind (a
// run that failed, or one that finished and is then replaced); a new run of the same id that
// loses a ps before its own first checkpoint must not "recover" from them (an earlier version
// did: DONE, steps 0, the old run's weights). It starts over from step 0 as itself and ends with
// the weights of the same run undisturbed; --replace deletes the earlier runs' checkpoints.
#include <signal.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "absl/time/clock.h"
#include "tests/daemon_cluster.h"
#include "tests/psctl_testing.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kSteps = 400;

class RerunRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir();
    absl::StatusOr<std::unique_ptr<DaemonCluster>> cluster = DaemonCluster::Start(dir_, 2, 2);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }

  void TearDown() override {
    std::vector<std::string> stuck;
    EXPECT_TRUE(cluster_->Stop(&stuck));
    EXPECT_THAT(ProcessesMentioning(dir_), ::testing::IsEmpty());
  }

  // Job "rerun": SYNC on 2 workers, data and initial values drawn from `seed`, a checkpoint
  // every `checkpoint_every` steps; stragglers (delays only, no value changes) make it last a
  // few seconds.
  std::string Job(const std::string& name, int seed, int checkpoint_every) {
    return WriteJob(dir_, name, absl::Substitute(R"({
      "job_id": "rerun", "model": {"kind": "MLP", "hidden_sizes": [8]},
      "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 2000, "feature_dim": 8,
                             "num_classes": 3}},
      "learning_rate": {"base": 0.05}, "consistency": {"mode": "SYNC"}, "batch_size": 16,
      "steps": $0, "seed": $1, "checkpoint": {"every_steps": $2},
      "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 8}})",
                                                 kSteps, seed, checkpoint_every));
  }

  std::unique_ptr<Psctl> Submit(const std::string& job, const std::string& results,
                                bool replace = false) {
    std::vector<std::string> args = {"submit", "--cluster_spec=" + cluster_->spec_path(),
                                     "--job=" + job, "--results=" + dir_ + "/" + results};
    if (replace) args.push_back("--replace");
    return std::make_unique<Psctl>(args, dir_);
  }

  // Kills ps:0 once the run in `results` has reported a step, and starts it again.
  void KillPsWhileItTrains(const std::string& results) {
    ASSERT_TRUE(WaitForLines(dir_ + "/" + results + "/metrics.csv", 3, absl::Seconds(30)));
    ASSERT_TRUE(cluster_->Kill("ps:0"));
    absl::SleepFor(absl::Milliseconds(300));
    ASSERT_TRUE(cluster_->StartTask("ps:0").ok());
  }

  // What a recovered run must show: it started over, from no other run's checkpoint, and did
  // every step.
  void ExpectStartedOverAsItself(const Psctl& psctl, const std::string& results) {
    EXPECT_THAT(psctl.Stdout(), HasSubstr("no complete checkpoint of this run"));
    EXPECT_THAT(psctl.Stdout(), HasSubstr("the job starts over from step 0"));
    EXPECT_THAT(psctl.Stdout(), Not(HasSubstr("goes on from checkpoint")));
    nlohmann::json summary = ReadJson(dir_ + "/" + results + "/summary.json");
    EXPECT_EQ(summary["state"], "DONE");
    EXPECT_EQ(summary["steps"], kSteps);
  }

  std::string dir_;
  std::unique_ptr<DaemonCluster> cluster_;
};

TEST_F(RerunRecoveryTest, APsLostBeforeARerunsFirstCheckpointStartsItOverNeverFromAnotherRun) {
  const absl::Duration timeout = absl::Seconds(120);
  // 1. A run that takes checkpoints, then fails: a worker is killed (SYNC cannot go on).
  std::unique_ptr<Psctl> failed = Submit(Job("failed", 1, 20), "failed");
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (failed->Stdout().find("checkpoint 1 complete") == std::string::npos &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_THAT(failed->Stdout(), HasSubstr("checkpoint 1 complete")) << failed->Output();
  ASSERT_TRUE(cluster_->Kill("worker:1"));
  EXPECT_NE(failed->Wait(timeout), 0) << failed->Output();
  ASSERT_TRUE(cluster_->StartTask("worker:1").ok());

  // 2. A new run of the id (other data), without --replace: the failed run left the shards.
  // It loses ps:0 before its first checkpoint, and starts over as itself.
  std::unique_ptr<Psctl> rerun = Submit(Job("rerun", 2, 100000), "rerun");
  KillPsWhileItTrains("rerun");
  ASSERT_EQ(rerun->Wait(timeout), 0) << rerun->Output();
  ExpectStartedOverAsItself(*rerun, "rerun");

  // 3. The same run undisturbed, with --replace: the earlier runs' checkpoints are deleted, and
  // the weights are those the recovered run ended with.
  std::unique_ptr<Psctl> calm = Submit(Job("rerun", 2, 100000), "calm", /*replace=*/true);
  ASSERT_EQ(calm->Wait(timeout), 0) << calm->Output();
  EXPECT_THAT(calm->Stdout(), HasSubstr("deleted the earlier runs' checkpoints"));
  ExpectSameParameters(ResultParameters(dir_ + "/calm"), ResultParameters(dir_ + "/rerun"), 0);

  // 4. After --replace of that finished run (whose final checkpoint is on every ps until then),
  // a run of other data loses ps:0 at once: it starts over, and ends with other weights.
  std::unique_ptr<Psctl> replaced = Submit(Job("replaced", 3, 100000), "replaced", true);
  KillPsWhileItTrains("replaced");
  ASSERT_EQ(replaced->Wait(timeout), 0) << replaced->Output();
  ExpectStartedOverAsItself(*replaced, "replaced");
  EXPECT_NE(ResultParameters(dir_ + "/replaced"), ResultParameters(dir_ + "/calm"));
}

}  // namespace
}  // namespace ps
