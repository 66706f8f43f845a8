// psctl experiment and psctl report as a user runs them: the CI sweep (config/sweeps/ci.json)
// end to end on local clusters in well under two minutes, its report with every table and plot
// it names, resuming, and input refused before anything starts.
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/process/subprocess.h"
#include "tests/experiment_testing.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;

constexpr absl::Duration kTimeout = absl::Seconds(100);

int CountOf(const std::string& text, const std::string& part) {
  int count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

double Number(const std::string& text) {
  double value = 0;
  EXPECT_TRUE(absl::SimpleAtod(text, &value)) << "not a number: \"" << text << "\"";
  return value;
}

TEST(ExperimentTest, CiSweepRunsEndToEndResumesAndItsReportHoldsEveryPlot) {
  const absl::Time start = absl::Now();
  const std::string dir = TestDir();
  const std::string results = dir + "/ci";
  const std::vector<std::string> experiment = {"experiment", "--sweep=config/sweeps/ci.json",
                                               "--local", "--results=" + results, "--device=cpu"};
  PsctlRun run = RunPsctl(experiment, dir, kTimeout);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("sweep ci: 4 points, 4 done, 0 failed"));

  // The sweep table: one row per point (2 modes x 2 repeats), each DONE, with its results.
  std::vector<std::map<std::string, std::string>> rows = ReadCsvRows(results + "/sweep.csv");
  ASSERT_THAT(rows, SizeIs(4));
  std::set<std::string> points;
  for (const auto& row : rows) {
    points.insert(row.at("point"));
    EXPECT_EQ(row.at("state"), "DONE") << row.at("point");
    EXPECT_EQ(row.at("steps"), "200");
    EXPECT_EQ(row.at("workers"), "2");
    EXPECT_LT(Number(row.at("final_eval_loss")), 0.3) << row.at("point");
    EXPECT_GT(Number(row.at("time_to_target_s")), 0) << row.at("point");
    double staleness = Number(row.at("staleness_mean"));
    if (row.at("consistency.mode") == "SYNC") {
      EXPECT_EQ(staleness, 0) << row.at("point");
    } else {
      EXPECT_GT(staleness, 0) << row.at("point");
    }
    const std::string point_dir = results + "/" + row.at("dir");
    EXPECT_EQ(ReadSummary(point_dir)["state"], "DONE");
    for (const char* file : {"job.json", "metrics.csv", "eval.csv", "validation.csv",
                             "staleness.csv", "staleness_timeline.csv"}) {
      EXPECT_TRUE(std::filesystem::exists(point_dir + "/" + file)) << point_dir << "/" << file;
    }
  }
  EXPECT_EQ(points, (std::set<std::string>{
                        "consistency.mode=SYNC,repeat=0", "consistency.mode=SYNC,repeat=1",
                        "consistency.mode=ASYNC,repeat=0", "consistency.mode=ASYNC,repeat=1"}));
  EXPECT_EQ(rows[0].at("seed"), "1");
  EXPECT_EQ(rows[1].at("seed"), "2");

  // The report: every plot it embeds exists as a PNG, and it has the tables it announces.
  PsctlRun report = RunPsctl({"report", results}, dir, kTimeout);
  ASSERT_EQ(report.exit_code, 0) << report.output;
  const std::string markdown = ReadFile(results + "/report.md");
  ASSERT_FALSE(markdown.empty()) << report.output;
  std::set<std::string> plots;
  std::regex image(R"(!\[[^\]]*\]\(([^)]+)\))");
  for (auto it = std::sregex_iterator(markdown.begin(), markdown.end(), image);
       it != std::sregex_iterator(); ++it) {
    const std::string path = (*it)[1].str();
    plots.insert(path);
    EXPECT_EQ(ReadFile(results + "/" + path).substr(0, 8), "\x89PNG\r\n\x1a\n") << path;
  }
  EXPECT_EQ(plots, (std::set<std::string>{"plots/loss_vs_step.png", "plots/loss_vs_time.png",
                                          "plots/loss_vs_epoch.png", "plots/test_accuracy.png",
                                          "plots/test_accuracy_vs_epoch.png", "plots/staleness.png",
                                          "plots/staleness_over_time.png",
                                          "plots/time_to_target.png"}));
  for (const char* section :
       {"## Results", "## Pace of each worker", "## Staleness", "## Time to a test loss of 0.3"}) {
    EXPECT_THAT(markdown, HasSubstr(section));
  }
  // Tables: results, each worker's pace, staleness (a row per mode each), staleness by worker
  // and shard, time to target.
  EXPECT_EQ(CountOf(markdown, "\n|---"), 5) << markdown;
  EXPECT_THAT(markdown, HasSubstr("## Staleness by worker and shard"));
  EXPECT_THAT(markdown, HasSubstr("| group | worker | shard | gradients | mean | median | "
                                  "99th percentile | max |"));
  EXPECT_THAT(markdown, HasSubstr("\n| mode=ASYNC | 1 | 0 | "));
  // Two seeds a group: means with their 95% confidence intervals.
  EXPECT_THAT(markdown, HasSubstr(" ± "));
  EXPECT_THAT(markdown, HasSubstr(" | time/step (ms) | bytes sent/step/worker | "
                                  "bytes received/step/worker |\n"));
  EXPECT_THAT(markdown,
              HasSubstr("| mode | fastest worker (ms/step) | slowest worker (ms/step) |"));
  EXPECT_THAT(markdown, HasSubstr("\n| SYNC | 2 | 2 DONE | "));
  EXPECT_THAT(markdown, HasSubstr("\n| ASYNC | 2 | 2 DONE | "));
  EXPECT_THAT(markdown, HasSubstr("\n| mode=ASYNC | 2/2 | "));
  EXPECT_LT(absl::Now() - start, absl::Minutes(2)) << "the CI sweep and its report took too long";

  // Run again: every point is done, nothing runs.
  const std::string summary = ReadFile(results + "/" + rows[2].at("dir") + "/summary.json");
  run = RunPsctl(experiment, dir, kTimeout);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(CountOf(run.output, "done earlier, skipped"), 4) << run.output;
  EXPECT_THAT(run.output, Not(HasSubstr("running")));
  EXPECT_EQ(ReadFile(results + "/" + rows[2].at("dir") + "/summary.json"), summary);

  // A point that did not finish runs again, alone.
  std::filesystem::remove(results + "/" + rows[1].at("dir") + "/summary.json");
  run = RunPsctl(experiment, dir, kTimeout);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(CountOf(run.output, "done earlier, skipped"), 3) << run.output;
  EXPECT_THAT(run.output, HasSubstr("[2/4] consistency.mode=SYNC,repeat=1: DONE in "));
  EXPECT_EQ(ReadSummary(results + "/" + rows[1].at("dir"))["state"], "DONE");

  // The same results directory for a sweep that changed: refused, nothing runs.
  std::string changed = ReadFile("config/sweeps/ci.json");
  changed.replace(changed.find("\"steps\": 200"), 12, "\"steps\": 100");
  WriteFile(dir + "/changed.json", changed);
  run = RunPsctl({"experiment", "--sweep=" + dir + "/changed.json", "--local",
                  "--results=" + results, "--device=cpu"},
                 dir, kTimeout);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("holds a finished job other than point"));
  EXPECT_THAT(run.output, HasSubstr("--overwrite"));
}

// Starts a cluster of 2 ps and 2 workers on free ports, its ClusterSpec in dir/cluster.json;
// the daemons stop (SIGKILL) when the returned processes go.
std::vector<Subprocess> StartRunningCluster(const std::string& dir) {
  std::vector<std::string> addresses;
  absl::StatusOr<std::vector<int>> ports = PickUnusedPorts(4);
  EXPECT_TRUE(ports.ok()) << ports.status();
  if (!ports.ok()) return {};
  for (int port : *ports) addresses.push_back(absl::StrCat("\"127.0.0.1:", port, "\""));
  WriteFile(dir + "/cluster.json",
            absl::StrCat(R"({"cluster": {"ps": [)", addresses[0], ", ", addresses[1],
                         R"(], "worker": [)", addresses[2], ", ", addresses[3], "]}}"));
  std::vector<Subprocess> daemons;
  for (const std::string task : {"ps:0", "ps:1", "worker:0", "worker:1"}) {
    const bool worker = task[0] == 'w';
    std::string name = dir + "/" + task;
    name[name.rfind(':')] = '-';
    std::vector<std::string> argv = {worker ? "worker/ps_worker" : "server/ps_server",
                                     "--cluster_spec=" + dir + "/cluster.json", "--task=" + task,
                                     "--port_file=" + name + ".port"};
    if (worker) argv.push_back("--device=cpu");
    absl::StatusOr<Subprocess> daemon = Subprocess::Start(argv, name + ".log");
    EXPECT_TRUE(daemon.ok()) << daemon.status();
    if (!daemon.ok()) return {};
    daemons.push_back(*std::move(daemon));
    absl::StatusOr<int> up = WaitForPortFile(name + ".port", absl::Seconds(30));
    EXPECT_TRUE(up.ok()) << daemons.back().Output();
    if (!up.ok()) return {};
  }
  return daemons;
}

// On daemons psctl did not start: every point runs there, and leaves no job on the shards.
TEST(ExperimentTest, TheCiSweepRunsOnARunningCluster) {
  const std::string dir = TestDir();
  std::vector<Subprocess> daemons = StartRunningCluster(dir);
  ASSERT_EQ(daemons.size(), 4u);
  PsctlRun run = RunPsctl({"experiment", "--sweep=config/sweeps/ci.json",
                           "--cluster_spec=" + dir + "/cluster.json", "--results=" + dir + "/ci"},
                          dir, kTimeout);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::vector<std::map<std::string, std::string>> rows = ReadCsvRows(dir + "/ci/sweep.csv");
  ASSERT_THAT(rows, SizeIs(4));
  for (const auto& row : rows) EXPECT_EQ(row.at("state"), "DONE") << row.at("point");
  PsctlRun status = RunPsctl({"status", "--cluster_spec=" + dir + "/cluster.json"}, dir, kTimeout);
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_EQ(CountOf(status.output, "up, jobs: []"), 2) << status.output;
}

// "ps" as a setting: each point's local cluster has that many ps tasks (the job.json psctl
// wrote records the cluster it ran on), the top-level "ps" where a point does not set it, and
// the table gives them with the time and bytes per step. (SYNC only: its runs are
// deterministic.)
TEST(ExperimentTest, APsAxisStartsEachLocalClusterWithThatManyPsTasks) {
  const std::string dir = TestDir();
  WriteFile(dir + "/ps.json", R"({"name": "ps", "ps": 3,
      "base_job": {"model": {"kind": "SOFTMAX_REGRESSION"},
                   "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 1000,
                                          "feature_dim": 16, "num_classes": 4}},
                   "learning_rate": {"base": 0.2}, "consistency": {"mode": "SYNC"},
                   "batch_size": 16, "steps": 20,
                   "min_slice_bytes": 64, "seed": 1},
      "variants": [{"ps": 1}, {"ps": 2}, {"learning_rate.base": 0.1}]})");
  PsctlRun run = RunPsctl({"experiment", "--sweep=" + dir + "/ps.json", "--local",
                           "--results=" + dir + "/ps", "--device=cpu", "--workers=2"},
                          dir, kTimeout);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::vector<std::map<std::string, std::string>> rows = ReadCsvRows(dir + "/ps/sweep.csv");
  ASSERT_THAT(rows, SizeIs(3));
  for (int i = 0; i < 3; ++i) {
    const std::map<std::string, std::string>& row = rows[i];
    const std::string expected_ps = i < 2 ? absl::StrCat(i + 1) : "3";
    EXPECT_EQ(row.at("ps"), expected_ps) << row.at("point");
    EXPECT_EQ(row.at("workers"), "2");
    EXPECT_EQ(row.at("state"), "DONE") << row.at("point");
    nlohmann::json job =
        nlohmann::json::parse(ReadFile(dir + "/ps/" + row.at("dir") + "/job.json"));
    EXPECT_EQ(job["cluster"]["cluster"]["ps"].size(), std::stoul(expected_ps)) << job.dump();
    EXPECT_EQ(job["cluster"]["cluster"]["worker"].size(), 2u) << job.dump();
    EXPECT_NEAR(Number(row.at("time_per_step_s")),
                Number(row.at("wall_time_s")) / Number(row.at("steps")), 1e-6);
    // Softmax regression 16 -> 4: 68 floats, 272 bytes each way and step at least.
    EXPECT_GT(Number(row.at("bytes_sent_per_step")), 272) << row.at("point");
    EXPECT_GT(Number(row.at("bytes_received_per_step")), 272) << row.at("point");
  }
  EXPECT_EQ(rows[0].at("point"), "ps=1");
  EXPECT_EQ(rows[2].at("point"), "learning_rate.base=0.1");
}

// --parallel on a running cluster: the points run side by side on the same daemons (their runs
// overlap in time) and, SYNC being deterministic, end with the serial run's weights bit for bit.
TEST(ExperimentTest, ParallelPointsOnOneClusterEndWhereSerialOnesDo) {
  const std::string dir = TestDir();
  std::vector<Subprocess> daemons = StartRunningCluster(dir);
  ASSERT_EQ(daemons.size(), 4u);
  WriteFile(dir + "/sync.json", R"({"name": "sync",
      "base_job": {"model": {"kind": "MLP", "hidden_sizes": [16]},
                   "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 2000,
                                          "feature_dim": 16, "num_classes": 4}},
                   "learning_rate": {"base": 0.2}, "consistency": {"mode": "SYNC"},
                   "batch_size": 16, "steps": 150, "eval_interval": 50, "min_slice_bytes": 64,
                   "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 4}, "seed": 1},
      "axes": {"learning_rate.base": [0.1, 0.2], "seed": [1, 2]}})");
  const std::string cluster = "--cluster_spec=" + dir + "/cluster.json";
  PsctlRun serial = RunPsctl({"experiment", "--sweep=" + dir + "/sync.json", cluster,
                              "--results=" + dir + "/serial"},
                             dir, kTimeout);
  ASSERT_EQ(serial.exit_code, 0) << serial.output;
  PsctlRun parallel = RunPsctl({"experiment", "--sweep=" + dir + "/sync.json", cluster,
                                "--results=" + dir + "/parallel", "--parallel=4"},
                               dir, kTimeout);
  ASSERT_EQ(parallel.exit_code, 0) << parallel.output;
  EXPECT_THAT(parallel.output, HasSubstr("sync: 4 points, 4 at once"));
  std::vector<std::map<std::string, std::string>> rows = ReadCsvRows(dir + "/parallel/sweep.csv");
  ASSERT_THAT(rows, SizeIs(4));
  std::vector<std::pair<std::string, std::string>> spans;  // Each run's start and end.
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("state"), "DONE") << row.at("point");
    const std::string point = "/" + row.at("dir");
    for (const auto& entry : std::filesystem::directory_iterator(dir + "/serial" + point +
                                                                   "/params")) {
      const std::string name = entry.path().filename().string();
      EXPECT_EQ(ReadFile(dir + "/parallel" + point + "/params/" + name),
                ReadFile(entry.path().string()))
          << row.at("point") << ": " << name << " differs from the serial run's";
    }
    EXPECT_EQ(ReadSummary(dir + "/parallel" + point)["final_eval_loss"],
              ReadSummary(dir + "/serial" + point)["final_eval_loss"]);
    const nlohmann::json manifest =
        nlohmann::json::parse(ReadFile(dir + "/parallel" + point + "/manifest.json"));
    spans.emplace_back(manifest["started_at"], manifest["ended_at"]);
  }
  // Side by side: some run started before another ended (RFC 3339 times order as strings).
  int overlapping = 0;
  for (size_t a = 0; a < spans.size(); ++a) {
    for (size_t b = a + 1; b < spans.size(); ++b) {
      overlapping += spans[a].first < spans[b].second && spans[b].first < spans[a].second;
    }
  }
  EXPECT_GT(overlapping, 0) << parallel.output;

  PsctlRun zero = RunPsctl({"experiment", "--sweep=" + dir + "/sync.json", cluster,
                            "--results=" + dir + "/zero", "--parallel=0"},
                           dir, kTimeout);
  EXPECT_EQ(zero.exit_code, 2) << zero.output;
  EXPECT_THAT(zero.output, HasSubstr("--parallel is 0: run 1 to 64 points at once"));
}

TEST(ExperimentTest, ABadSweepIsRefusedBeforeAnythingStarts) {
  const std::string dir = TestDir();
  WriteFile(dir + "/bad.json", R"({"name": "bad", "base_job": "config/jobs/default.json",
                                   "axes": {"consistency.mod": ["SYNC"]}})");
  PsctlRun run = RunPsctl(
      {"experiment", "--sweep=" + dir + "/bad.json", "--local", "--results=" + dir + "/results"},
      dir, kTimeout);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output,
              HasSubstr(dir + "/bad.json: axes.\"consistency.mod\": JobSpec.consistency "
                              "has no field \"mod\""));
  EXPECT_FALSE(std::filesystem::exists(dir + "/results"));

  run = RunPsctl({"experiment", "--sweep=config/sweeps/ci.json"}, dir, kTimeout);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("give either --local"));
}

// On a running cluster every point must have the cluster's number of workers; this is checked
// before any task is contacted (nothing listens at these addresses).
TEST(ExperimentTest, AWorkersAxisThatDoesNotMatchTheClusterIsRefused) {
  const std::string dir = TestDir();
  WriteFile(dir + "/cluster.json",
            R"({"cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"]}})");
  WriteFile(dir + "/sweep.json", R"({"name": "workers", "base_job": "config/jobs/default.json",
                                     "axes": {"workers": [2, 4]}})");
  PsctlRun run =
      RunPsctl({"experiment", "--sweep=" + dir + "/sweep.json",
                "--cluster_spec=" + dir + "/cluster.json", "--results=" + dir + "/results"},
               dir, kTimeout);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("point workers=4 needs 4 workers but the cluster has 2"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/results"));
}

TEST(ExperimentTest, AReportWithoutASweepOrMatplotlibSaysWhatItNeeds) {
  const std::string dir = TestDir();
  PsctlRun run = RunPsctl({"report", dir}, dir, kTimeout);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr(dir + " holds no sweep.csv"));

  WriteFile(dir + "/sweep.csv", "point\n");
  run = RunPsctl({"report", dir, "--python=" + dir + "/no_python"}, dir, kTimeout);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("run tools/setup.sh"));

  // A python without Debian's packages (-S: no site directories, so no matplotlib).
  const std::string python = dir + "/python_without_packages";
  WriteFile(python, "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n");
  std::filesystem::permissions(python, std::filesystem::perms::owner_all);
  run = RunPsctl({"report", dir, "--python=" + python}, dir, kTimeout);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("cannot import matplotlib"));
  EXPECT_THAT(run.output, HasSubstr("run tools/setup.sh (it installs python3 and "
                                    "python3-matplotlib)"));
}

}  // namespace
}  // namespace ps
