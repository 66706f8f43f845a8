// RunTrainer against in-process ps servers (worker/trainer_testing.h): every ps consistency mode
// through the workers' progress reports and the shards' JobStats, the stop conditions,
// Downpour's n_push and n_fetch, overlapped communication, stragglers and the barrier's wait.
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

TEST_F(TrainerTest, SyncAggregatesEveryWorkerEachStep) {
  StartServers(2);
  std::vector<WorkerRun> runs = RunWorkers(SoftmaxJob("sync", ConsistencyConfig::SYNC), 2);
  ExpectTrainedFor(runs, 30);
  for (const WorkerRun& run : runs) {
    EXPECT_EQ(run.last().staleness(), 0.0);
    EXPECT_EQ(run.last().global_step(), 29);  // The step of the last pull.
  }
  std::vector<JobStats> stats = Stats("sync");
  ASSERT_EQ(stats.size(), 2u);
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.step(), 30);
    EXPECT_EQ(shard.version(), 30);
    EXPECT_EQ(shard.applied_gradients(), 60);
    EXPECT_EQ(shard.staleness().max(), 0);
    EXPECT_TRUE(shard.dropped().empty());
    EXPECT_TRUE(shard.rejected().empty());
  }
}

// A CNN (issue 33) trains through the shards as the dense models do: its 16 features are a
// 4x4 image, a convolution and a pooling feed the dense layers, and its kernel is a variable
// split over both shards.
TEST_F(TrainerTest, ACnnTrainsInSync) {
  StartServers(2);
  JobSpec spec = SoftmaxJob("cnn", ConsistencyConfig::SYNC);
  ModelSpec& model = *spec.mutable_model();
  model.set_kind(ModelSpec::CNN);
  model.mutable_image()->set_height(4);
  model.mutable_image()->set_width(4);
  model.mutable_image()->set_channels(1);
  LayerSpec& conv = *model.add_layers();
  conv.set_kind(LayerSpec::CONV);
  conv.set_filters(6);
  conv.set_kernel(3);
  conv.set_padding(1);
  conv.set_activation(ModelSpec::TANH);
  LayerSpec& pool = *model.add_layers();
  pool.set_kind(LayerSpec::MAX_POOL);
  pool.set_kernel(2);
  LayerSpec& dropout = *model.add_layers();
  dropout.set_kind(LayerSpec::DROPOUT);
  dropout.set_rate(0.25f);
  spec.mutable_learning_rate()->set_base(0.3f);
  spec.set_steps(80);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  ExpectTrainedFor(runs, 80);
  for (const JobStats& shard : Stats("cnn")) {
    EXPECT_EQ(shard.version(), 80);
    EXPECT_EQ(shard.applied_gradients(), 160);
    bool kernel = false;
    for (const SliceRef& slice : shard.slices()) kernel |= slice.variable() == "layer0/kernel";
    EXPECT_TRUE(kernel) << "ps:" << shard.ps_index() << " holds no part of the kernel";
  }
}

TEST_F(TrainerTest, AsyncAppliesEveryGradientAlone) {
  StartServers(2);
  std::vector<WorkerRun> runs = RunWorkers(SoftmaxJob("async", ConsistencyConfig::ASYNC), 2);
  ExpectTrainedFor(runs, 30);
  std::vector<JobStats> stats = Stats("async");
  ASSERT_EQ(stats.size(), 2u);
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.applied_gradients(), 2 * 30);
    EXPECT_EQ(shard.version(), 2 * 30);
    EXPECT_TRUE(shard.dropped().empty());
    ASSERT_EQ(shard.workers_size(), 2);
    for (const WorkerStats& worker : shard.workers()) EXPECT_EQ(worker.applied(), 30);
  }
}

TEST_F(TrainerTest, SspKeepsClocksAndStalenessBounded) {
  StartServers(2);
  JobSpec spec = SoftmaxJob("ssp", ConsistencyConfig::SSP);
  spec.mutable_consistency()->set_ssp_bound(1);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  ExpectTrainedFor(runs, 30);
  std::vector<JobStats> stats = Stats("ssp");
  ASSERT_EQ(stats.size(), 2u);
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.applied_gradients(), 60);
    // While a worker computes at clock c, the other pushes clocks c - s .. c + s at most.
    EXPECT_LE(shard.staleness().max(), 2 * 1 + 1);
    ASSERT_EQ(shard.workers_size(), 2);
    for (const WorkerStats& worker : shard.workers()) EXPECT_EQ(worker.clock(), 30);
  }
}

// EASGD: each worker trains its own copy and meets the center every 4 steps; both train, and
// the center (what the shards hold, the results' model) moved from its start.
TEST_F(TrainerTest, EasgdWorkersTrainTheirCopiesAndMoveTheCenter) {
  StartServers(2);
  JobSpec spec = SoftmaxJob("easgd", ConsistencyConfig::EASGD);
  spec.mutable_consistency()->set_easgd_alpha(0.45f);
  spec.mutable_consistency()->set_easgd_period(4);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  ExpectTrainedFor(runs, 30);
  std::vector<JobStats> stats = Stats("easgd");
  ASSERT_EQ(stats.size(), 2u);
  for (const JobStats& shard : stats) {
    // 30 steps a worker, a meeting every 4: 7 elastic differences each, applied alone.
    EXPECT_EQ(shard.applied_updates(), 2 * 7);
    EXPECT_EQ(shard.spec().learning_rate().base(), 1.0f);
    EXPECT_EQ(shard.spec().optimizer().kind(), OptimizerConfig::SGD);
  }
}

TEST_F(TrainerTest, SoftsyncAveragesEveryCGradients) {
  StartServers(2);
  JobSpec spec = SoftmaxJob("softsync", ConsistencyConfig::SOFTSYNC);
  spec.mutable_consistency()->set_softsync_n(1);  // c = N / n = 2 gradients per update.
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  ExpectTrainedFor(runs, 30);
  std::vector<JobStats> stats = Stats("softsync");
  ASSERT_EQ(stats.size(), 2u);
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.applied_gradients(), 60);
    EXPECT_EQ(shard.applied_updates(), 30);
    EXPECT_EQ(shard.version(), 30);
  }
}

// No batch is larger than the data: a batch_size beyond it trains on the whole shard each step,
// the model's buffers sized for the data. Sized for batch_size, this MLP's would pass the model's
// bound (kMaxModelFloats) and the job would be refused.
TEST_F(TrainerTest, ABatchSizeBeyondTheDataIsBoundedByTheData) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("big_batch", ConsistencyConfig::ASYNC);
  spec.mutable_model()->set_kind(ModelSpec::MLP);
  spec.mutable_model()->add_hidden_sizes(2048);
  spec.set_batch_size(kMaxBatchSize);
  spec.set_steps(3);
  std::vector<WorkerRun> runs = RunWorkers(spec, 1);
  ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
  EXPECT_EQ(runs[0].last().step(), 3);
}

TEST_F(TrainerTest, EpochsGiveEveryWorkerTheSameStepCount) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("epochs", ConsistencyConfig::ASYNC);
  spec.mutable_data()->mutable_synthetic()->set_num_examples(251);
  spec.mutable_data()->set_test_fraction(0.2f);
  spec.set_batch_size(10);
  spec.set_steps(0);
  spec.set_epochs(2);
  // 201 training examples: shards of 101 and 100, 11 and 10 batches; both run 2 * 11 steps.
  const int64_t train = 251 - 50, workers = 2, batch = 10, epochs = 2;
  const int64_t largest_shard = (train + workers - 1) / workers;
  const int64_t expected_steps = epochs * ((largest_shard + batch - 1) / batch);
  ASSERT_EQ(expected_steps, 22);
  std::vector<WorkerRun> runs = RunWorkers(spec, workers);
  for (const WorkerRun& run : runs) {
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_EQ(run.last().step(), expected_steps);
    EXPECT_EQ(run.last().epoch(), 2);
  }
  std::vector<JobStats> stats = Stats("epochs");
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].applied_gradients(), workers * expected_steps);
}

TEST_F(TrainerTest, TimeLimitEndsTheJob) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("time", ConsistencyConfig::ASYNC);
  spec.set_steps(0);
  spec.set_time_limit_s(0.5f);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  int64_t total_steps = 0;
  for (const WorkerRun& run : runs) {
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_GE(run.wall_time, absl::Milliseconds(500));
    EXPECT_LT(run.wall_time, absl::Seconds(5));
    EXPECT_GT(run.last().step(), 0);
    total_steps += run.last().step();
  }
  std::vector<JobStats> stats = Stats("time");
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].applied_gradients(), total_steps);
}

// A worker started again late in the run (StartJobRequest.elapsed_s) stops at the run's time
// limit, not its own start's: here worker 1 joins with most of the limit gone.
TEST_F(TrainerTest, TimeLimitCountsFromTheRunsStart) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("late", ConsistencyConfig::ASYNC);
  spec.set_steps(0);
  spec.set_time_limit_s(2.0f);
  std::vector<WorkerRun> runs =
      RunWorkers(spec, 2, nullptr, nullptr, [](TrainerContext* context) {
        if (context->worker == 1) context->elapsed_before = absl::Milliseconds(1800);
      });
  ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
  ASSERT_TRUE(runs[1].status.ok()) << runs[1].status;
  EXPECT_GE(runs[0].wall_time, absl::Seconds(2));
  EXPECT_LT(runs[1].wall_time, absl::Milliseconds(1500));
}

TEST_F(TrainerTest, ARestartedWorkerCountsTheExamplesOfItsEarlierSteps) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("again", ConsistencyConfig::ASYNC);  // 30 steps of 16.
  std::vector<WorkerRun> runs = RunWorkers(spec, 1, nullptr, nullptr, [](TrainerContext* context) {
    context->first_step = 20;  // Started again where its first process left off.
  });
  ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
  const JobProgress& last = runs[0].reports.back();
  EXPECT_EQ(last.step(), 30);
  // 20 steps of 16 before, and what this process trained, which its rate counts alone.
  const double here = last.examples_per_second() * last.elapsed_seconds();
  EXPECT_GT(here, 0);
  EXPECT_NEAR(last.examples(), 20 * 16 + here, 1e-6 * last.examples());
}

TEST_F(TrainerTest, StopFlagCancelsPromptly) {
  StartServers(2);
  JobSpec spec = SoftmaxJob("stop", ConsistencyConfig::SYNC);
  spec.set_steps(1000000);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> steps_reported{0};
  std::atomic<bool> returned{false};
  absl::Time stopped_at = absl::InfiniteFuture();
  std::thread stopper([&] {
    while (steps_reported.load() < 10 && !returned) absl::SleepFor(absl::Milliseconds(1));
    stopped_at = absl::Now();
    stop = true;
  });
  std::vector<WorkerRun> runs =
      RunWorkers(spec, 2, &stop, [&](const JobProgress&) { ++steps_reported; });
  absl::Time returned_at = absl::Now();
  returned = true;
  stopper.join();
  for (const WorkerRun& run : runs) {
    EXPECT_EQ(run.status.code(), absl::StatusCode::kCancelled) << run.status;
    EXPECT_LT(run.last().step(), 1000000);
  }
  EXPECT_LT(returned_at - stopped_at, absl::Seconds(5));
}

TEST_F(TrainerTest, DownpourPushesEveryNPushSteps) {
  StartServers(2);
  JobSpec spec = SoftmaxJob("n-push", ConsistencyConfig::ASYNC);
  spec.set_steps(24);
  spec.mutable_downpour()->set_n_push(4);
  spec.mutable_downpour()->set_local_learning_rate(0.2f);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  ExpectTrainedFor(runs, 24);
  std::vector<JobStats> stats = Stats("n-push");
  ASSERT_EQ(stats.size(), 2u);
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.applied_gradients(), 2 * 24 / 4);
    for (const WorkerStats& worker : shard.workers()) EXPECT_EQ(worker.applied(), 24 / 4);
  }
}

// One worker pushing every step but pulling every other one: each push after a step without a
// pull was computed from weights one update old, so half the gradients have staleness 1.
TEST_F(TrainerTest, DownpourPullsEveryNFetchSteps) {
  StartServers(2);
  JobSpec spec = SoftmaxJob("n-fetch", ConsistencyConfig::ASYNC);
  spec.set_steps(24);
  spec.mutable_downpour()->set_n_fetch(2);
  std::vector<WorkerRun> runs = RunWorkers(spec, 1);
  ExpectTrainedFor(runs, 24);
  EXPECT_EQ(runs[0].last().staleness(), 0.5);
  EXPECT_EQ(runs[0].last().global_step(), 22);  // The version read by the last pull (step 22).
  std::vector<JobStats> stats = Stats("n-fetch");
  ASSERT_EQ(stats.size(), 2u);
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.applied_gradients(), 24);
    ASSERT_GE(shard.staleness().counts_size(), 2);
    EXPECT_EQ(shard.staleness().counts(0), 12);
    EXPECT_EQ(shard.staleness().counts(1), 12);
    EXPECT_EQ(shard.staleness().max(), 1);
  }
}

// With overlap_communication a step's push and pull run while the next step computes, on the
// weights the exchange before brought: one worker's gradients after the first are computed one
// update behind, so each has staleness exactly 1 (not 0, as in DownpourPullsEveryNFetchSteps'
// pulling steps). The push says so: it carries the versions the gradient was computed from.
TEST_F(TrainerTest, OverlappedCommunicationMakesEachGradientOneUpdateStaler) {
  StartServers(2);
  JobSpec spec = SoftmaxJob("overlap", ConsistencyConfig::ASYNC);
  spec.set_steps(24);
  spec.mutable_downpour()->set_overlap_communication(true);
  std::vector<WorkerRun> runs = RunWorkers(spec, 1);
  ExpectTrainedFor(runs, 24);
  EXPECT_DOUBLE_EQ(runs[0].last().staleness(), 23.0 / 24);
  // The worker ends holding what the exchange of step 22 pulled (after 23 updates): the last
  // exchange only pushes.
  EXPECT_EQ(runs[0].last().global_step(), 23);
  std::vector<JobStats> stats = Stats("overlap");
  ASSERT_EQ(stats.size(), 2u);
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.applied_gradients(), 24);  // The last push is in before the job ends.
    ASSERT_GE(shard.staleness().counts_size(), 2);
    EXPECT_EQ(shard.staleness().counts(0), 1);
    EXPECT_EQ(shard.staleness().counts(1), 23);
    EXPECT_EQ(shard.staleness().max(), 1);
  }
}

// Overlap keeps Downpour's schedule: pushes every n_push steps, with the gradients of the steps
// in between, from two workers.
TEST_F(TrainerTest, OverlappedCommunicationKeepsNPushAndNFetch) {
  StartServers(2);
  JobSpec spec = SoftmaxJob("overlap-n", ConsistencyConfig::ASYNC);
  spec.set_steps(24);
  spec.mutable_downpour()->set_n_push(4);
  spec.mutable_downpour()->set_n_fetch(2);
  spec.mutable_downpour()->set_overlap_communication(true);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  ExpectTrainedFor(runs, 24);
  std::vector<JobStats> stats = Stats("overlap-n");
  ASSERT_EQ(stats.size(), 2u);
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.applied_gradients(), 2 * 24 / 4);
    for (const WorkerStats& worker : shard.workers()) EXPECT_EQ(worker.applied(), 24 / 4);
  }
}

// A ps that goes away while an exchange is in flight fails the worker with the shard's error;
// the worker neither hangs nor goes on computing on its own.
TEST_F(TrainerTest, OverlappedCommunicationReportsADeadPs) {
  StartServers(2);
  JobSpec spec = SoftmaxJob("overlap-dead", ConsistencyConfig::ASYNC);
  spec.set_steps(1000000);
  spec.mutable_downpour()->set_overlap_communication(true);
  std::atomic<int> reports{0};
  std::thread killer([&] {
    while (reports.load() < 5) absl::SleepFor(absl::Milliseconds(1));
    servers_->server(1).Shutdown(absl::ZeroDuration());
  });
  std::vector<WorkerRun> runs =
      RunWorkers(spec, 1, nullptr, [&reports](const JobProgress&) { ++reports; });
  killer.join();
  ASSERT_FALSE(runs[0].status.ok());
  EXPECT_THAT(runs[0].status.ToString(), HasSubstr("ps:1"));
  EXPECT_LT(runs[0].last().step(), 1000000);
}

// A FIXED factor of 3 sleeps twice each step's compute time after it.
TEST_F(TrainerTest, FixedStragglerIsSlowerByItsFactor) {
  StartServers(1);
  std::vector<WorkerRun> runs =
      RunWorkers(StragglerJob("straggler", ConsistencyConfig::ASYNC, 20), 2);
  for (const WorkerRun& run : runs) ASSERT_TRUE(run.status.ok()) << run.status;
  const JobProgress& fast = runs[0].last();
  const JobProgress& slow = runs[1].last();
  EXPECT_GT(slow.compute_seconds(), 0);
  // The straggler's time outside compute and communication is its sleeps: 2x its compute.
  EXPECT_GE(slow.elapsed_seconds() - slow.communication_seconds(),
            0.95 * 3 * slow.compute_seconds())
      << slow.DebugString();
  // (Whether it ends after the fast worker depends on how the shared machine schedules the two
  // workers' compute, which a test cannot assert: the sleeps above are the factor's effect.)
  // ASYNC pulls never wait at the shards.
  EXPECT_EQ(fast.wait_seconds(), 0);
  EXPECT_EQ(slow.wait_seconds(), 0);
}

// A busy straggler spends its delay computing: with FIXED factor 4 it computes each step's
// gradient 4 times (3 whole copies in a delay of 3x the compute, or 2 where the division rounds
// down), so its thread spends several times the CPU of the same delay asleep. The worker
// thread's CPU, not the process's: the in-process ps's threads and gRPC's would drown a few
// dozen milliseconds of compute in noise, and wall-clock compute times swell on a loaded machine
// where CPU times do not.
TEST_F(TrainerTest, BusyStragglerComputesThroughItsDelay) {
  StartServers(1);
  JobSpec spec = StragglerJob("asleep", ConsistencyConfig::ASYNC, 40);
  spec.mutable_stragglers()->clear_workers();  // The one worker.
  spec.mutable_stragglers()->set_factor(4);
  std::vector<WorkerRun> runs = RunWorkers(spec, 1);
  ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
  const WorkerRun asleep = runs[0];

  spec.set_job_id("busy");
  spec.mutable_stragglers()->set_busy(true);
  runs = RunWorkers(spec, 1);
  ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
  const WorkerRun& busy = runs[0];
  ASSERT_GT(busy.last().compute_seconds(), 0);
  // Slowed as much as asleep: the copies take the time the sleeps took.
  EXPECT_GE(busy.last().elapsed_seconds() - busy.last().communication_seconds(),
            0.6 * 4 * busy.last().compute_seconds())
      << busy.last().DebugString();
  // Asleep, the thread's CPU is one compute a step and its client calls; busy, 3 or 4 computes
  // and the same calls (about 2.3x here; 1.0x were the delay slept).
  EXPECT_GE(busy.thread_cpu_seconds, 1.5 * asleep.thread_cpu_seconds)
      << "busy " << busy.thread_cpu_seconds << " s of the worker thread's CPU, asleep "
      << asleep.thread_cpu_seconds << " s; " << busy.last().DebugString()
      << asleep.last().DebugString();
}

// In SYNC the fast worker's pulls wait at the barrier for the straggler's sleeps (2x its
// compute each step), and its step time says so: as wait, not as pull.
TEST_F(TrainerTest, SyncBarrierWaitIsReportedAsWait) {
  StartServers(1);
  std::vector<WorkerRun> runs =
      RunWorkers(StragglerJob("barrier_wait", ConsistencyConfig::SYNC, 10), 2);
  for (const WorkerRun& run : runs) ASSERT_TRUE(run.status.ok()) << run.status;
  const JobProgress& fast = runs[0].last();
  const JobProgress& slow = runs[1].last();
  EXPECT_GE(fast.wait_seconds(), slow.compute_seconds()) << fast.DebugString()
                                                         << slow.DebugString();
  EXPECT_GT(fast.wait_seconds(), fast.pull_seconds() + fast.push_seconds()) << fast.DebugString();
  EXPECT_LT(slow.wait_seconds(), fast.wait_seconds()) << slow.DebugString();
  for (const JobProgress& worker : {fast, slow}) {
    EXPECT_NEAR(worker.communication_seconds(),
                worker.pull_seconds() + worker.push_seconds() + worker.wait_seconds(), 1e-6);
    EXPECT_EQ(worker.device_memory_bytes(), 0);  // The CPU.
  }
}

}  // namespace
}  // namespace ps
