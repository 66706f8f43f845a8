#include "worker/program_runner.h"

#include <stdlib.h>

#include <atomic>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

// A program job of `script`, run by /bin/sh -c.
ProgramContext ShellJob(const std::string& script) {
  ProgramContext context;
  context.spec.set_job_id("prog");
  context.spec.set_run_id("run-7");
  context.spec.mutable_program()->add_argv("sh");
  context.spec.mutable_program()->add_argv("-c");
  context.spec.mutable_program()->add_argv(script);
  context.worker = 1;
  context.num_workers = 2;
  context.incarnation = 3;
  context.first_step = 40;
  context.ps.ps_addresses = {"127.0.0.1:1", "127.0.0.1:2"};
  context.ps.token = "secret";
  context.stop_grace = absl::Milliseconds(200);
  return context;
}

TEST(ProgramRunnerTest, RelaysTheProgramsProgressAndEndsOkWhenItExitsZero) {
  ProgramContext context = ShellJob(
      "echo '{\"step\": 1, \"loss\": 2.5}' >> \"$PS_PROGRESS_FILE\";"
      "echo '{\"step\": 2, \"eval\": {\"step\": 2, \"accuracy\": 0.75}}' >> \"$PS_PROGRESS_FILE\";"
      "echo 'not json' >> \"$PS_PROGRESS_FILE\";"
      "echo '{\"step\": 3}' >> \"$PS_PROGRESS_FILE\"");
  std::vector<JobProgress> reports;
  context.report = [&reports](const JobProgress& progress) { reports.push_back(progress); };
  ASSERT_TRUE(RunProgram(context).ok());
  ASSERT_EQ(reports.size(), 3u);  // The bad line skipped.
  EXPECT_EQ(reports[0].step(), 1);
  EXPECT_EQ(reports[0].loss(), 2.5);
  EXPECT_EQ(reports[0].job_id(), "prog");
  EXPECT_EQ(reports[0].worker(), 1);
  EXPECT_EQ(reports[1].eval().accuracy(), 0.75);
  EXPECT_EQ(reports[2].eval().accuracy(), 0.75);  // The latest evaluation, carried.
  EXPECT_FALSE(reports[0].has_eval());
}

TEST(ProgramRunnerTest, GivesTheProgramItsTaskAndTheTokenInAPrivateFile) {
  ProgramContext context = ShellJob(
      "test \"$PS_WORKER/$PS_NUM_WORKERS/$PS_INCARNATION/$PS_FIRST_STEP\" = 1/2/3/40 || exit 3;"
      "test \"$PS_PS_ADDRESSES\" = 127.0.0.1:1,127.0.0.1:2 || exit 4;"
      "test \"$TF_CONFIG\" = '{\"cluster\":{\"ps\":[\"127.0.0.1:1\",\"127.0.0.1:2\"]},"
      "\"task\":{\"type\":\"worker\",\"index\":1}}' || exit 8;"
      "test \"$(cat \"$PS_TOKEN_FILE\")\" = secret || exit 5;"
      "test \"$(stat -c %a \"$PS_TOKEN_FILE\")\" = 600 || exit 6;"
      "case \"$PS_JOB\" in *'\"run_id\":\"run-7\"'*) ;; *) exit 7;; esac");
  context.report = [](const JobProgress&) {};
  absl::Status status = RunProgram(context);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(ProgramRunnerTest, AFailingProgramFailsTheJobWithItsLastOutput) {
  ProgramContext context = ShellJob("echo 'Traceback: shapes differ' >&2; exit 9");
  context.report = [](const JobProgress&) {};
  absl::Status status = RunProgram(context);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(status.message(), HasSubstr("exited with status 9"));
  EXPECT_THAT(status.message(), HasSubstr("Traceback: shapes differ"));

  context = ShellJob("kill -9 $$");
  context.report = [](const JobProgress&) {};
  status = RunProgram(context);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);  // Died: a lost worker.
  EXPECT_THAT(status.message(), HasSubstr("was killed by signal 9"));
}

TEST(ProgramRunnerTest, StoppingTheJobTerminatesTheProgram) {
  std::atomic<bool> stop{true};
  // It ignores SIGTERM: SIGKILL follows after the grace.
  ProgramContext context = ShellJob("trap '' TERM; sleep 30");
  context.stop = &stop;
  context.report = [](const JobProgress&) {};
  const absl::Time start = absl::Now();
  EXPECT_TRUE(absl::IsCancelled(RunProgram(context)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(ProgramRunnerTest, FindsTheProgramOnThePathOrSaysWhereItLooked) {
  EXPECT_EQ(*FindProgram("sh", "/nonexistent:/bin"), "/bin/sh");
  absl::StatusOr<std::string> missing = FindProgram("no_such_program", "/bin:/usr/bin");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/bin:/usr/bin"));
  EXPECT_EQ(FindProgram("/no/such/file", "").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ps
