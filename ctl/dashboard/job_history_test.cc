#include "ctl/dashboard/job_history.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

JobProgress Worker(int worker, JobProgress::State state, int64_t step, double loss) {
  JobProgress progress;
  progress.set_worker(worker);
  progress.set_state(state);
  progress.set_step(step);
  progress.set_loss(loss);
  progress.set_examples_per_second(100 * loss);
  return progress;
}

ClusterSnapshot Snapshot(int64_t time_ms, std::vector<JobProgress> workers) {
  ClusterSnapshot snapshot;
  snapshot.time_ms = time_ms;
  JobSnapshot job;
  job.job_id = "j";
  job.workers = std::move(workers);
  snapshot.jobs.push_back(job);
  return snapshot;
}

TEST(JobHistoryTest, EachWorkersValuesFromItsFirstStepToItsEndForTheLastPoints) {
  JobHistory history(3);
  history.Record(Snapshot(1000, {Worker(0, JobProgress::RUNNING, 0, 0)}));  // No step yet.
  history.Record(Snapshot(2000, {Worker(0, JobProgress::RUNNING, 5, 0.5),
                                 Worker(1, JobProgress::RUNNING, 4, 0.7)}));
  history.Record(Snapshot(3000, {Worker(0, JobProgress::DONE, 9, 0.25),
                                 Worker(1, JobProgress::RUNNING, 8, 0.6)}));
  nlohmann::json json = history.Json();
  EXPECT_EQ(json["j"]["times"], nlohmann::json({1.0, 2.0, 3.0}));
  EXPECT_EQ(json["j"]["workers"]["0"]["loss"], nlohmann::json({nullptr, 0.5, 0.25}));
  EXPECT_EQ(json["j"]["workers"]["1"]["loss"], nlohmann::json({nullptr, 0.7, 0.6}));
  EXPECT_EQ(json["j"]["workers"]["1"]["examples_per_second"], nlohmann::json({nullptr, 70.0, 60.0}));

  // Worker 0 ended: its line ends; worker 1 is gone from the snapshot; the oldest point goes.
  history.Record(Snapshot(4000, {Worker(0, JobProgress::DONE, 9, 0.25)}));
  json = history.Json();
  EXPECT_EQ(json["j"]["times"], nlohmann::json({2.0, 3.0, 4.0}));
  EXPECT_EQ(json["j"]["workers"]["0"]["loss"], nlohmann::json({0.5, 0.25, nullptr}));
  EXPECT_EQ(json["j"]["workers"]["1"]["loss"], nlohmann::json({0.7, 0.6, nullptr}));

  // A job no longer listed is forgotten.
  history.Record(ClusterSnapshot{5000, {}, {}});
  EXPECT_EQ(history.Json(), nlohmann::json::object());
}

}  // namespace
}  // namespace ps
