// A traced job (JobSpec.trace): the workers' training loops and the shards record every step and
// every update, and the shards' records agree with their staleness statistics.
#include <map>
#include <memory>
#include <vector>

#include "common/trace/trace_recorder.h"
#include "gtest/gtest.h"
#include "worker/trainer.h"
#include "worker/trainer_testing.h"

namespace ps {
namespace {

using trainer_testing::TrainerTest;
using trainer_testing::WorkerRun;

class TrainerTraceTest : public TrainerTest {
 protected:
  // Runs `spec`, traced, on 2 workers and 2 ps; each worker's trace into worker_traces_, each
  // shard's into shard_traces_.
  void RunTraced(JobSpec spec) {
    spec.set_trace(true);
    StartServers(2);
    std::vector<std::unique_ptr<TraceRecorder>> recorders;
    for (int w = 0; w < 2; ++w) recorders.push_back(std::make_unique<TraceRecorder>(Clock::Real()));
    std::vector<WorkerRun> runs =
        RunWorkers(spec, 2, nullptr, nullptr,
                   [&](TrainerContext* context) { context->trace = recorders[context->worker].get(); });
    for (const WorkerRun& run : runs) ASSERT_TRUE(run.status.ok()) << run.status;
    for (const auto& recorder : recorders) worker_traces_.push_back(recorder->Snapshot());
    absl::StatusOr<std::vector<Trace>> shards = NewClient()->GetTraces(spec.job_id());
    ASSERT_TRUE(shards.ok()) << shards.status();
    shard_traces_ = *std::move(shards);
    stats_ = Stats(spec.job_id());
    ASSERT_EQ(stats_.size(), 2u);
  }

  // The events of `kind` in `trace`.
  static std::vector<TraceEvent> Of(const Trace& trace, TraceEvent::Kind kind) {
    std::vector<TraceEvent> events;
    for (const TraceEvent& event : trace.events()) {
      if (event.kind() == kind) events.push_back(event);
    }
    return events;
  }

  // Each of `steps` steps has one pull, compute and push of its worker, in that order and in
  // step order.
  void ExpectEveryStepTraced(int64_t steps) {
    for (int w = 0; w < 2; ++w) {
      SCOPED_TRACE(testing::Message() << "worker " << w);
      const Trace& trace = worker_traces_[w];
      EXPECT_EQ(trace.dropped(), 0);
      const std::vector<TraceEvent> pulls = Of(trace, TraceEvent::PULL);
      const std::vector<TraceEvent> computes = Of(trace, TraceEvent::COMPUTE);
      const std::vector<TraceEvent> pushes = Of(trace, TraceEvent::PUSH);
      ASSERT_EQ(pulls.size(), static_cast<size_t>(steps));
      ASSERT_EQ(computes.size(), static_cast<size_t>(steps));
      ASSERT_EQ(pushes.size(), static_cast<size_t>(steps));
      for (int64_t step = 0; step < steps; ++step) {
        EXPECT_EQ(pulls[step].step(), step);
        EXPECT_EQ(computes[step].step(), step);
        EXPECT_EQ(pushes[step].step(), step);
        EXPECT_EQ(pulls[step].worker(), w);
        EXPECT_LE(pulls[step].start_us() + pulls[step].duration_us(), computes[step].start_us());
        EXPECT_LE(computes[step].start_us() + computes[step].duration_us(),
                  pushes[step].start_us());
        EXPECT_GT(computes[step].duration_us(), 0);
      }
      // Waits lie within their phase.
      for (const TraceEvent& wait : Of(trace, TraceEvent::WAIT)) {
        const std::vector<TraceEvent>& phases = wait.start_us() == pulls[wait.step()].start_us()
                                                     ? pulls
                                                     : pushes;
        EXPECT_EQ(wait.start_us(), phases[wait.step()].start_us());
        EXPECT_LE(wait.duration_us(), phases[wait.step()].duration_us());
      }
    }
  }

  // The staleness of the gradients `kind` records on each shard adds up to the shard's
  // statistics, gradient for gradient.
  void ExpectShardStalenessMatchesStats(TraceEvent::Kind kind) {
    for (int shard = 0; shard < 2; ++shard) {
      SCOPED_TRACE(testing::Message() << "shard " << shard);
      std::map<int, int64_t> count, sum;
      for (const TraceEvent& event : Of(shard_traces_[shard], kind)) {
        ++count[event.worker()];
        sum[event.worker()] += event.staleness();
      }
      for (const WorkerStats& worker : stats_[shard].workers()) {
        EXPECT_EQ(count[worker.worker()], worker.applied()) << "worker " << worker.worker();
        EXPECT_EQ(sum[worker.worker()], worker.staleness().sum()) << "worker " << worker.worker();
      }
    }
  }

  std::vector<Trace> worker_traces_;
  std::vector<Trace> shard_traces_;
  std::vector<JobStats> stats_;
};

TEST_F(TrainerTraceTest, SyncStepsShowTheStragglerTheBarrierAndEachAggregate) {
  constexpr int64_t kSteps = 6;
  RunTraced(StragglerJob("traced-sync", ConsistencyConfig::SYNC, kSteps));
  ExpectEveryStepTraced(kSteps);
  // Worker 1 straggles each step, twice its compute; worker 0 waits for it at the barrier.
  const std::vector<TraceEvent> straggles = Of(worker_traces_[1], TraceEvent::STRAGGLE);
  ASSERT_EQ(straggles.size(), static_cast<size_t>(kSteps));
  EXPECT_TRUE(Of(worker_traces_[0], TraceEvent::STRAGGLE).empty());
  int64_t straggled_us = 0;
  for (const TraceEvent& straggle : straggles) straggled_us += straggle.duration_us();
  int64_t waited_us = 0;
  for (const TraceEvent& wait : Of(worker_traces_[0], TraceEvent::WAIT)) {
    waited_us += wait.duration_us();
  }
  EXPECT_GT(waited_us, straggled_us / 4) << "worker 0 waited " << waited_us
                                         << " us while worker 1 straggled " << straggled_us;
  // The chief evaluates the final model; the other worker does not evaluate.
  EXPECT_FALSE(Of(worker_traces_[0], TraceEvent::EVALUATE).empty());
  EXPECT_TRUE(Of(worker_traces_[1], TraceEvent::EVALUATE).empty());
  for (int shard = 0; shard < 2; ++shard) {
    SCOPED_TRACE(testing::Message() << "shard " << shard);
    const std::vector<TraceEvent> aggregates = Of(shard_traces_[shard], TraceEvent::APPLY);
    ASSERT_EQ(aggregates.size(), static_cast<size_t>(kSteps));
    for (int64_t step = 0; step < kSteps; ++step) {
      EXPECT_EQ(aggregates[step].worker(), -1);
      EXPECT_EQ(aggregates[step].step(), step);
      EXPECT_EQ(aggregates[step].version(), step + 1);
      EXPECT_EQ(aggregates[step].staleness(), 0);
    }
    EXPECT_EQ(Of(shard_traces_[shard], TraceEvent::ACCUMULATE).size(),
              static_cast<size_t>(2 * kSteps));
  }
  ExpectShardStalenessMatchesStats(TraceEvent::ACCUMULATE);
}

TEST_F(TrainerTraceTest, AsyncAppliesCarryTheirStaleness) {
  constexpr int64_t kSteps = 20;
  JobSpec spec = SoftmaxJob("traced-async", ConsistencyConfig::ASYNC);
  spec.set_steps(kSteps);
  RunTraced(spec);
  ExpectEveryStepTraced(kSteps);
  for (int shard = 0; shard < 2; ++shard) {
    SCOPED_TRACE(testing::Message() << "shard " << shard);
    const std::vector<TraceEvent> applies = Of(shard_traces_[shard], TraceEvent::APPLY);
    ASSERT_EQ(applies.size(), static_cast<size_t>(2 * kSteps));
    std::map<int, int64_t> next_step;
    int64_t last_version = 0;
    for (const TraceEvent& apply : applies) {
      EXPECT_EQ(apply.step(), next_step[apply.worker()]++) << "worker " << apply.worker();
      EXPECT_GT(apply.version(), 0);
      last_version = std::max(last_version, apply.version());
    }
    EXPECT_EQ(last_version, stats_[shard].version());
    EXPECT_TRUE(Of(shard_traces_[shard], TraceEvent::ACCUMULATE).empty());
  }
  ExpectShardStalenessMatchesStats(TraceEvent::APPLY);
}

TEST_F(TrainerTraceTest, AJobWithoutATraceRecordsNothingOnTheShards) {
  StartServers(2);
  JobSpec spec = SoftmaxJob("untraced", ConsistencyConfig::ASYNC);
  spec.set_steps(5);
  for (const WorkerRun& run : RunWorkers(spec, 2)) ASSERT_TRUE(run.status.ok()) << run.status;
  absl::StatusOr<std::vector<Trace>> shards = NewClient()->GetTraces(spec.job_id());
  ASSERT_TRUE(shards.ok()) << shards.status();
  for (const Trace& shard : *shards) EXPECT_EQ(shard.events_size(), 0);
}

}  // namespace
}  // namespace ps
