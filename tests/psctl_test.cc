// psctl as a user runs it, as a process: submit, status and stop against daemons this test
// starts itself, and what happens when one of them dies (tests/psctl_local_test.cc: psctl
// local).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/net/grpc_deadline.h"
#include "common/net/grpc_keepalive.h"
#include "common/process/subprocess.h"
#include "tests/psctl_testing.h"
#include "proto/ps_service.grpc.pb.h"
#include "proto/worker_service.grpc.pb.h"

namespace ps {
namespace {

using ::testing::Contains;
using ::testing::ContainsRegex;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// Two ps and two workers started by the test, as on machines psctl does not manage.
class PsctlClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir();
    results_ = dir_ + "/results";
    absl::StatusOr<std::vector<int>> ports = PickUnusedPorts(4);
    ASSERT_TRUE(ports.ok()) << ports.status();
    for (int port : *ports) addresses_.push_back(absl::StrCat("127.0.0.1:", port));
    spec_path_ = WriteSpec("cluster", addresses_);
    const std::pair<const char*, const char*> kTasks[] = {
        {kPsServer, "ps:0"}, {kPsServer, "ps:1"}, {kPsWorker, "worker:0"}, {kPsWorker, "worker:1"}};
    for (const auto& [binary, task] : kTasks) {
      std::vector<std::string> argv = {binary, "--cluster_spec=" + spec_path_,
                                       std::string("--task=") + task};
      if (std::string(binary) == kPsWorker) argv.push_back("--device=cpu");
      if (std::string(binary) == kPsServer) argv.push_back(CheckpointDirFlag(task));
      StartDaemon(argv, task);
    }
    for (int i = 0; i < 4; ++i) {
      auto channel = grpc::CreateChannel(addresses_[i], grpc::InsecureChannelCredentials());
      if (i < 2) {
        ps_.push_back(ParameterServer::NewStub(channel));
      } else {
        workers_.push_back(Worker::NewStub(channel));
      }
    }
  }

  void TearDown() override {
    if (HasFailure()) {
      for (const Subprocess& daemon : daemons_) std::cerr << "daemon log:\n" << daemon.Output();
    }
    // An idle connection of ours would hold each daemon's stop for its whole grace period.
    ps_.clear();
    workers_.clear();
    for (Subprocess& daemon : daemons_) daemon.Signal(SIGTERM);
    for (Subprocess& daemon : daemons_) {
      EXPECT_EQ(daemon.Wait(absl::Seconds(20)), std::optional<int>(0)) << daemon.Output();
    }
  }

  // Starts a daemon and waits until it listens; returns its port.
  int StartDaemon(std::vector<std::string> argv, const std::string& task) {
    std::string name = absl::StrCat(dir_, "/", task.substr(0, task.find(':')), "-",
                                    task.substr(task.find(':') + 1), "-", daemons_.size());
    argv.push_back("--port_file=" + name + ".port");
    absl::StatusOr<Subprocess> process = Subprocess::Start(argv, name + ".log");
    EXPECT_TRUE(process.ok()) << process.status();
    if (!process.ok()) return -1;
    daemons_.push_back(*std::move(process));
    absl::StatusOr<int> port = WaitForPortFile(name + ".port", absl::Seconds(30));
    EXPECT_TRUE(port.ok()) << port.status() << daemons_.back().Output();
    return port.ok() ? *port : -1;
  }

  // Each ps writes its checkpoints to a directory of its own ("host" disk), kept across restarts.
  std::string CheckpointDirFlag(const std::string& task) const {
    return absl::StrCat("--checkpoint_dir=", dir_, "/checkpoints-", task.substr(task.find(':') + 1));
  }

  // Kills worker:1 (SIGKILL) and reaps it.
  void KillWorker1();
  // Kills worker:1 while a job of `consistency` runs; the job must go on and finish without it.
  void ExpectJobGoesOnWithoutWorker1(const std::string& mode, const std::string& consistency);
  // Kills worker:1 while job `id` of `consistency` runs, waits for psctl to say
  // `lost_message`, starts the daemon again, and expects it to rejoin and the job to finish.
  void ExpectWorker1Rejoins(const std::string& id, const std::string& consistency,
                            const std::string& lost_message);

  std::string WriteSpec(const std::string& name, const std::vector<std::string>& addresses) {
    std::string path = absl::StrCat(dir_, "/", name, ".json");
    std::ofstream(path) << R"({"cluster": {"ps": [")" << addresses[0] << R"(", ")" << addresses[1]
                        << R"("], "worker": [")" << addresses[2] << R"(", ")" << addresses[3]
                        << R"("]}})";
    return path;
  }

  // The last line of `psctl status --job=ID`: the job's state across the cluster.
  // `exit_code`: 138 while a task is down (docs/REFERENCE.md, "Exit codes").
  std::string JobStateLine(const std::string& id, int exit_code = 0) {
    Psctl status({"status", "--cluster_spec=" + spec_path_, "--job=" + id}, dir_);
    EXPECT_EQ(status.Wait(), exit_code) << status.Output();
    std::vector<std::string> lines = Lines(status.Stdout());
    return lines.empty() ? "" : lines.back();
  }

  // "ps:I JOB" for every job a ps holds, "worker:W JOB STATE" for every job a worker knows.
  std::vector<std::string> JobsOnCluster() {
    std::vector<std::string> jobs;
    for (size_t i = 0; i < ps_.size(); ++i) {
      grpc::ClientContext context;
      context.set_deadline(GrpcDeadline(absl::Seconds(5)));
      ListJobsResponse response;
      grpc::Status status = ps_[i]->ListJobs(&context, ListJobsRequest(), &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      for (const std::string& job : response.job_ids()) {
        jobs.push_back(absl::StrCat("ps:", i, " ", job));
      }
    }
    for (size_t w = 0; w < workers_.size(); ++w) {
      grpc::ClientContext context;
      context.set_deadline(GrpcDeadline(absl::Seconds(5)));
      WorkerStatus response;
      grpc::Status status = workers_[w]->GetStatus(&context, WorkerStatusRequest(), &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      for (const JobProgress& job : response.jobs()) {
        jobs.push_back(absl::StrCat("worker:", w, " ", job.job_id(), " ",
                                    JobProgress::State_Name(job.state())));
      }
    }
    return jobs;
  }

  // The problem lines of a "the cluster is not ready" refusal, after checking that nothing
  // was started or written.
  // `exit_code`: 138, retry, where waiting may mend it; 2, bad input, where only daemons of the
  // wrong role are in the way (docs/REFERENCE.md, "Exit codes").
  std::vector<std::string> ExpectNotReady(Psctl& psctl, int exit_code = 138) {
    EXPECT_EQ(psctl.Wait(), exit_code) << psctl.Output();
    std::vector<std::string> lines = Lines(psctl.Stderr());
    EXPECT_THAT(lines, Contains("psctl: the cluster is not ready:")) << psctl.Output();
    EXPECT_THAT(JobsOnCluster(), IsEmpty());
    EXPECT_FALSE(std::filesystem::exists(results_));
    std::vector<std::string> problems;
    for (const std::string& line : lines) {
      if (absl::StartsWith(line, "  ")) problems.push_back(line.substr(2));
    }
    return problems;
  }

  std::string dir_;
  std::string results_;
  std::vector<std::string> addresses_;
  std::string spec_path_;
  std::vector<Subprocess> daemons_;
  std::vector<std::unique_ptr<ParameterServer::Stub>> ps_;
  std::vector<std::unique_ptr<Worker::Stub>> workers_;
};

// psctl --help lists the commands; psctl COMMAND --help starts with that command's own usage and
// shows its flags and examples, not the logging library's flags.
TEST(PsctlHelpTest, EveryCommandHasItsOwnHelp) {
  const std::string dir = ::testing::TempDir();
  Psctl overview({"--help"}, dir);
  ASSERT_EQ(overview.Wait(), 0) << overview.Output();
  const std::vector<std::string> commands = {
      "local",  "submit", "status", "stop",       "check",     "export",
      "certs",  "experiment", "report", "replay", "slurm-spec", "dashboard", "prometheus-config",
      "top"};
  for (const std::string& command : commands) {
    EXPECT_THAT(overview.Stdout(), HasSubstr("\n  " + command + " ")) << command;
    Psctl help({command, "--help"}, dir);
    ASSERT_EQ(help.Wait(), 0) << help.Output();
    EXPECT_THAT(help.Stdout(), StartsWith("psctl " + command + ": ")) << help.Output();
    EXPECT_THAT(help.Stdout(), HasSubstr("Usage: psctl " + command)) << help.Output();
    EXPECT_THAT(help.Stdout(), HasSubstr("Example")) << help.Output();
    EXPECT_THAT(help.Stdout(), HasSubstr("\nFlags:\n  --")) << help.Output();
    EXPECT_THAT(help.Stdout(), Not(HasSubstr("logtostderr"))) << help.Output();
  }
  Psctl flag_first({"--help", "submit"}, dir);  // The flag may come first.
  ASSERT_EQ(flag_first.Wait(), 0) << flag_first.Output();
  EXPECT_THAT(flag_first.Stdout(), StartsWith("psctl submit: "));
  Psctl unknown({"launch"}, dir);
  EXPECT_EQ(unknown.Wait(), 2);
  EXPECT_THAT(unknown.Stderr(), HasSubstr("psctl: unknown command \"launch\""));
  Psctl typo({"stauts"}, dir);
  EXPECT_EQ(typo.Wait(), 2);
  EXPECT_THAT(typo.Stderr(),
              HasSubstr("psctl: unknown command \"stauts\" (did you mean \"status\"?)"));
  Psctl flag_typo({"local", "--worker=3"}, dir);
  EXPECT_EQ(flag_typo.Wait(), 2);
  EXPECT_EQ(flag_typo.Stderr(),
            "psctl: unknown flag --worker (did you mean \"--workers\"?); psctl --help lists the "
            "flags\n");
}

TEST_F(PsctlClusterTest, StatusListsEveryTaskAsUp) {
  Psctl psctl({"status", "--cluster_spec=" + spec_path_}, dir_);
  ASSERT_EQ(psctl.Wait(), 0) << psctl.Output();
  EXPECT_THAT(Lines(psctl.Stdout()),
              ElementsAre(absl::StrCat("ps:0 (", addresses_[0], "): up, jobs: []"),
                          absl::StrCat("ps:1 (", addresses_[1], "): up, jobs: []"),
                          absl::StrCat("worker:0 (", addresses_[2], "): up on cpu"),
                          absl::StrCat("worker:1 (", addresses_[3], "): up on cpu")));
}

// Not on a terminal (a file here), psctl top prints each screen after a blank line, without
// terminal codes; tests/psctl_top_test.sh drives it on a terminal.
TEST_F(PsctlClusterTest, TopPrintsScreensWithoutTerminalCodesWhenNotOnATerminal) {
  Psctl top({"top", "--cluster_spec=" + spec_path_, "--iterations=2"}, dir_);
  ASSERT_EQ(top.Wait(), 0) << top.Output();
  EXPECT_THAT(top.Stdout(), Not(HasSubstr("\x1b"))) << top.Output();
  EXPECT_THAT(top.Stdout(), StartsWith("psctl top  20")) << top.Output();
  std::vector<std::string> screens = absl::StrSplit(top.Stdout(), "\n\npsctl top  ");
  ASSERT_EQ(screens.size(), 2u) << top.Output();
  const char* tasks[] = {"ps:0", "ps:1", "worker:0", "worker:1"};
  for (int i = 0; i < 4; ++i) {
    // TASK ADDRESS STATE PID CPU% RSS UPTIME; the CPU % from the second screen on.
    EXPECT_THAT(screens[0], ContainsRegex(absl::StrCat("\n", tasks[i], " +", addresses_[i],
                                                       " +up +[0-9]+ +- +[0-9.]+ [KMG]iB ")));
    EXPECT_THAT(screens[1], ContainsRegex(absl::StrCat("\n", tasks[i], " +", addresses_[i],
                                                       " +up +[0-9]+ +[0-9]+\\.[0-9] ")));
  }
  EXPECT_THAT(screens[1], StartsWith("20")) << "the second screen's time";
  Psctl bad({"top", "--cluster_spec=" + spec_path_, "--iterations=-1"}, dir_);
  EXPECT_EQ(bad.Wait(), 2);
  EXPECT_THAT(bad.Stderr(), HasSubstr("--iterations is a number of screens"));
}

TEST_F(PsctlClusterTest, StatusSaysWhichTaskIsDownAndWhy) {
  daemons_[1].Signal(SIGTERM);  // ps:1.
  ASSERT_EQ(daemons_[1].Wait(absl::Seconds(20)), std::optional<int>(0));
  daemons_.erase(daemons_.begin() + 1);
  ps_.pop_back();
  Psctl psctl({"status", "--cluster_spec=" + spec_path_}, dir_);
  psctl.Wait();
  std::vector<std::string> lines = Lines(psctl.Stdout());
  ASSERT_EQ(lines.size(), 4u) << psctl.Output();
  EXPECT_EQ(lines[0], absl::StrCat("ps:0 (", addresses_[0], "): up, jobs: []"));
  EXPECT_THAT(lines[1], StartsWith(absl::StrCat("ps:1 (", addresses_[1], "): DOWN (")));
  EXPECT_THAT(lines[1], Not(HasSubstr("ListJobs")));  // The call is psctl's business.
  EXPECT_EQ(lines[2], absl::StrCat("worker:0 (", addresses_[2], "): up on cpu"));
}

TEST_F(PsctlClusterTest, SubmitRunsAJobAndStatusShowsTheShardsVersions) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-submit", 300));
  Psctl submit({"submit", "--cluster_spec=" + spec_path_, "--job=" + job, "--results=" + results_},
               dir_);
  ASSERT_EQ(submit.Wait(), 0) << submit.Output();
  EXPECT_EQ(ReadJson(results_ + "/summary.json")["state"], "DONE");
  EXPECT_EQ(NpyShape(results_ + "/params/layer0_weights.npy"), std::vector<int64_t>({16, 4}));

  Psctl status({"status", "--cluster_spec=" + spec_path_, "--job=psctl-submit"}, dir_);
  ASSERT_EQ(status.Wait(), 0) << status.Output();
  std::vector<std::string> lines = Lines(status.Stdout());
  ASSERT_EQ(lines.size(), 9u) << status.Output();
  EXPECT_THAT(lines[8], StartsWith("job psctl-submit: DONE (run "));
  for (int i : {0, 1}) {
    EXPECT_EQ(lines[2 * i],
              absl::StrCat("ps:", i, " (", addresses_[i], "): up, jobs: [psctl-submit]"));
    EXPECT_THAT(lines[2 * i + 1], StartsWith("  psctl-submit: SYNC version 300, step 300, "));
  }
  for (int w : {0, 1}) {
    EXPECT_EQ(lines[4 + 2 * w],
              absl::StrCat("worker:", w, " (", addresses_[2 + w], "): up on cpu"));
    EXPECT_THAT(lines[5 + 2 * w], StartsWith("  psctl-submit: DONE step 300, "));
  }

  // The same results directory again: refused before the job starts, unless --overwrite.
  std::string again = WriteJob(dir_, "again", JobJson("psctl-again", 100));
  Psctl refused(
      {"submit", "--cluster_spec=" + spec_path_, "--job=" + again, "--results=" + results_}, dir_);
  EXPECT_EQ(refused.Wait(), 2) << refused.Output();
  EXPECT_THAT(refused.Stderr(), HasSubstr("the results directory " + results_ + " exists"));
  EXPECT_THAT(JobsOnCluster(), Each(HasSubstr("psctl-submit")));
  Psctl overwritten({"submit", "--cluster_spec=" + spec_path_, "--job=" + again,
                     "--results=" + results_, "--overwrite"},
                    dir_);
  ASSERT_EQ(overwritten.Wait(), 0) << overwritten.Output();
  EXPECT_EQ(ReadJson(results_ + "/summary.json")["job_id"], "psctl-again");
}

// A job id names one job and its runs never share state: once the cluster holds it, a second
// submission is refused before anything starts, and --replace starts it afresh (its shards at
// version 0 again, not on top of the first run's 100 steps).
// A known trap is named at submission; the job still runs (the setting is valid), and a
// SYNC one of the same optimizer is not warned of.
TEST_F(PsctlClusterTest, SubmitWarnsOfAsynchronyWithMomentum) {
  std::string job = WriteJob(dir_, "job",
                             JobJson("psctl-trap", 20, R"({"mode": "ASYNC"})",
                                     R"(, "optimizer": {"kind": "MOMENTUM", "momentum": 0.9})"));
  Psctl submit({"submit", "--cluster_spec=" + spec_path_, "--job=" + job, "--results=" + results_},
               dir_);
  submit.Wait();
  EXPECT_THAT(submit.Stdout(), HasSubstr("warning: ASYNC with momentum 0.9 on 2 workers"))
      << submit.Output();
  std::string sync = WriteJob(dir_, "sync",
                              JobJson("psctl-no-trap", 20, R"({"mode": "SYNC"})",
                                      R"(, "optimizer": {"kind": "MOMENTUM", "momentum": 0.9})"));
  Psctl quiet({"submit", "--cluster_spec=" + spec_path_, "--job=" + sync,
               "--results=" + results_ + "-sync"},
              dir_);
  ASSERT_EQ(quiet.Wait(), 0) << quiet.Output();
  EXPECT_THAT(quiet.Output(), Not(HasSubstr("warning:")));
}

TEST_F(PsctlClusterTest, ASecondRunOfAJobIdIsRefusedUnlessItReplacesTheFirst) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-rerun", 100));
  Psctl first({"submit", "--cluster_spec=" + spec_path_, "--job=" + job, "--results=" + results_},
              dir_);
  ASSERT_EQ(first.Wait(), 0) << first.Output();

  Psctl again({"submit", "--cluster_spec=" + spec_path_, "--job=" + job,
               "--results=" + results_ + "-again"},
              dir_);
  EXPECT_EQ(again.Wait(), 2) << again.Output();
  EXPECT_THAT(again.Stderr(), HasSubstr("job \"psctl-rerun\" already exists on ps:0, ps:1 from an "
                                        "earlier run"));
  EXPECT_THAT(again.Stderr(), HasSubstr("--replace"));
  EXPECT_FALSE(std::filesystem::exists(results_ + "-again"));

  Psctl replaced({"submit", "--cluster_spec=" + spec_path_, "--job=" + job,
                  "--results=" + results_ + "-replaced", "--replace"},
                 dir_);
  ASSERT_EQ(replaced.Wait(), 0) << replaced.Output();
  EXPECT_THAT(replaced.Stdout(), HasSubstr("replacing the earlier run of job psctl-rerun"));
  EXPECT_EQ(ReadJson(results_ + "-replaced/summary.json")["state"], "DONE");
  Psctl status({"status", "--cluster_spec=" + spec_path_, "--job=psctl-rerun"}, dir_);
  ASSERT_EQ(status.Wait(), 0) << status.Output();
  std::vector<std::string> lines = Lines(status.Stdout());
  ASSERT_EQ(lines.size(), 9u) << status.Output();
  for (int i : {0, 1}) {
    EXPECT_THAT(lines[2 * i + 1], StartsWith("  psctl-rerun: SYNC version 100, step 100, "));
  }
}

// A run that fails still writes its results, the shards' parameters as they were when it
// stopped included, and then leaves the shards (so that its id may be submitted again).
TEST_F(PsctlClusterTest, AFailedRunWritesItsParametersBeforeItLeavesTheShards) {
  // A learning rate this large overflows within a few steps; the shards refuse the non-finite
  // gradients and the workers fail (continue_on_divergence: the workers' own rule would stop
  // the job first, on its NaN loss; this is about the shards).
  std::string json = absl::StrReplaceAll(
      JobJson("psctl-diverges", 300),
      {{R"("learning_rate": {"base": 0.2})",
        R"("learning_rate": {"base": 3e38}, "continue_on_divergence": true)"}});
  std::string job = WriteJob(dir_, "job", json);
  Psctl submit({"submit", "--cluster_spec=" + spec_path_, "--job=" + job, "--results=" + results_},
               dir_);
  EXPECT_NE(submit.Wait(), 0) << submit.Output();
  EXPECT_THAT(submit.Stderr(), HasSubstr("has NaN in variable"));
  EXPECT_EQ(ReadJson(results_ + "/summary.json")["state"], "FAILED");
  EXPECT_EQ(NpyShape(results_ + "/params/layer0_weights.npy"), std::vector<int64_t>({16, 4}));
  for (const std::string& job_on_task : JobsOnCluster()) {
    EXPECT_THAT(job_on_task, Not(StartsWith("ps:"))) << "the failed run is still on a shard";
  }
}

// A worker that dies mid-run: psctl stops the job at once (the survivor is not left waiting at
// the SYNC barrier for the dead one until its pull times out), and the results still hold the
// shards' parameters.
TEST_F(PsctlClusterTest, AWorkerThatDiesStopsTheRunAtOnceWithItsParametersSaved) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-worker-dies", 1000000));
  Psctl submit({"submit", "--cluster_spec=" + spec_path_, "--job=" + job, "--results=" + results_},
               dir_);
  ASSERT_TRUE(WaitForLines(results_ + "/metrics.csv", 5, absl::Seconds(30))) << submit.Output();
  daemons_[2].Signal(SIGKILL);  // worker:0.
  const absl::Time killed = absl::Now();
  EXPECT_EQ(daemons_[2].Wait(absl::Seconds(10)), std::optional<int>(128 + SIGKILL));
  daemons_.erase(daemons_.begin() + 2);  // Reaped: TearDown stops the others.
  EXPECT_EQ(submit.Wait(absl::Seconds(40)), 138) << submit.Output();  // A task lost: retry.
  EXPECT_LT(absl::Now() - killed, absl::Seconds(30)) << "not after a barrier's 60 s wait";
  EXPECT_EQ(ReadJson(results_ + "/summary.json")["state"], "FAILED");
  EXPECT_EQ(NpyShape(results_ + "/params/layer0_weights.npy"), std::vector<int64_t>({16, 4}));
}

// ALLREDUCE cannot go on without a worker of its ring: one that dies fails the run at once (the
// survivors' ring calls end when psctl stops them, not at their 60 s deadline), and the
// summary names it.
TEST_F(PsctlClusterTest, AWorkerThatDiesEndsAnAllReduceRunNamingIt) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-ring-dies", 1000000,
                                                  R"({"mode": "ALLREDUCE"})"));
  Psctl submit({"submit", "--cluster_spec=" + spec_path_, "--job=" + job, "--results=" + results_},
               dir_);
  ASSERT_TRUE(WaitForLines(results_ + "/metrics.csv", 5, absl::Seconds(30))) << submit.Output();
  daemons_[3].Signal(SIGKILL);  // worker:1.
  const absl::Time killed = absl::Now();
  EXPECT_EQ(daemons_[3].Wait(absl::Seconds(10)), std::optional<int>(128 + SIGKILL));
  daemons_.erase(daemons_.begin() + 3);  // Reaped: TearDown stops the others.
  EXPECT_EQ(submit.Wait(absl::Seconds(40)), 138) << submit.Output();  // A task lost: retry.
  EXPECT_LT(absl::Now() - killed, absl::Seconds(20)) << "not after the ring's 60 s deadline";
  EXPECT_THAT(submit.Output(), HasSubstr("worker:1")) << submit.Output();
  nlohmann::json summary = ReadJson(results_ + "/summary.json");
  EXPECT_EQ(summary["state"], "FAILED") << summary.dump();
  EXPECT_THAT(summary.value("error", ""), HasSubstr("worker:1")) << summary.dump();
}

void PsctlClusterTest::ExpectJobGoesOnWithoutWorker1(const std::string& mode,
                                                     const std::string& consistency) {
  const std::string id = "psctl-goes-on";
  std::string job =
      WriteJob(dir_, id, JobJson(id, 4000, consistency, R"(, "worker_lease_s": 1)"));
  Psctl submit({"submit", "--cluster_spec=" + spec_path_, "--job=" + job,
                "--results=" + results_},
               dir_);
  ASSERT_TRUE(WaitForLines(results_ + "/metrics.csv", 5, absl::Seconds(30)))
      << submit.Output();
  KillWorker1();
  ASSERT_EQ(submit.Wait(), 0) << submit.Output();
  EXPECT_THAT(submit.Stdout(), HasSubstr("worker:1 failed at step "));
  EXPECT_THAT(submit.Stdout(), HasSubstr("the job goes on without it (" + mode + ")"));
  EXPECT_THAT(submit.Stdout(), HasSubstr("finished without worker:1 (lost"));
  nlohmann::json summary = ReadJson(results_ + "/summary.json");
  EXPECT_EQ(summary["state"], "DONE") << summary.dump();
  EXPECT_EQ(summary["steps"], 4000);
  ASSERT_EQ(summary["lost_workers"].size(), 1u) << summary.dump();
  EXPECT_EQ(summary["lost_workers"][0]["worker"], 1);
  EXPECT_THAT(ReadFile(results_ + "/events.csv"),
              ::testing::ContainsRegex(",worker_lost,worker:1,[0-9]+,,,\"lost the progress"));
}

// ASYNC needs no worker in particular.
TEST_F(PsctlClusterTest, AnAsyncJobGoesOnWithoutAWorkerThatDies) {
  ExpectJobGoesOnWithoutWorker1("ASYNC", R"({"mode": "ASYNC"})");
}

// SSP stops waiting for a worker whose lease ran out (1 s here).
TEST_F(PsctlClusterTest, AnSspJobGoesOnWithoutAWorkerThatDiesOnceItsLeaseRunsOut) {
  ExpectJobGoesOnWithoutWorker1("SSP", R"({"mode": "SSP", "ssp_bound": 2})");
}

void PsctlClusterTest::KillWorker1() {
  daemons_[3].Signal(SIGKILL);
  EXPECT_EQ(daemons_[3].Wait(absl::Seconds(10)), std::optional<int>(128 + SIGKILL));
  daemons_.erase(daemons_.begin() + 3);  // Reaped: TearDown stops the others.
}

void PsctlClusterTest::ExpectWorker1Rejoins(const std::string& id, const std::string& consistency,
                                            const std::string& lost_message) {
  // About 2 ms a step: the job outlasts the kill and the restart.
  std::string job = WriteJob(
      dir_, id,
      JobJson(id, 2000, consistency,
              R"(, "worker_lease_s": 8,)"
              R"( "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 2})"));
  Psctl submit({"submit", "--cluster_spec=" + spec_path_, "--job=" + job, "--results=" + results_},
               dir_);
  ASSERT_TRUE(WaitForLines(results_ + "/metrics.csv", 20, absl::Seconds(30))) << submit.Output();
  KillWorker1();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!absl::StrContains(submit.Stdout(), lost_message) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_THAT(submit.Stdout(), HasSubstr(lost_message));
  StartDaemon({kPsWorker, "--cluster_spec=" + spec_path_, "--task=worker:1", "--device=cpu"},
              "worker:1");
  ASSERT_EQ(submit.Wait(), 0) << submit.Output();
  EXPECT_THAT(submit.Stdout(), HasSubstr("worker:1 is back: it rejoins the job at step "));
  EXPECT_THAT(submit.Stdout(), ::testing::Not(HasSubstr("finished without")));
  nlohmann::json summary = ReadJson(results_ + "/summary.json");
  EXPECT_EQ(summary["state"], "DONE") << summary.dump();
  EXPECT_TRUE(summary["lost_workers"].empty()) << summary.dump();
  EXPECT_EQ(summary["steps"], 2000);
  const std::string events = ReadFile(results_ + "/events.csv");
  EXPECT_THAT(events, HasSubstr(",worker_lost,worker:1,"));
  EXPECT_THAT(events, HasSubstr(",worker_rejoined,worker:1,"));
}

// A ps_worker daemon started again on the same address rejoins its job at the step it had
// reached, as a new incarnation whose pushes the shards take (not swallowed as duplicates).
TEST_F(PsctlClusterTest, AWorkerStartedAgainRejoinsItsJob) {
  ExpectWorker1Rejoins("psctl-rejoin", R"({"mode": "ASYNC"})",
                       "the job goes on without it (ASYNC)");
  for (auto& ps : ps_) {
    grpc::ClientContext context;
    JobStatsRequest request;
    request.set_job_id("psctl-rejoin");
    JobStats stats;
    ASSERT_TRUE(ps->GetJobStats(&context, request, &stats).ok());
    EXPECT_EQ(stats.duplicate_pushes(), 0);
  }
}

// SYNC without backup workers, with a lease: the barrier waits for the worker to return.
TEST_F(PsctlClusterTest, ASyncJobWaitsForAWorkerToReturnAndGoesOnWithIt) {
  ExpectWorker1Rejoins("psctl-sync-return", R"({"mode": "SYNC"})",
                       "SYNC waits up to 8s for it to return");
}

TEST_F(PsctlClusterTest, ASyncJobStopsWhenALostWorkerDoesNotReturnInTime) {
  const std::string id = "psctl-sync-no-return";
  std::string job = WriteJob(
      dir_, id, JobJson(id, 1000000, R"({"mode": "SYNC"})", R"(, "worker_lease_s": 1)"));
  Psctl submit({"submit", "--cluster_spec=" + spec_path_, "--job=" + job, "--results=" + results_},
               dir_);
  ASSERT_TRUE(WaitForLines(results_ + "/metrics.csv", 5, absl::Seconds(30))) << submit.Output();
  KillWorker1();  // For good.
  EXPECT_EQ(submit.Wait(absl::Seconds(30)), 138) << submit.Output();  // A task lost: retry.
  EXPECT_THAT(submit.Stdout(), HasSubstr("worker:1 did not return within 1s: stopping job"));
  EXPECT_EQ(ReadJson(results_ + "/summary.json")["state"], "FAILED");
}

// A ps killed (-9) and started again has lost the job: psctl recovers it from its latest
// complete checkpoint on every shard and the job goes on to its end, with the final weights of
// the same job never interrupted (SYNC).
TEST_F(PsctlClusterTest, AJobGoesOnFromItsLatestCheckpointWhenAPsIsKilledAndStartedAgain) {
  auto job_json = [](const std::string& id) {
    return JobJson(id, 3000, R"({"mode": "SYNC"})",
                   R"(, "checkpoint": {"every_steps": 200},)"
                   R"( "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 2})");
  };
  Psctl whole({"submit", "--cluster_spec=" + spec_path_,
               "--job=" + WriteJob(dir_, "whole", job_json("psctl-whole")),
               "--results=" + dir_ + "/whole"},
              dir_);
  ASSERT_EQ(whole.Wait(), 0) << whole.Output();
  const std::string id = "psctl-ps-restart";
  std::string job = WriteJob(dir_, id, job_json(id));
  Psctl submit({"submit", "--cluster_spec=" + spec_path_, "--job=" + job, "--results=" + results_},
               dir_);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!absl::StrContains(submit.Stdout(), "checkpoint 1 complete") &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_THAT(submit.Stdout(), HasSubstr("checkpoint 1 complete")) << submit.Output();
  daemons_[1].Signal(SIGKILL);  // ps:1.
  EXPECT_EQ(daemons_[1].Wait(absl::Seconds(10)), std::optional<int>(128 + SIGKILL));
  daemons_.erase(daemons_.begin() + 1);
  // While ps:1 is down, the job is RECOVERING; once it is back and the job rolled back, RUNNING
  // again, restored from the checkpoint.
  EXPECT_THAT(JobStateLine(id, 138),
              StartsWith("job psctl-ps-restart: RECOVERING (ps:1 is down ("));
  StartDaemon({kPsServer, "--cluster_spec=" + spec_path_, "--task=ps:1", CheckpointDirFlag("ps:1")},
              "ps:1");
  const absl::Time recovered_by = absl::Now() + absl::Seconds(30);
  while (!absl::StrContains(submit.Stdout(), "recovered: ") && absl::Now() < recovered_by) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_THAT(JobStateLine(id),
              ::testing::ContainsRegex("^job psctl-ps-restart: (RUNNING|RECOVERING) \\(run "
                                       "[-0-9a-f]+, restored from checkpoint [-0-9a-f]+ at step "));
  ASSERT_EQ(submit.Wait(absl::Seconds(90)), 0) << submit.Output();
  EXPECT_THAT(submit.Stdout(), HasSubstr(": recovering the job from its latest complete checkpoint"));
  EXPECT_THAT(submit.Stdout(), HasSubstr("recovered: the job goes on from checkpoint "));
  nlohmann::json summary = ReadJson(results_ + "/summary.json");
  EXPECT_EQ(summary["state"], "DONE") << summary.dump();
  EXPECT_EQ(summary["steps"], 3000);
  // time_s,event,task,step,checkpoint,steps_lost,detail.
  EXPECT_THAT(ReadFile(results_ + "/events.csv"),
              ::testing::ContainsRegex(",recovering,ps:1,[0-9]+,,,\"ps:1 (is down|no longer holds)"));
  EXPECT_THAT(ReadFile(results_ + "/events.csv"),
              ::testing::ContainsRegex(",recovered,ps:1,[0-9]+,[-0-9a-f]+,[0-9]+,\"recovered: "));
  ExpectSameParameters(ResultParameters(dir_ + "/whole"), ResultParameters(results_), 1e-6);
}

TEST_F(PsctlClusterTest, DetachedJobCanBeFollowedWithStatusAndStopped) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-detached", 1000000));
  absl::Time start = absl::Now();
  Psctl submit({"submit", "--cluster_spec=" + spec_path_, "--job=" + job, "--detach"}, dir_);
  ASSERT_EQ(submit.Wait(), 0) << submit.Output();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  std::vector<std::string> out = Lines(submit.Stdout());
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), "psctl-detached");
  EXPECT_FALSE(std::filesystem::exists("results/psctl-detached"));

  Psctl status({"status", "--cluster_spec=" + spec_path_, "--job=psctl-detached"}, dir_);
  ASSERT_EQ(status.Wait(), 0) << status.Output();
  std::vector<std::string> lines = Lines(status.Stdout());
  ASSERT_EQ(lines.size(), 9u) << status.Output();
  EXPECT_THAT(lines[8], StartsWith("job psctl-detached: RUNNING (run "));
  for (int i : {0, 1}) {
    EXPECT_THAT(lines[2 * i + 1],
                ::testing::MatchesRegex("  psctl-detached: SYNC version [0-9]+, .*"));
  }
  for (int w : {0, 1}) {
    EXPECT_THAT(lines[5 + 2 * w], StartsWith("  psctl-detached: RUNNING step "));
  }

  Psctl stop({"stop", "--cluster_spec=" + spec_path_, "--job=psctl-detached"}, dir_);
  ASSERT_EQ(stop.Wait(), 0) << stop.Output();
  EXPECT_EQ(stop.Stdout(), "stopped job psctl-detached\n");
  // The shards dropped the job at once; the workers stop at their next step.
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  std::vector<std::string> jobs;
  do {
    jobs = JobsOnCluster();
    if (jobs == std::vector<std::string>{"worker:0 psctl-detached STOPPED",
                                         "worker:1 psctl-detached STOPPED"}) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  } while (absl::Now() < deadline);
  EXPECT_THAT(jobs,
              ElementsAre("worker:0 psctl-detached STOPPED", "worker:1 psctl-detached STOPPED"));
}

TEST_F(PsctlClusterTest, StopOfAnUnknownJobIsNotFound) {
  Psctl psctl({"stop", "--cluster_spec=" + spec_path_, "--job=nonexistent"}, dir_);
  EXPECT_EQ(psctl.Wait(), 2) << psctl.Output();
  EXPECT_THAT(
      Lines(psctl.Stderr()),
      ElementsAre(R"(psctl: no task knows job "nonexistent"; `psctl status` lists the jobs)"));
  EXPECT_EQ(psctl.Stdout(), "");
}

// The exit codes a script or a restart policy acts on (docs/REFERENCE.md, "Exit codes"): an unknown
// flag is bad input (2); a status with a task down and a submit to a cluster not ready say "retry"
// (138); a submit told to wait for the cluster starts once the task is back; a job stopped by
// another psctl ends its follower with 4.
TEST_F(PsctlClusterTest, ExitCodesSayWhetherToTryAgain) {
  Psctl unknown({"status", "--cluster_spec=" + spec_path_, "--no_such_flag"}, dir_);
  EXPECT_EQ(unknown.Wait(), 2) << unknown.Output();
  EXPECT_THAT(unknown.Stderr(), HasSubstr("no_such_flag"));
  Psctl version({"--version"}, dir_);  // gflags ends it, as it ends a bad flag: with 0.
  EXPECT_EQ(version.Wait(), 0) << version.Output();
  EXPECT_THAT(version.Stdout(), HasSubstr("psctl version "));

  KillWorker1();
  Psctl status({"status", "--cluster_spec=" + spec_path_}, dir_);
  EXPECT_EQ(status.Wait(), 138) << status.Output();
  EXPECT_THAT(status.Stdout(), HasSubstr("worker:1"));
  EXPECT_THAT(status.Stderr(), HasSubstr("psctl: 1 of the cluster's 4 tasks does not answer (down?)"));

  std::string job = WriteJob(dir_, "job", JobJson("psctl-waits", 300));
  Psctl waiting({"submit", "--cluster_spec=" + spec_path_, "--job=" + job,
                 "--results=" + results_, "--wait_for_cluster_s=60"},
                dir_);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!absl::StrContains(waiting.Stdout(), "waiting up to") && !waiting.Ended() &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  absl::SleepFor(absl::Seconds(1));
  ASSERT_FALSE(waiting.Ended()) << waiting.Output();
  StartDaemon({kPsWorker, "--cluster_spec=" + spec_path_, "--task=worker:1", "--device=cpu"},
              "worker:1");
  ASSERT_EQ(waiting.Wait(), 0) << waiting.Output();
  EXPECT_THAT(waiting.Stdout(), HasSubstr("waiting up to "));
  EXPECT_THAT(waiting.Stdout(), HasSubstr("for the cluster (--wait_for_cluster_s): worker:1"));
}

// The psctl following a job is suspended (Ctrl-Z) past the workers' keepalive, which closes its
// progress streams: once continued it opens them again and follows the job on. Then another
// psctl stops the job, and the follower exits 4.
TEST_F(PsctlClusterTest, ASuspendedFollowerGoesOnAndAJobStoppedBySomeoneElseEndsItWithFour) {
  std::string job = WriteJob(dir_, "job", JobJson("psctl-stopped", 1000000));
  Psctl submit({"submit", "--cluster_spec=" + spec_path_, "--job=" + job, "--results=" + results_},
               dir_);
  ASSERT_TRUE(WaitForLines(results_ + "/metrics.csv", 5, absl::Seconds(30))) << submit.Output();
  ASSERT_EQ(kill(submit.pid(), SIGSTOP), 0);
  absl::SleepFor(kKeepaliveInterval + kServerKeepaliveTimeout + absl::Seconds(2));
  ASSERT_EQ(kill(submit.pid(), SIGCONT), 0);
  absl::SleepFor(absl::Seconds(2));
  ASSERT_FALSE(submit.Ended()) << submit.Output();
  EXPECT_THAT(JobStateLine("psctl-stopped"), StartsWith("job psctl-stopped: RUNNING"));
  Psctl stop({"stop", "--cluster_spec=" + spec_path_, "--job=psctl-stopped"}, dir_);
  ASSERT_EQ(stop.Wait(), 0) << stop.Output();
  EXPECT_EQ(submit.Wait(absl::Seconds(40)), 4) << submit.Output();
  EXPECT_THAT(submit.Stderr(), HasSubstr("job psctl-stopped was stopped on worker:"));
}

TEST_F(PsctlClusterTest, SubmitToAnUnreachableAddressNamesTheTask) {
  absl::StatusOr<int> port = PickUnusedPort();
  ASSERT_TRUE(port.ok()) << port.status();
  std::vector<std::string> addresses = addresses_;
  addresses[3] = absl::StrCat("127.0.0.1:", *port);  // Nothing listens there.
  std::string spec = WriteSpec("unreachable", addresses);
  std::string job = WriteJob(dir_, "job", JobJson("psctl-unreachable", 300));
  Psctl psctl({"submit", "--cluster_spec=" + spec, "--job=" + job, "--results=" + results_}, dir_);
  std::vector<std::string> problems = ExpectNotReady(psctl);
  ASSERT_EQ(problems.size(), 1u) << psctl.Output();
  EXPECT_THAT(problems[0], StartsWith(absl::StrCat("worker:1 (", addresses[3], "): unreachable")));
}

TEST_F(PsctlClusterTest, SubmitToADaemonOfTheWrongRoleNamesIt) {
  // A ps_server where the spec says worker:1.
  int port =
      StartDaemon({kPsServer, "--cluster_spec=" + spec_path_, "--task=ps:0", "--port=0"}, "ps:0");
  ASSERT_GT(port, 0);
  std::vector<std::string> addresses = addresses_;
  addresses[3] = absl::StrCat("127.0.0.1:", port);
  std::string spec = WriteSpec("wrong_role", addresses);
  std::string job = WriteJob(dir_, "job", JobJson("psctl-wrong-role", 300));
  // Told to wait for the cluster, it does not: waiting cannot mend a daemon of the wrong role.
  Psctl psctl({"submit", "--cluster_spec=" + spec, "--job=" + job, "--results=" + results_,
               "--wait_for_cluster_s=600"},
              dir_);
  std::vector<std::string> problems = ExpectNotReady(psctl, 2);
  ASSERT_EQ(problems.size(), 1u) << psctl.Output();
  EXPECT_THAT(problems[0],
              StartsWith(absl::StrCat("worker:1 (", addresses[3], "): not a ps_worker")));
}

TEST_F(PsctlClusterTest, SubmitRefusesABadJobBeforeStartingIt) {
  std::string job = WriteJob(
      dir_, "job", JobJson("psctl-bad", 300, R"({"mode": "SYNC", "replicas_to_aggregate": 3})"));
  Psctl psctl({"submit", "--cluster_spec=" + spec_path_, "--job=" + job, "--results=" + results_},
              dir_);
  EXPECT_EQ(psctl.Wait(), 2) << psctl.Output();
  EXPECT_THAT(Lines(psctl.Stderr()),
              ElementsAre(StartsWith("psctl: job: consistency.replicas_to_aggregate is 3 but the "
                                     "cluster has 2 workers")));
  EXPECT_THAT(JobsOnCluster(), IsEmpty());
  EXPECT_FALSE(std::filesystem::exists(results_));
}

}  // namespace
}  // namespace ps
