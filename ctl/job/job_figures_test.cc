// The job's figures, one definition each: the job's step as its `steps` limit counts it, the loss
// of the workers still running, every example over the job's wall time, and the time left.
#include "ctl/job/job_figures.h"

#include <gtest/gtest.h>

#include <vector>

namespace ps {
namespace {

JobProgress Worker(int worker, JobProgress::State state, int64_t step, int64_t global_step,
                   double loss) {
  JobProgress progress;
  progress.set_worker(worker);
  progress.set_state(state);
  progress.set_step(step);
  progress.set_global_step(global_step);
  progress.set_loss(loss);
  return progress;
}

JobSpec Spec(ConsistencyConfig::Mode mode) {
  JobSpec spec;
  spec.set_steps(100);
  spec.mutable_consistency()->set_mode(mode);
  return spec;
}

TEST(JobFiguresTest, SyncCountsTheShardsStepsWhoeverTookPart) {
  // A backup worker ran fewer steps itself; the shards are at the step after the one the
  // fastest pushed for (global_step counts from 0).
  const std::vector<JobProgress> workers = {
      Worker(0, JobProgress::RUNNING, 40, 41, 0.5), Worker(1, JobProgress::RUNNING, 30, 41, 0.7),
      Worker(2, JobProgress::RUNNING, 0, 0, 0)};
  const JobFigures figures = FiguresOf(ConsistencyConfig::SYNC, workers, absl::Seconds(4));
  EXPECT_EQ(figures.step, 42);
  EXPECT_DOUBLE_EQ(figures.loss, 0.6);  // Worker 2 has run no step: no loss yet.
  EXPECT_TRUE(figures.stepped);
  // Its last step's push: the job's steps.
  const JobProgress last = Worker(0, JobProgress::DONE, 100, 99, 0.1);
  EXPECT_EQ(FiguresOf(ConsistencyConfig::SYNC, {last}, absl::Seconds(4)).step, 100);
}

TEST(JobFiguresTest, OtherModesCountTheRunningWorkerFurthestBehind) {
  const JobSpec spec = Spec(ConsistencyConfig::ASYNC);
  std::vector<JobProgress> workers = {Worker(0, JobProgress::DONE, 100, 350, 0.2),
                                      Worker(1, JobProgress::RUNNING, 60, 350, 0.4),
                                      Worker(2, JobProgress::RUNNING, 80, 350, 0.6),
                                      Worker(3, JobProgress::FAILED, 10, 20, 9)};
  JobFigures figures = FiguresOf(spec.consistency().mode(), workers, absl::Seconds(4));
  EXPECT_EQ(figures.step, 60);
  EXPECT_DOUBLE_EQ(figures.loss, 0.5);  // Of the running workers.
  // None runs: the DONE workers' (the lost worker 3's stale report no longer counts).
  workers[1].set_state(JobProgress::DONE);
  workers[2].set_state(JobProgress::DONE);
  figures = FiguresOf(spec.consistency().mode(), workers, absl::Seconds(4));
  EXPECT_EQ(figures.step, 60);
  EXPECT_DOUBLE_EQ(figures.loss, (0.2 + 0.4 + 0.6) / 3);
  // A worker started again reports step 0 until its first step: the others' step counts.
  workers[1] = Worker(1, JobProgress::RUNNING, 0, 0, 0);
  workers[2].set_state(JobProgress::RUNNING);
  EXPECT_EQ(FiguresOf(spec.consistency().mode(), workers, absl::Seconds(4)).step, 80);
  // Never past the job's steps.
  EXPECT_EQ(FiguresOf(ConsistencyConfig::SYNC, {Worker(0, JobProgress::DONE, 100, 100, 0.1)},
                      absl::Seconds(4), 100)
                .step,
            100);
  // No worker has run a step.
  figures = FiguresOf(spec.consistency().mode(), {Worker(0, JobProgress::RUNNING, 0, 0, 0)},
                      absl::Seconds(1));
  EXPECT_EQ(figures.step, 0);
  EXPECT_FALSE(figures.stepped);
  EXPECT_FALSE(EtaOf(spec, figures, absl::Seconds(1)).has_value());
}

TEST(JobFiguresTest, ExamplesPerSecondIsEveryExampleOverTheWallTime) {
  // Worker 0 trained 1000 examples in 10 s and finished; worker 1 200 in 20 s, still running.
  JobProgress fast = Worker(0, JobProgress::DONE, 100, 0, 0);
  fast.set_examples_per_second(100);
  fast.set_elapsed_seconds(10);
  JobProgress slow = Worker(1, JobProgress::RUNNING, 20, 0, 0);
  slow.set_examples_per_second(10);
  slow.set_elapsed_seconds(20);
  const JobFigures figures =
      FiguresOf(ConsistencyConfig::ASYNC, {fast, slow}, absl::Seconds(24));
  EXPECT_DOUBLE_EQ(figures.examples, 1200);
  EXPECT_DOUBLE_EQ(figures.examples_per_second, 50);  // Not 100 + 10.
  EXPECT_DOUBLE_EQ(FiguresOf(ConsistencyConfig::ASYNC, {fast, slow}, absl::ZeroDuration())
                       .examples_per_second,
                   0);
}

TEST(JobFiguresTest, ARestartedWorkersExamplesBeforeItsRestartCount) {
  // Worker 1 was started again 4 s ago at its step 150: 3000 examples in all, 400 of them in
  // this process (100 a second); its rate alone would count 400.
  JobProgress steady = Worker(0, JobProgress::RUNNING, 170, 0, 0);
  steady.set_examples_per_second(100);
  steady.set_elapsed_seconds(34);
  steady.set_examples(3400);
  JobProgress restarted = Worker(1, JobProgress::RUNNING, 170, 0, 0);
  restarted.set_examples_per_second(100);
  restarted.set_elapsed_seconds(4);
  restarted.set_examples(3000 + 400);
  const JobFigures figures =
      FiguresOf(ConsistencyConfig::ASYNC, {steady, restarted}, absl::Seconds(40));
  EXPECT_DOUBLE_EQ(figures.examples, 6800);
  EXPECT_DOUBLE_EQ(figures.examples_per_second, 170);
}

TEST(JobFiguresTest, TheNoteIsTheWorkersOwnWhereTheyAgreeElseEachOnesNamed) {
  std::vector<JobProgress> workers = {Worker(0, JobProgress::DONE, 100, 0, 0),
                                      Worker(1, JobProgress::DONE, 90, 0, 0),
                                      Worker(2, JobProgress::DONE, 90, 0, 0)};
  EXPECT_EQ(FiguresOf(ConsistencyConfig::ASYNC, workers, absl::Seconds(1)).note, "");
  const std::string limit = "stopped before its steps: the job's time_limit_s, 30 s, ran out";
  workers[1].set_note(limit);
  workers[2].set_note(limit);
  EXPECT_EQ(FiguresOf(ConsistencyConfig::ASYNC, workers, absl::Seconds(1)).note, limit);
  workers[0].set_note("the training loss had stopped falling");
  EXPECT_EQ(FiguresOf(ConsistencyConfig::ASYNC, workers, absl::Seconds(1)).note,
            "worker:0: the training loss had stopped falling; worker:1: " + limit +
                "; worker:2: " + limit);
}

TEST(JobFiguresTest, TheEtaIsTheStepsLeftOrTheTimeLimitWhicheverComesFirst) {
  JobSpec spec = Spec(ConsistencyConfig::ASYNC);
  JobFigures figures;
  figures.step = 25;
  absl::optional<Eta> eta = EtaOf(spec, figures, absl::Seconds(10));
  ASSERT_TRUE(eta.has_value());
  EXPECT_EQ(eta->left, absl::Seconds(30));  // 75 steps at 2.5 a second.
  EXPECT_FALSE(eta->time_limit);
  spec.set_time_limit_s(20);
  eta = EtaOf(spec, figures, absl::Seconds(10));
  ASSERT_TRUE(eta.has_value());
  EXPECT_EQ(eta->left, absl::Seconds(10));
  EXPECT_TRUE(eta->time_limit);
  // Past the limit (the workers are stopping): nothing left, never a negative time.
  EXPECT_EQ(EtaOf(spec, figures, absl::Seconds(25))->left, absl::ZeroDuration());
  // An `epochs` job: only the time limit bounds what psctl knows.
  spec.set_steps(0);
  spec.set_epochs(3);
  EXPECT_TRUE(EtaOf(spec, figures, absl::Seconds(10))->time_limit);
  spec.clear_time_limit_s();
  EXPECT_FALSE(EtaOf(spec, figures, absl::Seconds(10)).has_value());
}

}  // namespace
}  // namespace ps
