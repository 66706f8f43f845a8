// RunTrainer's data and evaluation (worker/trainer_testing.h): the chief's evaluations, the test
// and validation splits, target_loss, early stopping, divergence and a missing data file.
#include "worker/trainer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/job/job_schema.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"
#include "proto/worker_service.pb.h"
#include "server/testing/in_process_ps_cluster.h"
#include "worker/allreduce/local_ring.h"
#include "worker/compute/compute_backend.h"
#include "worker/compute/cpu_threads.h"
#include "worker/host_variables.h"
#include "worker/trainer_testing.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using trainer_testing::TrainerTest;
using trainer_testing::WorkerRun;

TEST_F(TrainerTest, ChiefReportsEvaluations) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("chief", ConsistencyConfig::SYNC);
  spec.set_eval_interval(10);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  ExpectTrainedFor(runs, 30);
  std::vector<int64_t> eval_steps;
  for (const JobProgress& progress : runs[0].reports) {
    if (progress.has_eval() &&
        (eval_steps.empty() || eval_steps.back() != progress.eval().step())) {
      eval_steps.push_back(progress.eval().step());
    }
  }
  EXPECT_EQ(eval_steps, (std::vector<int64_t>{10, 20, 30}));
  const EvalResult& eval = runs[0].last().eval();
  EXPECT_EQ(eval.step(), 30);
  EXPECT_EQ(eval.examples(), 40);  // The default test_fraction, 0.1 of 400.
  EXPECT_GT(eval.loss(), 0);
  EXPECT_GE(eval.accuracy(), 0.8) << eval.DebugString();
  for (const JobProgress& progress : runs[1].reports) EXPECT_FALSE(progress.has_eval());
}

TEST_F(TrainerTest, TargetLossStopsEveryWorkerAtTheSameEarlyStep) {
  StartServers(2);
  JobSpec spec = SoftmaxJob("target", ConsistencyConfig::SYNC);
  spec.set_steps(500);
  spec.set_eval_interval(5);
  spec.set_target_loss(0.16f);  // Test loss: 0.40 at step 5, 0.23 at 10, 0.10 at 30.
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  for (const WorkerRun& run : runs) {
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_GE(run.last().step(), 10);
    EXPECT_LT(run.last().step(), 500);
    EXPECT_EQ(run.last().step() % 5, 0);
    // Every worker evaluates when a target may stop the job, and stops at its first success.
    EXPECT_EQ(run.last().eval().step(), run.last().step());
    EXPECT_LT(run.last().eval().loss(), 0.16);
  }
  EXPECT_EQ(runs[0].last().step(), runs[1].last().step());
  std::vector<JobStats> stats = Stats("target");
  for (const JobStats& shard : stats) EXPECT_EQ(shard.step(), runs[0].last().step());
}

TEST_F(TrainerTest, TestFractionZeroEvaluatesNothing) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("no_test", ConsistencyConfig::SYNC);
  spec.mutable_data()->set_test_fraction(0);
  spec.set_eval_interval(10);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  ExpectTrainedFor(runs, 30);
  for (const WorkerRun& run : runs) {
    for (const JobProgress& progress : run.reports) {
      EXPECT_FALSE(progress.has_eval());
      EXPECT_FALSE(progress.has_validation());
    }
  }
  // All 400 examples train: 2 workers x 30 steps x 16 = 960 = 2.4 epochs of 400 (of 360, 2.67).
  EXPECT_EQ(runs[0].last().epoch(), 2);
}

// A test file of its own: the chief evaluates on exactly its rows, and the whole source trains.
TEST_F(TrainerTest, ATestFileIsEvaluatedWhole) {
  StartServers(1);
  const std::string dir = ::testing::TempDir();
  std::ofstream train(dir + "/train.csv"), test(dir + "/test.csv");
  for (int i = 0; i < 64; ++i) train << i % 2 << "," << (i % 2 ? 1.0 : -1.0) + 0.01 * i << "\n";
  for (int i = 0; i < 7; ++i) test << (i < 3) << "," << (i < 3 ? 1.5 : -1.5) << "\n";
  train.close();
  test.close();
  JobSpec spec = SoftmaxJob("test_file", ConsistencyConfig::SYNC);
  spec.mutable_data()->set_csv(dir + "/train.csv");
  spec.mutable_data()->set_test_data(dir + "/test.csv");
  spec.set_steps(20);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  ExpectTrainedFor(runs, 20);
  EXPECT_EQ(runs[0].last().eval().examples(), 7);
  EXPECT_EQ(runs[0].last().eval().accuracy(), 1.0) << runs[0].last().eval().DebugString();
}

// With a validation split, the stop rules look at it, not at the test set, and say so.
TEST_F(TrainerTest, TheValidationSplitDecidesTargetLoss) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("validated", ConsistencyConfig::SYNC);
  spec.mutable_data()->set_validation_fraction(0.25f);  // 90 of the 360 training examples.
  spec.set_steps(500);
  spec.set_eval_interval(5);
  spec.set_target_loss(0.2f);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  for (const WorkerRun& run : runs) {
    ASSERT_TRUE(run.status.ok()) << run.status;
    const JobProgress& last = run.last();
    EXPECT_LT(last.step(), 500);
    EXPECT_EQ(last.validation().examples(), 90);
    EXPECT_EQ(last.validation().step(), last.step());
    EXPECT_LT(last.validation().loss(), 0.2);
    EXPECT_THAT(last.note(), HasSubstr("validation loss"));
  }
  EXPECT_EQ(runs[0].last().eval().examples(), 40);  // The test set is still reported.
}

// With a validation split, the chief's periodic evaluations are on it alone: the test set is
// evaluated once, by the final evaluation.
TEST_F(TrainerTest, TheTestSetIsTouchedOnceWhereThereIsAValidationSplit) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("test_once", ConsistencyConfig::SYNC);
  spec.mutable_data()->set_validation_fraction(0.25f);
  spec.set_steps(30);
  spec.set_eval_interval(5);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  ExpectTrainedFor(runs, 30);
  const std::vector<JobProgress>& reports = runs[0].reports;
  int validations = 0;
  for (size_t i = 0; i + 1 < reports.size(); ++i) {
    EXPECT_FALSE(reports[i].has_eval()) << "step " << reports[i].step() << " evaluated the test set";
    validations += reports[i].has_validation() && reports[i].validation().step() == reports[i].step();
  }
  EXPECT_EQ(validations, 6);  // Steps 5, 10, ..., 30.
  EXPECT_EQ(reports.back().eval().examples(), 40);
  EXPECT_EQ(reports.back().validation().examples(), 90);
}

// Early stopping: with a learning rate too small to change any weight's float, the loss never
// falls below its first value, so the job ends early_stopping_evals evaluations after the first.
TEST_F(TrainerTest, EarlyStoppingEndsAJobWhoseLossStopsFalling) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("plateau", ConsistencyConfig::SYNC);
  spec.mutable_learning_rate()->set_base(1e-30f);
  spec.set_steps(500);
  spec.set_eval_interval(5);
  spec.set_early_stopping_evals(2);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  for (const WorkerRun& run : runs) {
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_EQ(run.last().step(), 15);
    EXPECT_THAT(run.last().note(), HasSubstr("stopped early at step 15"));
  }
  // A job that learns is not stopped.
  spec.set_job_id("learning");
  spec.mutable_learning_rate()->set_base(0.2f);
  spec.set_steps(30);
  runs = RunWorkers(spec, 2);
  ExpectTrainedFor(runs, 30);
  EXPECT_EQ(runs[0].last().note(), "");
}

// A learning rate far too large: the loss rises (or turns NaN) and the job fails saying so,
// unless continue_on_divergence, when it goes on and its progress notes it. Every other test
// here is a converging job the rule leaves alone.
TEST_F(TrainerTest, ADivergingJobFailsSayingWhy) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("diverging", ConsistencyConfig::SYNC);
  spec.mutable_learning_rate()->set_base(500.0f);
  spec.set_steps(200);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  bool diverged = false;
  for (const WorkerRun& run : runs) {
    if (run.status.ok()) continue;
    diverged = diverged || absl::IsAborted(run.status);
    EXPECT_THAT(run.status.message(), HasSubstr("training diverged: the training loss"))
        << run.status;
    EXPECT_THAT(run.status.message(), HasSubstr("lower the learning rate"));
  }
  EXPECT_TRUE(diverged);
  EXPECT_LT(runs[0].last().step(), 200);

  spec.set_job_id("diverging_on");
  spec.set_continue_on_divergence(true);
  runs = RunWorkers(spec, 2);
  int noted = 0;  // Workers whose loss the rule caught (one may be enough to fail the job).
  for (const WorkerRun& run : runs) {
    // It may still fail, at the ps, once its gradients are no longer finite; what it did
    // before is noted.
    if (run.status.ok()) {
      EXPECT_EQ(run.last().step(), 200);
    }
    noted += run.last().note().find("training diverged") != std::string::npos;
  }
  EXPECT_GE(noted, 1);
}

TEST_F(TrainerTest, MissingCsvFileFailsNamingIt) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("bad-data", ConsistencyConfig::ASYNC);
  const std::string path = absl::StrCat(::testing::TempDir(), "/no-such-dir/train.csv");
  spec.mutable_data()->set_csv(path);
  std::vector<WorkerRun> runs = RunWorkers(spec, 1);
  EXPECT_EQ(runs[0].status.code(), absl::StatusCode::kNotFound) << runs[0].status;
  EXPECT_THAT(std::string(runs[0].status.message()), HasSubstr(path));
  EXPECT_TRUE(runs[0].reports.empty());
}

}  // namespace
}  // namespace ps
