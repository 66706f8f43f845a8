// Replicated shards with real daemons (docs/replication.md): a cluster of 3 ps and 3 workers on
// this machine runs a SYNC job with `"replicas": 2` and checkpoints while a seeded driver
// kill -9s a task drawn at random (ps and workers alike) every 3 to 4 s and starts it again: a ps
// empty, 0.5 to 1 s later (so that no kill takes both copies of a shard: the copies lost are
// rebuilt in between), a worker 0 to 2 s later (it rejoins at the barrier's step). The job must
// end DONE with every step applied once (no recovery: no step done again, no checkpoint gone
// back to), the parameters and test accuracy of the same job run undisturbed, every shard
// a killed ps served taken over by its backup within 1 s of the kill, and no process left
// behind. Per kill, the takeover's time (from the ps logs) and the job's next recorded step are
// printed. After the kills a ps hangs: stopped (SIGSTOP) with its connections open, so that only
// gRPC keepalive (common/net/grpc_keepalive.h) finds it gone; the next ps must take its shard
// over and the job go on from there while it is stopped (within kMaxHang), and once continued
// the hung ps is fenced off and gets its shard back.
//
// REPLICATION_KILLS (4) and REPLICATION_SEED (3) come from the environment: tools/chaos.sh
// replicated runs 20.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "tests/daemon_cluster.h"
#include "tests/psctl_testing.h"

namespace ps {
namespace {

constexpr int kNumPs = 3;
const int kKills = EnvInt("REPLICATION_KILLS", 4);
const int kSeed = EnvInt("REPLICATION_SEED", 3);
// How long a ps may hang before the job goes on without it: keepalive finds it gone after about
// 7 s (the takeover came 8.4 to 9.0 s after the stop on a quiet machine), and a worker whose
// call went back to the hung ps finds it again a keepalive later. It is continued as soon as a
// step past the takeover is recorded.
constexpr absl::Duration kMaxHang = absl::Seconds(30);
// Each worker sleeps 12 ms a step on average (the job's stragglers), up to 24 ms, and a SYNC step
// waits for the slowest of 3 (18 ms on average), so the job runs at most about 45 steps a second
// and mostly sleeps (a CPU-bound run slowed CI's other tests). It must outlast the kills (4 s of
// start, then at most 5 s each), the hang and the move home after it, and a checkpoint after
// that, with about 15 s to spare for the waits for the copies (0.1 s each on a quiet machine):
// 40 s + 5 s a kill at 50 steps a second.
const int kSteps = 50 * (40 + 5 * kKills);
// What a run may take: at least 25 steps a second.
const absl::Duration kRunTimeout = absl::Seconds(60 + kSteps / 25);

// Each line of any ps start's log under `dir` that holds `phrase`, by the time the ps logged it,
// with its message up to the word after the phrase ("ps:2 takes over shard 1", "shard 1 went
// back to its own ps, ps:1"); glog's stamps ("W20261128 14:30:01.123456 ...") are local time.
std::vector<std::pair<absl::Time, std::string>> Logged(const std::string& dir,
                                                       const std::string& phrase) {
  std::vector<std::pair<absl::Time, std::string>> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ps-", 0) != 0) continue;
    for (const std::string& line : Lines(ReadFile(entry.path().string()))) {
      const size_t at = line.find(phrase);
      const size_t message = line.find("\": ");  // After the job's prefix.
      // With the word after the phrase (the shard's number, the task's name).
      const size_t end = at == std::string::npos ? at : line.find(' ', at + phrase.size() + 1);
      int year, month, day, hour, minute;
      double second;
      if (at == std::string::npos || message == std::string::npos || message > at ||
          line.size() < 25 ||
          !absl::SimpleAtoi(line.substr(1, 4), &year) ||
          !absl::SimpleAtoi(line.substr(5, 2), &month) ||
          !absl::SimpleAtoi(line.substr(7, 2), &day) ||
          !absl::SimpleAtoi(line.substr(10, 2), &hour) ||
          !absl::SimpleAtoi(line.substr(13, 2), &minute) ||
          !absl::SimpleAtod(line.substr(16, 9), &second)) {
        continue;
      }
      const absl::Time minute_start = absl::FromCivil(
          absl::CivilMinute(year, month, day, hour, minute), absl::LocalTimeZone());
      found.emplace_back(minute_start + absl::Microseconds(std::llround(second * 1e6)),
                         line.substr(message + 3, end - message - 3));
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

class ReplicationProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir();
    absl::StatusOr<std::unique_ptr<DaemonCluster>> cluster =
        DaemonCluster::Start(dir_, kNumPs, /*num_workers=*/3);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }

  void TearDown() override {
    std::vector<std::string> stuck;
    EXPECT_TRUE(cluster_->Stop(&stuck)) << absl::StrJoin(stuck, ", ") << " did not stop";
    EXPECT_THAT(ProcessesMentioning(dir_), ::testing::IsEmpty())
        << "processes of this test are left behind";
    // The daemons' logs and the results, for the record (tools/chaos.sh replicated) or for a
    // failure's cause.
    if (const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
      std::error_code ignored;
      const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
      std::filesystem::copy(dir_, absl::StrCat(outputs, "/", test),
                            std::filesystem::copy_options::recursive, ignored);
    }
  }

  // psctl_testing's small job, replicated, without checkpoints, each worker sleeping 12 ms a step
  // on average when `paced` (a run the test disturbs must outlast its kills). The workers' lease
  // is psctl's default, 10 s: longer than a hung ps's shard keeps them waiting
  // (docs/replication.md, "A ps that hangs"), when they call no other shard. `checkpoint`: the
  // job's checkpoint policy (none by default). No time limit: the run must reach its steps
  // however many kills it outlasts.
  std::string Job(const std::string& id, int steps, const std::string& checkpoint,
                  bool paced) const {
    nlohmann::json job = nlohmann::json::parse(
        JobJson(id, steps, R"({"mode": "SYNC"})",
                absl::StrCat(R"(, "worker_lease_s": 10, "replicas": 2, "checkpoint": )",
                             checkpoint)));
    if (paced) {
      job["stragglers"] = {{"distribution", "UNIFORM"}, {"mean_delay_ms", 12}};
    }
    job.erase("time_limit_s");
    return WriteJob(dir_, id, job.dump());
  }

  // psctl submit of Job(id, steps, checkpoint, paced), its results in dir_/id. The undisturbed
  // run a disturbed one is compared with goes at full speed (unpaced): SYNC's model does not
  // depend on how long a step takes.
  std::unique_ptr<Psctl> Submit(const std::string& id, int steps, const std::string& checkpoint,
                                bool paced = true) {
    return std::make_unique<Psctl>(
        std::vector<std::string>{"submit", "--cluster_spec=" + cluster_->spec_path(),
                                 "--job=" + Job(id, steps, checkpoint, paced),
                                 "--results=" + dir_ + "/" + id},
        dir_);
  }

  // Waits until `psctl status` shows every shard of `job` served by its own ps and replicating
  // to its backup: the state in which one more ps lost takes neither copy of any shard. A ps
  // started again empty holds its copies once its primaries' next installs reach it (a degraded
  // primary tries every second); on a loaded machine that may take longer than the kills' pause.
  // Returns how long it waited, or nullopt (with the last status) after `timeout`.
  std::optional<absl::Duration> WaitUntilReplicatedAtHome(const std::string& job,
                                                          absl::Duration timeout,
                                                          std::string* last_status) {
    const absl::Time start = absl::Now();
    while (absl::Now() - start < timeout) {
      Psctl status({"status", "--cluster_spec=" + cluster_->spec_path(), "--job=" + job}, dir_);
      const int code = status.Wait(absl::Seconds(30));
      *last_status = status.Output();
      size_t replicating = 0;
      for (size_t at = 0; (at = last_status->find(" REPLICATING (", at)) != std::string::npos;
           ++at) {
        ++replicating;
      }
      if (code == 0 && replicating == static_cast<size_t>(kNumPs) &&
          last_status->find("took the shard over") == std::string::npos) {
        return absl::Now() - start;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    return std::nullopt;
  }

  std::string dir_;
  std::unique_ptr<DaemonCluster> cluster_;
};

TEST_F(ReplicationProcessTest, KillsOfPsAndWorkersRedoNoStep) {
  const std::string spec = cluster_->spec_path();
  // With checkpoints, which a single ps loss must not roll back to.
  const std::string every = R"({"every_steps": 500})";
  std::unique_ptr<Psctl> calm = Submit("calm", kSteps, every, /*paced=*/false);
  ASSERT_EQ(calm->Wait(kRunTimeout), 0) << calm->Output();

  const std::string results = dir_ + "/killed";
  std::unique_ptr<Psctl> submitted = Submit("killed", kSteps, every);
  Psctl& killed = *submitted;
  std::mt19937 random(kSeed);
  auto uniform = [&random](double low, double high) {
    return absl::Seconds(std::uniform_real_distribution<double>(low, high)(random));
  };
  std::vector<std::pair<absl::Time, std::string>> kills;
  absl::SleepFor(absl::Seconds(4));
  std::string replication_waits;  // How long each kill and the hang waited for the copies.
  auto wait_for_copies = [&](const std::string& before) {
    std::string last_status;
    const std::optional<absl::Duration> waited =
        WaitUntilReplicatedAtHome("killed", absl::Seconds(30), &last_status);
    ASSERT_TRUE(waited.has_value())
        << "30 s after the last loss, the shards are not all replicated at home before "
        << before << ":\n" << last_status;
    absl::StrAppendFormat(&replication_waits, " %s %.1fs;", before,
                          absl::ToDoubleSeconds(*waited));
  };
  for (int k = 0; k < kKills; ++k) {
    ASSERT_FALSE(killed.Ended()) << "the job ended before kill " << k << ": " << killed.Output();
    const std::string task = cluster_->tasks()[random() % cluster_->tasks().size()];
    const bool is_ps = task[0] == 'p';
    if (is_ps) {
      ASSERT_NO_FATAL_FAILURE(wait_for_copies(absl::StrCat("kill ", k, " (", task, ")")));
    }
    kills.emplace_back(absl::Now(), task);
    ASSERT_TRUE(cluster_->Kill(task)) << task;
    absl::SleepFor(is_ps ? uniform(0.5, 1) : uniform(0, 2));
    ASSERT_TRUE(cluster_->StartTask(task).ok()) << task;  // A ps empty: its backups rebuild it.
    absl::SleepFor(uniform(2.5, 3));
  }
  // The hang, of a ps that serves its own shard by now (each shard went home after its kill).
  const int hung = static_cast<int>(random() % kNumPs);
  ASSERT_NO_FATAL_FAILURE(wait_for_copies("the hang"));
  ASSERT_FALSE(killed.Ended()) << "the job ended before the hang: " << killed.Output();
  // psctl's clock (metrics.csv) starts when it writes job.json.
  struct stat job_json;
  ASSERT_EQ(stat((results + "/job.json").c_str(), &job_json), 0);
  const absl::Time psctl_start = absl::TimeFromTimespec(job_json.st_mtim);
  const std::string taken_over =
      absl::StrFormat("ps:%d takes over shard %d", (hung + 1) % kNumPs, hung);
  // The takeover of the hung ps's shard, and the first step recorded past it (psctl's clock).
  std::optional<absl::Time> taken_at;
  double next_s = -1;
  const absl::Time hung_at = absl::Now();
  ASSERT_TRUE(cluster_->Signal(absl::StrCat("ps:", hung), SIGSTOP));
  while (next_s <= 0 && absl::Now() - hung_at < kMaxHang) {
    absl::SleepFor(absl::Milliseconds(100));
    for (const auto& [time, what] : Logged(dir_, " takes over shard ")) {
      if (time >= hung_at && what == taken_over) taken_at = time;
    }
    if (!taken_at.has_value()) continue;
    const double taken_s = absl::ToDoubleSeconds(*taken_at - psctl_start);
    next_s = FirstStepPast(results + "/metrics.csv", taken_s,
                           LastStepAt(results + "/metrics.csv", taken_s));
  }
  const absl::Time continued_at = absl::Now();
  ASSERT_TRUE(cluster_->Signal(absl::StrCat("ps:", hung), SIGCONT));
  ASSERT_EQ(killed.Wait(kRunTimeout), 0) << killed.Output();

  nlohmann::json summary = nlohmann::json::parse(ReadFile(results + "/summary.json"));
  EXPECT_EQ(summary["state"], "DONE");
  EXPECT_EQ(summary["steps"], kSteps);
  const double calm_accuracy = nlohmann::json::parse(ReadFile(dir_ + "/calm/summary.json"))
                                   .value("final_eval_accuracy", -1.0);
  const double accuracy = summary.value("final_eval_accuracy", -1.0);
  EXPECT_GT(calm_accuracy, 0.5);
  EXPECT_NEAR(accuracy, calm_accuracy, 0.01) << "undisturbed " << calm_accuracy;
  // SYNC: the same steps of the same gradients, so the same model (only the order of a step's
  // sum may differ).
  ExpectSameParameters(ResultParameters(dir_ + "/calm"), ResultParameters(results), 1e-4f);
  // No recovery: nothing went back to a checkpoint, no step was done again.
  const std::string events = ReadFile(results + "/events.csv");
  EXPECT_THAT(events, ::testing::Not(::testing::HasSubstr("recovered"))) << events;
  EXPECT_THAT(killed.Output(), ::testing::Not(::testing::HasSubstr("steps done again")));

  const std::vector<std::pair<absl::Time, std::string>> takeovers =
      Logged(dir_, " takes over shard "), hand_backs = Logged(dir_, " went back to its own ps, ");
  std::string report = absl::StrFormat(
      "%d kills (seed %d): %s at step %d, no step done again, test accuracy %.4f (undisturbed "
      "%.4f), %d takeovers, %d moves home\n",
      kills.size(), kSeed, summary["state"].get<std::string>(), summary["steps"].get<int>(),
      accuracy, calm_accuracy, takeovers.size(), hand_backs.size());
  absl::StrAppend(&report, "  waited for every shard replicated at home before:",
                  replication_waits, "\n");
  bool first_ps_kill = true;
  for (size_t k = 0; k < kills.size(); ++k) {
    const auto& [at, task] = kills[k];
    const absl::Time next_kill = k + 1 < kills.size() ? kills[k + 1].first : hung_at;
    const double kill_s = absl::ToDoubleSeconds(at - psctl_start);
    const int64_t step = LastStepAt(results + "/metrics.csv", kill_s);
    const double next_s = FirstStepPast(results + "/metrics.csv", kill_s, step);
    absl::StrAppendFormat(&report,
                          "  %s killed at %.1fs (step %d): next step past it recorded %.2fs "
                          "later (to metrics.csv's resolution)",
                          task, kill_s, step, next_s - kill_s);
    EXPECT_GT(next_s, 0) << "no step was recorded after the kill of " << task;
    int taken = 0;
    for (const auto& [time, what] : takeovers) {
      if (time < at || time >= next_kill) continue;
      ++taken;
      absl::StrAppendFormat(&report, "; %s %.3fs after the kill", what,
                            absl::ToDoubleSeconds(time - at));
      EXPECT_LT(time - at, absl::Seconds(1)) << what << " after the kill of " << task;
    }
    for (const auto& [time, what] : hand_backs) {
      if (time < at || time >= next_kill) continue;
      absl::StrAppendFormat(&report, "; %s %.3fs after the kill", what,
                            absl::ToDoubleSeconds(time - at));
    }
    report += "\n";
    if (task[0] == 'p' && first_ps_kill) {
      // Every ps serves its own shard until the first ps kill.
      EXPECT_GT(taken, 0) << "no shard of " << task << " was taken over";
      first_ps_kill = false;
    }
  }
  // The hang: the next ps took the hung one's shard over while it was stopped, the job went on
  // from there, and once continued the hung ps was fenced off (the shard went home: below).
  const double hung_s = absl::ToDoubleSeconds(hung_at - psctl_start);
  absl::StrAppendFormat(&report, "  ps:%d stopped at %.1fs for %.1fs", hung, hung_s,
                        absl::ToDoubleSeconds(continued_at - hung_at));
  if (taken_at.has_value()) {
    const double taken_s = absl::ToDoubleSeconds(*taken_at - psctl_start);
    absl::StrAppendFormat(&report, ": %s %.2fs after the stop, the next step %.2fs after that",
                          taken_over, taken_s - hung_s, next_s - taken_s);
  }
  EXPECT_TRUE(taken_at.has_value()) << "no \"" << taken_over << "\" in the "
                                    << absl::FormatDuration(kMaxHang) << " ps:" << hung
                                    << " was stopped";
  EXPECT_GT(next_s, 0) << "no step while ps:" << hung << " was stopped, after the takeover";
  bool fenced = false;
  for (const auto& [time, what] : Logged(dir_, " is fenced off here")) {
    fenced |= time >= continued_at &&
              what.find(absl::StrCat("shard ", hung)) != std::string::npos;
  }
  EXPECT_TRUE(fenced) << "ps:" << hung << " was not fenced off once continued";
  report += "\n";
  std::cout << report;

  // psctl status shows the replication of each shard.
  Psctl status({"status", "--cluster_spec=" + spec, "--job=killed"}, dir_);
  status.Wait(absl::Minutes(1));
  EXPECT_THAT(status.Stdout(), ::testing::HasSubstr("updates replicated")) << status.Output();
  // Each shard taken over went back to its own ps once that was started again (the live move
  // home): every shard ends at home, and checkpoints, paused while one was away, went on.
  size_t away = 0;  // Takeovers by the next ps ("ps:2 takes over shard 1"), not by the own.
  for (const auto& [time, what] : takeovers) {
    away += what.substr(3, 1) != what.substr(what.size() - 1);
  }
  EXPECT_EQ(hand_backs.size(), away) << report;
  EXPECT_THAT(status.Stdout(), ::testing::Not(::testing::HasSubstr("took the shard over")))
      << status.Output();
  EXPECT_THAT(status.Stdout(), ::testing::Not(::testing::HasSubstr("does not hold it")))
      << status.Output();
  if (!takeovers.empty()) {
    EXPECT_THAT(killed.Output(), ::testing::HasSubstr("checkpoints paused")) << killed.Output();
    EXPECT_THAT(killed.Output(), ::testing::HasSubstr("checkpoints resumed")) << killed.Output();
    const size_t resumed = events.rfind("checkpoints_resumed");
    EXPECT_NE(events.find("checkpoint_complete", resumed), std::string::npos)
        << "no checkpoint completed after the last move home: " << events;
  }
}

// Both copies of a shard lost at once (ps:1, which serves shard 1, and ps:2, which backs it up):
// replication cannot help, so the job falls back to its latest checkpoint (docs/replication.md),
// saying which shard lost both copies, and ends DONE with the undisturbed run's model.
TEST_F(ReplicationProcessTest, AShardThatLostBothCopiesIsRecoveredFromTheLatestCheckpoint) {
  const int steps = 1500;
  const std::string every = R"({"every_steps": 300})";
  std::unique_ptr<Psctl> calm = Submit("calm", steps, every, /*paced=*/false);
  ASSERT_EQ(calm->Wait(kRunTimeout), 0) << calm->Output();

  const std::string results = dir_ + "/lost";
  std::unique_ptr<Psctl> submitted = Submit("lost", steps, every);
  Psctl& lost = *submitted;
  // Once a checkpoint is complete (events.csv: the header, then its line).
  const absl::Time deadline = absl::Now() + absl::Minutes(2);
  while (ReadFile(results + "/events.csv").find("checkpoint_complete") == std::string::npos) {
    ASSERT_FALSE(lost.Ended()) << lost.Output();
    ASSERT_LT(absl::Now(), deadline) << "no checkpoint completed: " << lost.Output();
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(cluster_->Kill("ps:1"));
  ASSERT_TRUE(cluster_->Kill("ps:2"));
  absl::SleepFor(absl::Milliseconds(500));
  ASSERT_TRUE(cluster_->StartTask("ps:1").ok());
  ASSERT_TRUE(cluster_->StartTask("ps:2").ok());
  ASSERT_EQ(lost.Wait(kRunTimeout), 0) << lost.Output();

  EXPECT_THAT(lost.Output(),
              ::testing::HasSubstr("shard 1 lost both its copies: neither ps:1 nor ps:2 holds it"));
  const std::string events = ReadFile(results + "/events.csv");
  EXPECT_THAT(events, ::testing::HasSubstr("recovered")) << events;
  nlohmann::json summary = nlohmann::json::parse(ReadFile(results + "/summary.json"));
  EXPECT_EQ(summary["state"], "DONE");
  EXPECT_EQ(summary["steps"], steps);
  const double calm_accuracy = nlohmann::json::parse(ReadFile(dir_ + "/calm/summary.json"))
                                   .value("final_eval_accuracy", -1.0);
  EXPECT_GT(calm_accuracy, 0.5);
  EXPECT_NEAR(summary.value("final_eval_accuracy", -1.0), calm_accuracy, 0.01);
  // SYNC from a checkpoint: the steps done again are the same steps.
  ExpectSameParameters(ResultParameters(dir_ + "/calm"), ResultParameters(results), 1e-4f);
}

}  // namespace
}  // namespace ps
