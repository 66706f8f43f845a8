// The chaos test of live recovery (docs/ARCHITECTURE.md section 6; issue 14): a cluster of 2 ps and
// 3 workers on this machine runs a job with a checkpoint every few hundred steps while a seeded
// driver kill -9s a task drawn at random, every 2 to 4 s, and starts it again 0 to 2 s later. The
// job must end DONE with the final test accuracy of the same job run undisturbed (within 1 point),
// roll back per ps kill no more than one checkpoint interval plus the checkpoint in flight, leave
// every complete checkpoint readable, and leave no process behind.
//
// CHAOS_KILLS (3) and CHAOS_SEED (1) come from the environment: tools/chaos.sh runs 20 kills.
// The measurements (per recovery: steps done again, time from the ps's restart to the job's
// next applied step) are printed, and the results are kept in TEST_UNDECLARED_OUTPUTS_DIR.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/substitute.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint_store.h"
#include "common/file_system.h"
#include "absl/strings/str_join.h"
#include "tests/daemon_cluster.h"
#include "tests/psctl_testing.h"

namespace ps {
namespace {

constexpr int kCheckpointEverySteps = 300;

const int kKills = EnvInt("CHAOS_KILLS", 3);
const int kSeed = EnvInt("CHAOS_SEED", 1);
// Long enough that the job outlasts every kill on any machine: each worker sleeps 10 ms a step
// on average (the job's stragglers), so a worker's steps take at least 10 ms x kSteps (30 s for
// 3 kills), and the kills at most 6 s each (18 s). The sleeps, not the daemons' CPU, bound the
// run on 2 cores (a CPU-bound run slowed CI's other tests).
const int kSteps = std::max(3000, 1000 * kKills);

// One row of a results directory's events.csv (ctl/job/results_writer.h).
struct Event {
  double time_s = 0;
  std::string event, task, checkpoint;
  int64_t step = -1, steps_lost = -1;
};

std::vector<Event> ReadEvents(const std::string& path) {
  std::vector<Event> events;
  std::vector<std::string> lines = Lines(ReadFile(path));
  for (size_t i = 1; i < lines.size(); ++i) {
    // time_s,event,task,step,checkpoint,steps_lost,"detail": the detail is last and quoted.
    std::vector<std::string> fields = absl::StrSplit(lines[i], absl::MaxSplits(',', 6));
    if (fields.size() < 7) continue;
    Event event;
    event.event = fields[1];
    event.task = fields[2];
    event.checkpoint = fields[4];
    if (!absl::SimpleAtod(fields[0], &event.time_s)) continue;
    if (!fields[3].empty() && !absl::SimpleAtoi(fields[3], &event.step)) continue;
    if (!fields[5].empty() && !absl::SimpleAtoi(fields[5], &event.steps_lost)) continue;
    events.push_back(event);
  }
  return events;
}

double Accuracy(const std::string& results) {
  nlohmann::json summary = nlohmann::json::parse(ReadFile(results + "/summary.json"));
  return summary.value("final_eval_accuracy", -1.0);
}

class ChaosTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = TestDir();
    absl::StatusOr<std::unique_ptr<DaemonCluster>> cluster = DaemonCluster::Start(dir_, 2, 3);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    spec_ = cluster_->spec_path();
  }

  void TearDown() override {
    std::vector<std::string> stuck;
    EXPECT_TRUE(cluster_->Stop(&stuck)) << absl::StrJoin(stuck, ", ") << " did not stop";
    EXPECT_THAT(ProcessesMentioning(dir_), ::testing::IsEmpty())
        << "processes of this test are left behind";
    // The results, for the record (tools/chaos.sh).
    if (const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
      for (const char* name : {"calm", "chaos"}) {
        std::error_code ignored;
        std::filesystem::copy(dir_ + "/" + name,
                              std::string(outputs) + "/" + GetParam() + "-" + name,
                              std::filesystem::copy_options::recursive, ignored);
      }
    }
  }

  std::string Job(const std::string& id) const {
    const std::string path = absl::StrCat(dir_, "/", id, ".json");
    std::ofstream(path) << absl::Substitute(
        R"({"job_id": "$0", "model": {"kind": "SOFTMAX_REGRESSION"},
            "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 20000,
                                   "feature_dim": 16, "num_classes": 8, "separation": 0.6},
                     "test_fraction": 0.25},
            "learning_rate": {"base": 0.1}, "consistency": {"mode": "$1"}, "batch_size": 32,
            "steps": $2, "seed": 7, "min_slice_bytes": 64, "worker_lease_s": 5,
            "checkpoint": {"every_steps": $3},
            "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 10}})",
        id, GetParam(), kSteps, kCheckpointEverySteps);
    return path;
  }

  // Every complete checkpoint on every ps's disk verifies and reads back.
  void ExpectEveryCheckpointReadable(const std::string& job_id) {
    int read = 0;
    for (int ps = 0; ps < 2; ++ps) {
      CheckpointStore store(FileSystem::Default(), cluster_->checkpoint_dir(ps));
      absl::StatusOr<std::string> job_dir = store.JobDirectory(job_id);
      ASSERT_TRUE(job_dir.ok()) << job_dir.status();
      absl::StatusOr<ListCheckpointsResponse> listed = store.List(*job_dir);
      ASSERT_TRUE(listed.ok()) << listed.status();
      EXPECT_THAT(listed->problems(), ::testing::IsEmpty()) << "ps:" << ps;
      for (const CheckpointManifest& manifest : listed->manifests()) {
        absl::StatusOr<std::vector<CheckpointBlock>> blocks =
            store.ReadShard(*job_dir, manifest, ps);
        EXPECT_TRUE(blocks.ok()) << "ps:" << ps << " " << manifest.name() << ": "
                                 << blocks.status();
        ++read;
      }
    }
    EXPECT_GT(read, 0) << "no complete checkpoint was left to check";
  }

  std::string dir_, spec_;
  std::unique_ptr<DaemonCluster> cluster_;
};

TEST_P(ChaosTest, AJobOutlivesKillsOfRandomTasks) {
  const int kills = kKills, seed = kSeed;
  const absl::Duration timeout = absl::Seconds(120 + 30 * kills);

  Psctl calm(
      {"submit", "--cluster_spec=" + spec_, "--job=" + Job("calm"), "--results=" + dir_ + "/calm"},
      dir_);
  ASSERT_EQ(calm.Wait(timeout), 0) << calm.Output();

  const std::string results = dir_ + "/chaos";
  Psctl chaos(
      {"submit", "--cluster_spec=" + spec_, "--job=" + Job("chaos"), "--results=" + results}, dir_);
  std::mt19937 random(seed);
  auto uniform = [&random](double low, double high) {
    return absl::Seconds(std::uniform_real_distribution<double>(low, high)(random));
  };
  std::vector<std::pair<absl::Time, std::string>> restarts;
  for (int k = 0; k < kills; ++k) {
    absl::SleepFor(uniform(2, 4));
    const std::string task = cluster_->tasks()[random() % cluster_->tasks().size()];
    const absl::Duration down = uniform(0, 2);
    if (chaos.Ended() || HasFailure()) break;  // It ended already.
    EXPECT_TRUE(cluster_->Kill(task)) << task;
    absl::SleepFor(down);
    ASSERT_TRUE(cluster_->StartTask(task).ok()) << task;
    restarts.emplace_back(absl::Now(), task);
  }
  ASSERT_EQ(chaos.Wait(timeout), 0) << chaos.Output();
  EXPECT_EQ(restarts.size(), static_cast<size_t>(kills)) << "the job ended before every kill";

  nlohmann::json summary = nlohmann::json::parse(ReadFile(results + "/summary.json"));
  EXPECT_EQ(summary["state"], "DONE");
  EXPECT_EQ(summary["steps"], kSteps);
  const double calm_accuracy = Accuracy(dir_ + "/calm"), accuracy = Accuracy(results);
  EXPECT_GT(calm_accuracy, 0.5);
  EXPECT_NEAR(accuracy, calm_accuracy, 0.01) << "undisturbed " << calm_accuracy;

  // Each recovery went back to the latest checkpoint completed before it: the steps done again
  // are at most one checkpoint interval and the steps taken while the next one was in flight.
  const std::vector<Event> events = ReadEvents(results + "/events.csv");
  std::string report = absl::StrFormat(
      "%s, %d kills (seed %d): %s, test accuracy %.4f (undisturbed %.4f)\n", GetParam(),
      restarts.size(), seed, summary["state"].get<std::string>(), accuracy, calm_accuracy);
  // psctl's clock (events.csv, metrics.csv) starts when it writes job.json.
  struct stat job_json;
  ASSERT_EQ(stat((results + "/job.json").c_str(), &job_json), 0);
  const absl::Time psctl_start = absl::TimeFromTimespec(job_json.st_mtim);
  int64_t latest_complete = 0, most_lost = 0;
  // Abandoned since the latest complete one: a ps that wrote a manifest and died before it
  // answered leaves that checkpoint complete on every disk, and a recovery may take it.
  std::set<std::string> abandoned;
  int recoveries = 0;
  for (const Event& event : events) {
    if (event.event == "checkpoint_complete") {
      latest_complete = event.step;
      abandoned.clear();
    }
    if (event.event == "checkpoint_abandoned") abandoned.insert(event.checkpoint);
    if (event.event != "recovered") continue;
    ++recoveries;
    if (abandoned.count(event.checkpoint) == 0) {
      EXPECT_EQ(event.step, latest_complete) << "recovered from " << event.checkpoint;
    }
    EXPECT_LE(event.steps_lost, 2 * kCheckpointEverySteps) << event.checkpoint;
    most_lost = std::max(most_lost, event.steps_lost);
    // From the lost ps's last restart before the recovery to the job's next applied step.
    double restart_s = -1;
    for (const auto& [at, task] : restarts) {
      const double at_s = absl::ToDoubleSeconds(at - psctl_start);
      if (task == event.task && at_s <= event.time_s) restart_s = at_s;
    }
    const double next_step_s = FirstStepPast(results + "/metrics.csv", event.time_s, event.step);
    absl::StrAppendFormat(&report,
                          "  recovery %d (%s restarted at %.1fs): back to step %d, %d steps done "
                          "again, next applied step %.2fs after the restart\n",
                          recoveries, event.task, restart_s, event.step, event.steps_lost,
                          next_step_s - restart_s);
  }
  absl::StrAppendFormat(&report, "  most steps done again in one recovery: %d (interval %d)\n",
                        most_lost, kCheckpointEverySteps);
  std::cout << report;
  const int ps_kills = std::count_if(restarts.begin(), restarts.end(),
                                     [](const auto& restart) { return restart.second[0] == 'p'; });
  EXPECT_LE(recoveries, ps_kills);
  if (ps_kills > 0) {
    EXPECT_GT(recoveries, 0) << "a ps was killed and the job never recovered";
  }
  ExpectEveryCheckpointReadable("chaos");
}

INSTANTIATE_TEST_SUITE_P(Modes, ChaosTest, ::testing::Values("SYNC", "ASYNC"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ps
