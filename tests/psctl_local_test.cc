// `psctl local` as a user runs it, as a process: a cluster on this machine, the job run, the
// results written, and no daemon left behind after success, Ctrl-C or a failure; bad input
// refused before anything starts.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/psctl_testing.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

// `psctl local`: every daemon it starts has this test's results path in its command line.
class PsctlLocalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir();
    results_ = dir_ + "/results";
  }

  void TearDown() override {
    std::vector<pid_t> pids;
    ProcessesMentioning(results_, &pids);
    for (pid_t pid : pids) kill(pid, SIGKILL);  // Left behind: already a failure; clean up.
  }

  // The checks every bad input shares: exit 2, one line on stderr, nothing started.
  void ExpectRefused(Psctl& psctl, const std::string& message) {
    EXPECT_EQ(psctl.Wait(), 2) << psctl.Output();
    std::vector<std::string> lines = Lines(psctl.Stderr());
    ASSERT_EQ(lines.size(), 1u) << psctl.Output();
    EXPECT_THAT(lines[0], StartsWith("psctl: "));
    EXPECT_THAT(lines[0], HasSubstr(message));
    EXPECT_EQ(psctl.Stdout(), "");
    EXPECT_FALSE(std::filesystem::exists(results_ + ".cluster"));
    EXPECT_THAT(ProcessesMentioning(results_), IsEmpty());
  }

  std::string dir_;
  std::string results_;
};

TEST_F(PsctlLocalTest, RunsAJobWritesItsResultsAndStopsEveryDaemon) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-local", 300));
  Psctl psctl(
      {"local", "--job=" + job, "--results=" + results_, "--ps=2", "--workers=2", "--device=cpu"},
      dir_);
  ASSERT_EQ(psctl.Wait(), 0) << psctl.Output();
  EXPECT_THAT(ProcessesMentioning(results_), IsEmpty());
  EXPECT_THAT(psctl.Stdout(), HasSubstr("stopped the local cluster"));

  nlohmann::json summary = ReadJson(results_ + "/summary.json");
  ASSERT_TRUE(summary.is_object()) << ReadFile(results_ + "/summary.json");
  EXPECT_EQ(summary["job_id"], "psctl-local");
  EXPECT_EQ(summary["state"], "DONE");
  EXPECT_EQ(summary["steps"], 300);
  EXPECT_GE(summary["final_eval_accuracy"].get<double>(), 0.9) << summary.dump();

  // The spec as sent, and the ClusterSpec psctl generated (the file it printed).
  nlohmann::json job_json = ReadJson(results_ + "/job.json");
  ASSERT_TRUE(job_json.is_object()) << ReadFile(results_ + "/job.json");
  EXPECT_EQ(job_json["spec"]["job_id"], "psctl-local");
  EXPECT_EQ(job_json["cluster"]["cluster"]["ps"].size(), 2u) << job_json.dump();
  EXPECT_EQ(job_json["cluster"]["cluster"]["worker"].size(), 2u) << job_json.dump();
  EXPECT_FALSE(job_json["version"].get<std::string>().empty());
  std::smatch spec_path;
  std::string out = psctl.Stdout();
  ASSERT_TRUE(std::regex_search(out, spec_path, std::regex("cluster: (\\S+)"))) << out;
  EXPECT_EQ(ReadJson(spec_path[1].str()), job_json["cluster"]);

  // The manifest: every daemon answered with its machine (this one), and the final figures.
  nlohmann::json manifest = ReadJson(results_ + "/manifest.json");
  ASSERT_TRUE(manifest.is_object()) << ReadFile(results_ + "/manifest.json");
  EXPECT_EQ(manifest["job_hash"].get<std::string>().rfind("sha256:", 0), 0u);
  EXPECT_EQ(manifest["cluster"], job_json["cluster"]);
  ASSERT_EQ(manifest["tasks"].size(), 4u) << manifest.dump();
  for (const nlohmann::json& task : manifest["tasks"]) {
    EXPECT_FALSE(task.contains("error")) << task.dump();
    EXPECT_FALSE(task["version"].get<std::string>().empty()) << task.dump();
  }
  EXPECT_EQ(manifest["tasks"][2]["device"], "cpu");
  ASSERT_EQ(manifest["machines"].size(), 1u) << manifest.dump();
  EXPECT_GT(manifest["machines"][0]["cores"].get<int>(), 0);
  EXPECT_EQ(manifest["final"]["state"], "DONE");
  EXPECT_EQ(manifest["final"]["steps"], 300);
  EXPECT_LE(manifest["started_at"].get<std::string>(), manifest["ended_at"].get<std::string>());

  std::vector<std::vector<std::string>> metrics = ReadCsv(results_ + "/metrics.csv");
  ASSERT_GE(metrics.size(), 2u);
  EXPECT_THAT(metrics[0], ElementsAre("time_s", "worker", "step", "global_step", "epoch", "loss",
                                      "examples_per_second", "staleness", "bytes_sent",
                                      "bytes_received"));
  int64_t last_step[2] = {0, 0};
  for (size_t r = 1; r < metrics.size(); ++r) {
    ASSERT_EQ(metrics[r].size(), 10u) << absl::StrJoin(metrics[r], ",");
    int64_t worker = Column(metrics[r], 1);
    ASSERT_TRUE(worker == 0 || worker == 1) << worker;
    last_step[worker] = std::max(last_step[worker], Column(metrics[r], 2));
  }
  EXPECT_EQ(last_step[0], 300);
  EXPECT_EQ(last_step[1], 300);

  std::vector<std::vector<std::string>> eval = ReadCsv(results_ + "/eval.csv");
  ASSERT_GE(eval.size(), 2u);
  EXPECT_THAT(eval[0], ElementsAre("time_s", "step", "loss", "accuracy", "examples"));
  EXPECT_EQ(Column(eval.back(), 1), 300);

  // SYNC with both workers: every gradient of every step applied on both shards, staleness 0.
  std::vector<std::vector<std::string>> staleness = ReadCsv(results_ + "/staleness.csv");
  ASSERT_GE(staleness.size(), 2u);
  EXPECT_THAT(staleness[0], ElementsAre("shard", "worker", "staleness", "count"));
  int64_t applied = 0;
  for (size_t r = 1; r < staleness.size(); ++r) {
    EXPECT_EQ(Column(staleness[r], 2), 0);
    applied += Column(staleness[r], 3);
  }
  EXPECT_EQ(applied, 2 * 2 * 300);

  std::set<std::string> params;
  for (const auto& entry : std::filesystem::directory_iterator(results_ + "/params")) {
    params.insert(entry.path().filename());
  }
  EXPECT_THAT(params, ElementsAre("layer0_bias.npy", "layer0_weights.npy"));
  EXPECT_THAT(NpyShape(results_ + "/params/layer0_weights.npy"), ElementsAre(16, 4));
  EXPECT_THAT(NpyShape(results_ + "/params/layer0_bias.npy"), ElementsAre(4));
}

// A straggler and a time limit (issue 36): worker 0 finishes its steps early, worker 1 sleeps 40 ms
// a step on average (at most 200 steps in 8 s) and is stopped by time_limit_s. psctl says so,
// summary.json's note says so, and examples_per_second is every example trained over the job's wall
// time, not the sum of each worker's own rate (which counted the finished worker's rate as if it
// still ran).
TEST_F(PsctlLocalTest, AJobStoppedByItsTimeLimitSaysSoAndCountsEveryExampleOverItsTime) {
  std::string job = JobJson("psctl-time-limit", 400, R"({"mode": "ASYNC"})",
                            R"(, "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 40,
                                                   "workers": [1]})");
  nlohmann::json spec = nlohmann::json::parse(job);
  spec["time_limit_s"] = 8;  // Worker 0's 400 steps take about a second.
  spec["eval_interval"] = 0;
  Psctl psctl({"local", "--job=" + WriteJob(dir_, "job", spec.dump()), "--results=" + results_,
               "--ps=1", "--workers=2", "--device=cpu"},
              dir_);
  ASSERT_EQ(psctl.Wait(), 0) << psctl.Output();
  // Worker 1's note (worker 0's, if it has one, before it: "worker:0: ...; worker:1: ...").
  EXPECT_TRUE(std::regex_search(
      psctl.Stdout(), std::regex("\njob psctl-time-limit: .*stopped before its steps: the job's "
                                 "time_limit_s, 8 s, ran out\n")))
      << psctl.Output();

  nlohmann::json summary = ReadJson(results_ + "/summary.json");
  ASSERT_TRUE(summary.is_object()) << ReadFile(results_ + "/summary.json");
  EXPECT_EQ(summary["state"], "DONE");
  EXPECT_THAT(summary.value("note", ""), HasSubstr("time_limit_s, 8 s, ran out"));
  int64_t last_step[2] = {0, 0};
  std::vector<std::vector<std::string>> metrics = ReadCsv(results_ + "/metrics.csv");
  for (size_t r = 1; r < metrics.size(); ++r) {
    const int64_t worker = Column(metrics[r], 1);
    ASSERT_TRUE(worker == 0 || worker == 1) << worker;
    last_step[worker] = std::max(last_step[worker], Column(metrics[r], 2));
  }
  EXPECT_EQ(last_step[0], 400);
  EXPECT_LT(last_step[1], 400);
  const double examples = 32.0 * (last_step[0] + last_step[1]);
  const double wall_time = summary["wall_time_s"].get<double>();
  EXPECT_NEAR(summary["examples_per_second"].get<double>(), examples / wall_time,
              0.05 * examples / wall_time)
      << summary.dump();
}

// ALLREDUCE across ps_worker daemons: their ring over gRPC averages the gradients, the chief
// publishes the model, and each worker's bytes a step are the ring's 2 (N - 1) / N of the model
// (softmax regression on 16 features and 4 classes: 68 floats), its one pull spread over them.
TEST_F(PsctlLocalTest, AllReduceRunsOnARingOfTheWorkerDaemons) {
  std::string job =
      WriteJob(dir_, "job", JobJson("psctl-allreduce", 300, R"({"mode": "ALLREDUCE"})"));
  Psctl psctl(
      {"local", "--job=" + job, "--results=" + results_, "--ps=1", "--workers=3", "--device=cpu"},
      dir_);
  ASSERT_EQ(psctl.Wait(), 0) << psctl.Output();
  EXPECT_THAT(ProcessesMentioning(results_), IsEmpty());
  nlohmann::json summary = ReadJson(results_ + "/summary.json");
  ASSERT_TRUE(summary.is_object()) << ReadFile(results_ + "/summary.json");
  EXPECT_EQ(summary["state"], "DONE");
  EXPECT_GE(summary["final_eval_accuracy"].get<double>(), 0.9) << summary.dump();
  const double ring_bytes = 2.0 * 2 / 3 * 68 * 4;
  EXPECT_NEAR(summary["bytes_sent_per_step"].get<double>(), ring_bytes, 0.05 * ring_bytes)
      << summary.dump();
  EXPECT_NEAR(summary["bytes_received_per_step"].get<double>(), ring_bytes, 0.05 * ring_bytes)
      << summary.dump();
  // The results hold the shards' parameters: the model the chief published.
  EXPECT_EQ(NpyShape(results_ + "/params/layer0_weights.npy"), std::vector<int64_t>({16, 4}));
}

TEST_F(PsctlLocalTest, ATracedJobWritesTheTimelineOfEveryWorkerAndShard) {
  constexpr int kSteps = 150;
  std::string job = WriteJob(dir_, "job", JobJson("psctl-trace", kSteps, R"({"mode": "ASYNC"})"));
  Psctl psctl({"local", "--job=" + job, "--results=" + results_, "--ps=2", "--workers=2",
               "--device=cpu", "--trace"},
              dir_);
  ASSERT_EQ(psctl.Wait(), 0) << psctl.Output();
  const nlohmann::json trace = ReadJson(results_ + "/trace.json");
  ASSERT_TRUE(trace.is_object()) << ReadFile(results_ + "/trace.json");
  EXPECT_EQ(trace["otherData"]["job_id"], "psctl-trace");
  std::map<int, std::string> processes;
  std::map<std::pair<int, std::string>, int> spans;  // (pid, name) -> count.
  // Each shard's applies by (worker, staleness), as staleness.csv counts them.
  std::map<std::string, int64_t> applied;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event["ph"] == "M") {
      if (event["name"] == "process_name") processes[event["pid"]] = event["args"]["name"];
      continue;
    }
    ++spans[{event["pid"].get<int>(), event["name"].get<std::string>()}];
    if (event["name"] == "apply") {
      // The histogram's last bucket (63) holds every staleness beyond it: a worker that started
      // late, on a loaded machine, pushes its first gradient some 60 updates old.
      const int64_t staleness = std::min<int64_t>(event["args"]["staleness"].get<int64_t>(), 63);
      ++applied[absl::StrCat(event["pid"].get<int>() - 3, ",", event["args"]["worker"].get<int>(),
                             ",", staleness)];
    }
  }
  EXPECT_EQ(processes, (std::map<int, std::string>{
                           {1, "worker:0"}, {2, "worker:1"}, {3, "ps shard 0"}, {4, "ps shard 1"}}));
  for (int pid : {1, 2}) {
    for (const char* name : {"pull", "compute", "push"}) {
      EXPECT_EQ((spans[{pid, name}]), kSteps) << name << " of pid " << pid;
    }
  }
  EXPECT_GE((spans[{1, "evaluate"}]), kSteps / 100);  // The chief's, every eval_interval steps.
  for (int pid : {3, 4}) EXPECT_EQ((spans[{pid, "apply"}]), 2 * kSteps) << "pid " << pid;
  // The applies' staleness in the trace is the shards' own histogram, gradient for gradient.
  std::map<std::string, int64_t> histogram;
  std::vector<std::string> rows = Lines(ReadFile(results_ + "/staleness.csv"));
  ASSERT_FALSE(rows.empty());
  for (size_t i = 1; i < rows.size(); ++i) {
    const size_t last_comma = rows[i].rfind(',');
    histogram[rows[i].substr(0, last_comma)] = std::stoll(rows[i].substr(last_comma + 1));
  }
  EXPECT_EQ(applied, histogram);
}

TEST_F(PsctlLocalTest, SigintStopsTheJobAndEveryDaemon) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-interrupted", 1000000));
  Psctl psctl({"local", "--job=" + job, "--results=" + results_, "--device=cpu"}, dir_);
  ASSERT_TRUE(WaitForLines(results_ + "/metrics.csv", 5, absl::Seconds(30))) << psctl.Output();
  kill(psctl.pid(), SIGINT);
  // 130 is also how a death by SIGINT reads: the messages tell psctl's own exit apart.
  EXPECT_EQ(psctl.Wait(absl::Seconds(30)), 130) << psctl.Output();
  EXPECT_THAT(ProcessesMentioning(results_), IsEmpty());
  EXPECT_THAT(psctl.Stdout(), HasSubstr("interrupted: stopping job psctl-interrupted everywhere"));
  EXPECT_THAT(psctl.Stderr(), HasSubstr("interrupted"));
  EXPECT_EQ(ReadJson(results_ + "/summary.json")["state"], "STOPPED");
}

// Ctrl-C on a terminal signals the whole foreground process group: the daemons as well.
TEST_F(PsctlLocalTest, CtrlCThatReachesTheDaemonsTooIsAnInterruption) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-ctrl-c", 1000000));
  Psctl psctl({"local", "--job=" + job, "--results=" + results_, "--device=cpu"}, dir_);
  ASSERT_TRUE(WaitForLines(results_ + "/metrics.csv", 5, absl::Seconds(30))) << psctl.Output();
  std::vector<pid_t> pids;
  ProcessesMentioning(results_, &pids);
  ASSERT_EQ(pids.size(), 5u);  // psctl, 2 ps, 2 workers.
  kill(psctl.pid(), SIGINT);
  for (pid_t pid : pids) {
    if (pid != psctl.pid()) kill(pid, SIGINT);
  }
  EXPECT_EQ(psctl.Wait(absl::Seconds(30)), 130) << psctl.Output();
  EXPECT_THAT(ProcessesMentioning(results_), IsEmpty());
  EXPECT_THAT(Lines(psctl.Stderr()), ElementsAre("psctl: interrupted; the job was stopped"));
}

// --metrics_port=0: each daemon's /metrics on a port of its own, printed; --keep_cluster: the
// daemons stay after the job, until psctl is stopped, which then exits with the job's status.
TEST_F(PsctlLocalTest, MetricsOnEveryDaemonAndTheClusterKeptAfterTheJob) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-kept", 50));
  Psctl psctl({"local", "--job=" + job, "--results=" + results_, "--device=cpu",
               "--metrics_port=0", "--keep_cluster"},
              dir_);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!absl::StrContains(psctl.Stdout(), "the cluster keeps running") && !psctl.Ended() &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_THAT(psctl.Stdout(), HasSubstr("the cluster keeps running (--keep_cluster)"))
      << psctl.Output();
  EXPECT_EQ(ReadJson(results_ + "/summary.json")["state"], "DONE");
  std::set<int> ports;
  for (const char* task : {"ps:0", "ps:1", "worker:0", "worker:1"}) {
    std::smatch url;
    const std::string out = psctl.Stdout();
    const std::regex line(
        absl::StrCat("\\n", task, " metrics: http://127.0.0.1:(\\d+)/metrics\\n"));
    ASSERT_TRUE(std::regex_search(out, url, line)) << out;
    ports.insert(std::stoi(url[1].str()));
  }
  EXPECT_EQ(ports.size(), 4u);
  for (int port : ports) {
    httplib::Client http("127.0.0.1", port);
    httplib::Result page = http.Get("/metrics");
    ASSERT_TRUE(page) << port << ": " << httplib::to_string(page.error());
    EXPECT_THAT(page->body, HasSubstr("job_id=\"psctl-kept\""));
  }
  EXPECT_EQ(ProcessesMentioning(results_).size(), 5u);  // psctl, 2 ps, 2 workers.

  // Its ports refuse strangers on this host: the cluster speaks mutual TLS with a throwaway CA
  // whose key is gone, a certificate per task and tokens, in files only this user may read.
  // psctl finds psctl's beside the ClusterSpec; a client without them, or with another CA's
  // certificate, is refused by every task.
  const std::string cluster_dir = results_ + ".cluster";
  EXPECT_THAT(psctl.Stdout(), HasSubstr("mutual TLS, a throwaway CA in "));
  EXPECT_FALSE(std::filesystem::exists(cluster_dir + "/ca.key"));
  for (const char* file : {"/cluster.token", "/admin.token", "/psctl.key", "/worker-1.key"}) {
    struct stat info;
    ASSERT_EQ(stat((cluster_dir + file).c_str(), &info), 0) << file;
    EXPECT_EQ(info.st_mode & 0777, 0600u) << file;
  }
  Psctl status({"status", "--cluster_spec=" + cluster_dir + "/cluster.json"}, dir_);
  EXPECT_EQ(status.Wait(), 0) << status.Output();
  EXPECT_THAT(status.Stdout(), HasSubstr("jobs: [psctl-kept]"));
  const std::string stranger_dir = dir_ + "/stranger";
  std::filesystem::create_directories(stranger_dir);
  std::filesystem::copy_file(cluster_dir + "/cluster.json", stranger_dir + "/cluster.json");
  Psctl plaintext({"status", "--cluster_spec=" + stranger_dir + "/cluster.json"}, dir_);
  EXPECT_EQ(plaintext.Wait(), 138) << plaintext.Output();  // No task answers it.
  Psctl other_ca({"certs", "--cluster_spec=" + stranger_dir + "/cluster.json",
                  "--out=" + stranger_dir + "/certs"},
                 dir_);
  ASSERT_EQ(other_ca.Wait(), 0) << other_ca.Output();
  Psctl forged({"status", "--cluster_spec=" + stranger_dir + "/cluster.json",
                "--certs=" + stranger_dir + "/certs"},
               dir_);
  EXPECT_EQ(forged.Wait(), 138) << forged.Output();
  for (const Psctl* stranger : {&plaintext, &forged}) {
    EXPECT_EQ(Lines(stranger->Stdout()).size(), 4u) << stranger->Stdout();
    for (const std::string& line : Lines(stranger->Stdout())) {
      EXPECT_THAT(line, HasSubstr(": DOWN (")) << stranger->Stdout();
      EXPECT_THAT(line, Not(HasSubstr("jobs:"))) << stranger->Stdout();
    }
  }

  kill(psctl.pid(), SIGTERM);
  EXPECT_EQ(psctl.Wait(absl::Seconds(30)), 0) << psctl.Output();
  EXPECT_THAT(psctl.Stdout(), HasSubstr("stopped the local cluster"));
  EXPECT_THAT(ProcessesMentioning(results_), IsEmpty());
}

// --certs=DIR (psctl certs): psctl presents psctl's certificate and each daemon its own task's,
// with the tokens there; psctl makes no CA of its own.
TEST_F(PsctlLocalTest, CertsGivenToPsctlServeTheWholeLocalCluster) {
  if (access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "no openssl (tools/setup.sh)";
  const std::string spec = dir_ + "/hosts.json";
  std::ofstream(spec) << R"({"cluster": {"ps": ["127.0.0.1:1", "127.0.0.1:2"],
                                         "worker": ["127.0.0.1:3", "127.0.0.1:4"]}})";
  Psctl certs({"certs", "--cluster_spec=" + spec, "--out=" + dir_ + "/certs"}, dir_);
  ASSERT_EQ(certs.Wait(), 0) << certs.Output();
  std::string job = WriteJob(dir_, "job", JobJson("psctl-certs", 100));
  Psctl psctl({"local", "--job=" + job, "--results=" + results_, "--device=cpu",
               "--certs=" + dir_ + "/certs"},
              dir_);
  ASSERT_EQ(psctl.Wait(), 0) << psctl.Output();
  EXPECT_THAT(psctl.Stdout(), HasSubstr("the certificates and tokens in " + dir_ + "/certs"));
  EXPECT_EQ(ReadJson(results_ + "/summary.json")["state"], "DONE");
  EXPECT_FALSE(std::filesystem::exists(results_ + ".cluster/ca.crt"));
}

TEST_F(PsctlLocalTest, RefusesAMetricsPortTheDaemonsWouldShare) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-port", 300));
  Psctl psctl({"local", "--job=" + job, "--results=" + results_, "--metrics_port=9100"}, dir_);
  ExpectRefused(psctl, "psctl local --metrics_port=9100: give 0 (every daemon on a free port");
}

// Without restarts and checkpoints (neither default), a ps that dies fails the job at once.
TEST_F(PsctlLocalTest, AJobThatFailsStopsEveryDaemonAndSaysWhy) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-failing", 1000000, R"({"mode": "SYNC"})",
                                                  R"(, "checkpoint": {})"));
  Psctl psctl({"local", "--job=" + job, "--results=" + results_, "--device=cpu", "--restarts=0"},
              dir_);
  ASSERT_TRUE(WaitForLines(results_ + "/metrics.csv", 5, absl::Seconds(30))) << psctl.Output();
  std::vector<pid_t> ps1;
  ASSERT_EQ(ProcessesMentioning(results_ + ".cluster/ps-1.port", &ps1).size(), 1u);
  kill(ps1[0], SIGKILL);
  // Promptly: not after the other worker's pull timed out at a barrier (60 s). A task lost:
  // retry (docs/REFERENCE.md, "Exit codes").
  EXPECT_EQ(psctl.Wait(absl::Seconds(20)), 138) << psctl.Output();
  EXPECT_THAT(ProcessesMentioning(results_), IsEmpty());
  EXPECT_THAT(psctl.Stderr(), StartsWith("psctl: worker:"));
  EXPECT_THAT(psctl.Stderr(), HasSubstr("ps:1 (127.0.0.1:"));
  EXPECT_EQ(ReadJson(results_ + "/summary.json")["state"], "FAILED");
}

// The README's default job with the defaults a user gets (a checkpoint every 600 s, a worker
// lease, psctl local starting a dead daemon again) survives a kill -9 of a ps and then of a
// worker, and ends DONE (issue 30 item 5).
TEST_F(PsctlLocalTest, TheDefaultJobSurvivesAKillOfAPsAndOfAWorker) {
  nlohmann::json spec = ReadJson("config/jobs/default.json");
  spec["job_id"] = "psctl-survives";
  spec["steps"] = 3000;  // About 6 s with the stragglers' delays (no value changes).
  spec["stragglers"] = {{"distribution", "UNIFORM"}, {"mean_delay_ms", 2}};
  const std::string job = WriteJob(dir_, "job", spec.dump());
  Psctl psctl({"local", "--job=" + job, "--results=" + results_, "--device=cpu"}, dir_);
  auto wait_for = [&psctl](const std::string& text) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (!absl::StrContains(psctl.Stdout(), text) && !psctl.Ended() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    return absl::StrContains(psctl.Stdout(), text);
  };
  auto kill_task = [this](const std::string& port_file) {
    std::vector<pid_t> pids;
    ProcessesMentioning(results_ + ".cluster/" + port_file, &pids);
    ASSERT_EQ(pids.size(), 1u) << port_file;
    kill(pids[0], SIGKILL);
  };
  ASSERT_TRUE(WaitForLines(results_ + "/metrics.csv", 3, absl::Seconds(30))) << psctl.Output();
  EXPECT_THAT(psctl.Stdout(), HasSubstr("default: a checkpoint every 600 s"));
  EXPECT_THAT(psctl.Stdout(), HasSubstr("default: a worker lease of 10 s"));
  kill_task("ps-0.port");
  ASSERT_TRUE(wait_for("recovered: the job goes on")) << psctl.Output();
  EXPECT_THAT(psctl.Stdout(), HasSubstr("ps:0 exited (exit code 137); started it again"));
  kill_task("worker-1.port");
  ASSERT_TRUE(wait_for("worker:1 is back: it rejoins the job")) << psctl.Output();
  ASSERT_EQ(psctl.Wait(absl::Seconds(120)), 0) << psctl.Output();
  nlohmann::json summary = ReadJson(results_ + "/summary.json");
  EXPECT_EQ(summary["state"], "DONE") << summary.dump();
  EXPECT_EQ(summary["steps"], 3000) << summary.dump();
  EXPECT_GT(summary.value("final_eval_accuracy", 0.0), 0.75) << summary.dump();
  EXPECT_THAT(ProcessesMentioning(results_), IsEmpty());
}

TEST_F(PsctlLocalTest, ADaemonThatCannotStartFailsAtOnceWithItsLog) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-no-device", 300));
  // No build and no machine has a usable cuda:7 here: ps_worker refuses it and exits.
  absl::Time start = absl::Now();
  Psctl psctl({"local", "--job=" + job, "--results=" + results_, "--device=cuda:7"}, dir_);
  EXPECT_EQ(psctl.Wait(), 2) << psctl.Output();  // Bad input, as the daemon's own exit code.
  EXPECT_LT(absl::Now() - start, absl::Seconds(15)) << "psctl waited for a daemon that had exited";
  EXPECT_THAT(ProcessesMentioning(results_), IsEmpty());
  EXPECT_THAT(psctl.Stderr(), StartsWith("psctl: worker:0 ("));
  EXPECT_THAT(psctl.Stderr(), HasSubstr("exit code 2"));
  EXPECT_THAT(psctl.Stderr(), HasSubstr("cuda:7"));
  EXPECT_FALSE(std::filesystem::exists(results_));
}

TEST_F(PsctlLocalTest, AMissingDaemonBinaryStopsThoseStarted) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-no-binary", 300));
  Psctl psctl({"local", "--job=" + job, "--results=" + results_,
               "--ps_server_binary=" + std::string(kPsServer),
               "--ps_worker_binary=" + dir_ + "/no_such_worker"},
              dir_);
  EXPECT_EQ(psctl.Wait(), 1) << psctl.Output();
  EXPECT_THAT(ProcessesMentioning(results_), IsEmpty());
  EXPECT_THAT(psctl.Stderr(), HasSubstr("cannot start " + dir_ + "/no_such_worker"));
}

TEST_F(PsctlLocalTest, RefusesAJobWithAnUnknownField) {
  std::string job = WriteJob(
      dir_, "job", JobJson("psctl-bad", 300, R"({"mode": "SYNC"})", R"(, "learning_rat": 0.1)"));
  Psctl psctl({"local", "--job=" + job, "--results=" + results_}, dir_);
  ExpectRefused(psctl, job + ": not a valid job: learning_rat: no such field (did you mean "
                       "\"learning_rate\"?)");
  EXPECT_FALSE(std::filesystem::exists(results_));
}

TEST_F(PsctlLocalTest, RefusesAModeThatIsNotOneListingTheModes) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-bad", 300, R"({"mode": "SYNCH"})"));
  Psctl psctl({"local", "--job=" + job, "--results=" + results_}, dir_);
  ExpectRefused(psctl, job + ": not a valid job: consistency.mode: \"SYNCH\" is not one of SYNC, "
                       "ASYNC, SSP,");
  EXPECT_THAT(psctl.Stderr(), HasSubstr("(did you mean \"SYNC\"?)"));
}

TEST_F(PsctlLocalTest, RefusesAJobWithABadValue) {
  std::string job = WriteJob(
      dir_, "job", JobJson("psctl-bad", 300, R"({"mode": "SYNC", "replicas_to_aggregate": 3})"));
  Psctl psctl({"local", "--job=" + job, "--results=" + results_, "--workers=2"}, dir_);
  ExpectRefused(psctl, "consistency.replicas_to_aggregate is 3 but the cluster has 2 workers");
  EXPECT_FALSE(std::filesystem::exists(results_));
}

TEST_F(PsctlLocalTest, RefusesAResultsDirectoryThatExists) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-exists", 300));
  std::filesystem::create_directories(results_);
  std::ofstream(results_ + "/earlier.txt") << "an earlier run\n";
  Psctl psctl({"local", "--job=" + job, "--results=" + results_}, dir_);
  ExpectRefused(psctl, "the results directory " + results_ + " exists");
  EXPECT_THAT(psctl.Stderr(), HasSubstr("--overwrite"));
  EXPECT_EQ(ReadFile(results_ + "/earlier.txt"), "an earlier run\n");
}

// Two runs, then `psctl report` puts them side by side by their manifests.
TEST_F(PsctlLocalTest, ReportPutsRunsSideBySideByTheirManifests) {
  const std::vector<std::pair<std::string, std::string>> runs = {{"sync", R"({"mode": "SYNC"})"},
                                                                 {"async", R"({"mode": "ASYNC"})"}};
  for (const auto& [name, consistency] : runs) {
    std::string job = WriteJob(dir_, name, JobJson("psctl-compare", 100, consistency));
    Psctl psctl({"local", "--job=" + job, "--results=" + results_ + "/" + name, "--device=cpu"},
                dir_);
    ASSERT_EQ(psctl.Wait(), 0) << psctl.Output();
  }
  const nlohmann::json sync = ReadJson(results_ + "/sync/manifest.json");
  const nlohmann::json async = ReadJson(results_ + "/async/manifest.json");
  EXPECT_NE(sync["job_hash"], async["job_hash"]);
  Psctl report({"report", results_ + "/sync", results_ + "/async", results_ + "/sync"}, dir_);
  ASSERT_EQ(report.Wait(), 0) << report.Output();
  const std::string out = report.Stdout();
  EXPECT_THAT(out, HasSubstr("| | run 1 | run 2 | run 3 |"));
  EXPECT_THAT(out, HasSubstr("| job | psctl-compare | psctl-compare | psctl-compare |"));
  EXPECT_THAT(out, HasSubstr("| state | DONE | DONE | DONE |"));
  EXPECT_THAT(out, HasSubstr("| steps | 100 | 100 | 100 |"));
  EXPECT_THAT(out, HasSubstr("| tasks | 2 ps, 2 worker | 2 ps, 2 worker | 2 ps, 2 worker |"));
  EXPECT_THAT(out, HasSubstr(sync["machines"][0]["cpu_model"].get<std::string>()));
  // The only setting that differs, and the runs of one JobSpec.
  EXPECT_THAT(out, HasSubstr("## Settings that differ"));
  EXPECT_THAT(out, HasSubstr("| consistency.mode | SYNC | ASYNC | SYNC |"));
  EXPECT_EQ(out.find("| seed |"), std::string::npos) << out;
  EXPECT_THAT(out, HasSubstr("Same JobSpec (equal job hash): runs 1, 3."));
  EXPECT_FALSE(std::filesystem::exists(results_ + "/sync/report.png"));  // Drawn for one run.

  // One run: its table, then its pictures.
  Psctl one({"report", results_ + "/async"}, dir_);
  ASSERT_EQ(one.Wait(), 0) << one.Output();
  EXPECT_THAT(one.Stdout(), HasSubstr("| | run 1 |"));
  EXPECT_THAT(one.Stderr(), HasSubstr("plots: " + results_ + "/async/report.png, " + results_ +
                                      "/async/report.html"));
  EXPECT_THAT(one.Stdout(), Not(HasSubstr("plots:")));  // The table alone, for `> report.md`.
  EXPECT_EQ(ReadFile(results_ + "/async/report.png").substr(0, 8), "\x89PNG\r\n\x1a\n");
  EXPECT_GT(std::filesystem::file_size(results_ + "/async/report.png"), 20000u);
  EXPECT_THAT(ReadFile(results_ + "/async/report.html"), HasSubstr("<img src=\"report.png\""));
  EXPECT_THAT(ReadFile(results_ + "/async/report.html"), HasSubstr("<th>state</th><td>DONE</td>"));

  // A directory that is neither a run's nor a sweep's.
  Psctl wrong({"report", dir_}, dir_);
  EXPECT_EQ(wrong.Wait(), 2) << wrong.Output();
  EXPECT_THAT(wrong.Stderr(), HasSubstr(dir_ + " holds no sweep.csv"));
  EXPECT_THAT(wrong.Stderr(), HasSubstr("nor manifest.json"));
  Psctl mixed({"report", results_ + "/sync", dir_}, dir_);
  EXPECT_EQ(mixed.Wait(), 2) << mixed.Output();
  EXPECT_THAT(mixed.Stderr(), HasSubstr(dir_ + " holds no manifest.json"));
}

}  // namespace
}  // namespace ps
