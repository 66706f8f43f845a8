// RunTrainer against ps servers started in-process on loopback: one thread per worker, each
// with its own PsClient and CPU backend, training small models for a few dozen steps. Checks
// every consistency mode through the workers' progress reports and the shards' JobStats, the
// stop conditions, Downpour's n_push and n_fetch, stragglers, bad data and the chief's
// evaluations.
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
#include "common/job_schema.h"
#include "common/ps_client.h"
#include "common/worker_session.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"
#include "proto/worker_service.pb.h"
#include "tests/in_process_ps_cluster.h"
#include "worker/allreduce/local_ring.h"
#include "worker/compute/compute_backend.h"
#include "worker/compute/cpu_threads.h"
#include "worker/host_variables.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// What one worker's RunTrainer returned and reported.
struct WorkerRun {
  absl::Status status;
  std::vector<JobProgress> reports;
  absl::Duration wall_time;  // Of the RunTrainer call.

  const JobProgress& last() const { return reports.back(); }
  // The mean training loss of `count` reported steps from the first (or the last) one.
  double MeanLoss(int count, bool from_end) const {
    double sum = 0;
    for (int i = 0; i < count; ++i) {
      sum += reports[from_end ? reports.size() - 1 - i : i].loss();
    }
    return sum / count;
  }
};

class TrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { SetCpuComputeThreads(1); }  // Workers share the cores.

  void StartServers(int num_ps) {
    InProcessPsClusterOptions options;
    options.num_ps = num_ps;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    servers_ = *std::move(cluster);
    addresses_ = servers_->addresses();
  }

  std::unique_ptr<PsClient> NewClient() {
    PsClientOptions options;
    options.ps_addresses = addresses_;
    options.wait_timeout = absl::Seconds(20);  // A hang fails the test well before its timeout.
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // Softmax regression on a 4-class Gaussian mixture of overlapping clusters: 400 examples,
  // 40 of them held out.
  static JobSpec SoftmaxJob(const std::string& id, ConsistencyConfig::Mode mode) {
    JobSpec spec;
    spec.set_job_id(id);
    spec.mutable_model()->set_kind(ModelSpec::SOFTMAX_REGRESSION);
    SyntheticData* data = spec.mutable_data()->mutable_synthetic();
    data->set_kind(SyntheticData::GAUSSIAN_MIXTURE);
    data->set_num_examples(400);
    data->set_feature_dim(16);
    data->set_num_classes(4);
    data->set_separation(1.2f);
    spec.mutable_learning_rate()->set_base(0.2f);
    spec.mutable_consistency()->set_mode(mode);
    spec.set_batch_size(16);
    spec.set_steps(30);
    spec.set_seed(7);
    spec.set_min_slice_bytes(64);  // Slices of the small model on every ps.
    return spec;
  }

  // An MLP whose steps take milliseconds to compute, `steps` of them, with worker 1 a FIXED
  // straggler of factor 3 (it sleeps twice each step's compute time after it).
  static JobSpec StragglerJob(const std::string& id, ConsistencyConfig::Mode mode,
                              int64_t steps) {
    JobSpec spec = SoftmaxJob(id, mode);
    spec.mutable_model()->set_kind(ModelSpec::MLP);
    spec.mutable_model()->add_hidden_sizes(512);
    spec.mutable_data()->mutable_synthetic()->set_num_examples(2400);
    spec.mutable_data()->mutable_synthetic()->set_feature_dim(128);
    spec.mutable_learning_rate()->set_base(0.05f);
    spec.set_batch_size(1024);
    spec.set_steps(steps);
    spec.mutable_stragglers()->set_distribution(StragglerSpec::FIXED);
    spec.mutable_stragglers()->add_workers(1);
    spec.mutable_stragglers()->set_factor(3);
    return spec;
  }

  // Runs `spec` on `num_workers` threads until every one returns. `stop` is shared by all
  // (a flag nobody sets when null); `on_report` sees every report, on the worker's thread.
  std::vector<WorkerRun> RunWorkers(
      const JobSpec& spec, int num_workers, const std::atomic<bool>* stop = nullptr,
      std::function<void(const JobProgress&)> on_report = nullptr) {
    absl::Status valid = ValidateJobSpec(spec, num_workers);
    EXPECT_TRUE(valid.ok()) << valid;
    static const std::atomic<bool> kNeverStop{false};
    std::vector<WorkerRun> runs(num_workers);
    // ALLREDUCE and LOCAL_SGD's ring, in process.
    std::vector<std::unique_ptr<RingLink>> ring = MakeLocalRing(num_workers, absl::Seconds(30));
    std::vector<std::thread> threads;
    for (int w = 0; w < num_workers; ++w) {
      threads.emplace_back([&, w] {
        std::unique_ptr<PsClient> client = NewClient();
        std::unique_ptr<ComputeBackend> backend = CreateCpuBackend();
        if (client == nullptr) return;
        TrainerContext context;
        context.spec = spec;
        context.worker = w;
        context.num_workers = num_workers;
        context.ps = client.get();
        context.backend = backend.get();
        context.ring = ring[w].get();
        context.stop = stop != nullptr ? stop : &kNeverStop;
        context.report = [&runs, w, &on_report](const JobProgress& progress) {
          runs[w].reports.push_back(progress);
          if (on_report) on_report(progress);
        };
        absl::Time start = absl::Now();
        runs[w].status = RunTrainer(context);
        runs[w].wall_time = absl::Now() - start;
      });
    }
    for (std::thread& thread : threads) thread.join();
    return runs;
  }

  // Every value the shards hold of `job_id` now, variable after variable.
  std::vector<float> ShardValues(const std::string& job_id) {
    std::vector<JobStats> stats = Stats(job_id);
    if (stats.empty()) return {};
    std::unique_ptr<PsClient> client = NewClient();
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(client.get(), stats[0].spec(), 0, OBSERVER_INCARNATION);
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return {};
    std::vector<VariableDef> variables(stats[0].spec().variables().begin(),
                                       stats[0].spec().variables().end());
    HostVariables values(variables);
    EXPECT_TRUE((*session)->Pull({}, values.mutable_view()).ok());
    std::vector<float> flat;
    for (const std::vector<float>& array : values.arrays()) {
      flat.insert(flat.end(), array.begin(), array.end());
    }
    return flat;
  }

  std::vector<JobStats> Stats(const std::string& job_id) {
    std::unique_ptr<PsClient> client = NewClient();
    if (client == nullptr) return {};
    absl::StatusOr<std::vector<JobStats>> stats = client->GetJobStats(job_id);
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *std::move(stats) : std::vector<JobStats>{};
  }

  // Every run OK, with `steps` steps, and a training loss that went down: each worker's last
  // losses under half the first losses of the worker that started first. (Not each worker's
  // own first losses: on a loaded machine a worker may start once the others have trained the
  // model, in the modes that do not wait for it.)
  static void ExpectTrainedFor(const std::vector<WorkerRun>& runs, int64_t steps) {
    double first = 0;
    for (const WorkerRun& run : runs) {
      ASSERT_TRUE(run.status.ok()) << run.status;
      ASSERT_EQ(run.reports.size(), static_cast<size_t>(steps));
      EXPECT_EQ(run.last().step(), steps);
      first = std::max(first, run.MeanLoss(5, /*from_end=*/false));
    }
    for (const WorkerRun& run : runs) {
      EXPECT_LT(run.MeanLoss(5, /*from_end=*/true), 0.5 * first) << run.last().DebugString();
    }
  }

  std::vector<std::string> addresses_;
  std::unique_ptr<InProcessPsCluster> servers_;
};

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

// A PS worker moves about twice the model each step: its gradient out, the weights back in (plus
// each message's header). Softmax regression on 16 features and 4 classes: 68 floats, 272 bytes.
TEST_F(TrainerTest, AWorkerCountsTheBytesOfItsStepsAsTheModelSizeSays) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("bytes", ConsistencyConfig::SYNC);
  spec.set_steps(30);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  ExpectTrainedFor(runs, 30);
  constexpr int64_t kModelBytes = 68 * 4;
  constexpr int64_t kHeaderBytes = 400;  // At most, per message.
  for (const WorkerRun& run : runs) {
    const JobProgress& last = run.last();
    // 30 gradients out; 31 weight pulls in (the first before step 0).
    EXPECT_GE(last.bytes_sent(), 30 * kModelBytes) << last.DebugString();
    EXPECT_LE(last.bytes_sent(), 30 * (kModelBytes + kHeaderBytes)) << last.DebugString();
    EXPECT_GE(last.bytes_received(), 30 * kModelBytes) << last.DebugString();
    EXPECT_LE(last.bytes_received(), 31 * (kModelBytes + kHeaderBytes)) << last.DebugString();
  }
}

// The largest difference between two models of the same shape.
float MaxDifference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float largest = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    largest = std::max(largest, std::abs(a[i] - b[i]));
  }
  return largest;
}

// ALLREDUCE averages the gradients among the workers and applies the optimizer on each: with
// the same seed it ends where SYNC (every worker's gradient a step) ends, to float rounding;
// the chief's published model is the shards'. With momentum, so that the workers' optimizer
// state matters too.
TEST_F(TrainerTest, AllReduceEqualsSync) {
  StartServers(2);
  JobSpec sync = SoftmaxJob("equal_sync", ConsistencyConfig::SYNC);
  sync.mutable_optimizer()->set_kind(OptimizerConfig::MOMENTUM);
  sync.mutable_learning_rate()->set_base(0.05f);
  JobSpec allreduce = sync;
  allreduce.set_job_id("equal_allreduce");
  allreduce.mutable_consistency()->set_mode(ConsistencyConfig::ALLREDUCE);
  ExpectTrainedFor(RunWorkers(sync, 3), 30);
  std::vector<WorkerRun> runs = RunWorkers(allreduce, 3);
  ExpectTrainedFor(runs, 30);
  const std::vector<float> expected = ShardValues("equal_sync");
  const std::vector<float> actual = ShardValues("equal_allreduce");
  ASSERT_FALSE(expected.empty());
  EXPECT_LT(MaxDifference(expected, actual), 1e-6f);
  // Each worker moved 2 (N - 1) / N of the gradients a step through the ring, plus its one pull.
  const int64_t model_bytes = 68 * 4;
  for (const WorkerRun& run : runs) {
    EXPECT_GE(run.last().bytes_sent(), 30 * 2 * 2 * model_bytes / 3 - 30 * 8);
    EXPECT_LE(run.last().bytes_sent(), 30 * 2 * 2 * model_bytes / 3 + 30 * 8 + 4 * model_bytes);
  }
}

// Local SGD with one local step and plain SGD averages w - lr g_i, which is w - lr mean(g_i):
// SYNC's update.
TEST_F(TrainerTest, LocalSgdWithOneStepEqualsSync) {
  StartServers(1);
  JobSpec sync = SoftmaxJob("local1_sync", ConsistencyConfig::SYNC);
  JobSpec local = sync;
  local.set_job_id("local1");
  local.mutable_consistency()->set_mode(ConsistencyConfig::LOCAL_SGD);
  local.mutable_consistency()->set_local_steps(1);
  ExpectTrainedFor(RunWorkers(sync, 2), 30);
  ExpectTrainedFor(RunWorkers(local, 2), 30);
  EXPECT_LT(MaxDifference(ShardValues("local1_sync"), ShardValues("local1")), 1e-6f);
}

// With more local steps the copies drift apart between averagings and are averaged after the
// last step, so the published model is every worker's, and it has trained.
TEST_F(TrainerTest, LocalSgdAveragesEveryKStepsAndAtTheEnd) {
  StartServers(1);
  JobSpec local = SoftmaxJob("local4", ConsistencyConfig::LOCAL_SGD);
  local.mutable_consistency()->set_local_steps(4);
  local.set_steps(30);  // Averaged at 4, 8, ..., 28, and after 30.
  std::vector<WorkerRun> runs = RunWorkers(local, 2);
  ExpectTrainedFor(runs, 30);
  // 7 averagings of the model through the ring by the last step's report, each
  // 2 (N - 1) / N = 1 model for N = 2 (the 8th, after it, is in the job's final progress).
  for (const WorkerRun& run : runs) {
    EXPECT_GE(run.last().bytes_sent(), 7 * 68 * 4) << run.last().DebugString();
    EXPECT_LE(run.last().bytes_sent(), 7 * 68 * 4 + 400) << run.last().DebugString();
  }
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
  // The straggler's time outside compute and communication is its sleeps: 2x its compute.
  EXPECT_GE(slow.elapsed_seconds() - slow.communication_seconds(),
            0.95 * 3 * slow.compute_seconds())
      << slow.DebugString();
  EXPECT_GT(slow.elapsed_seconds(), fast.elapsed_seconds() + slow.compute_seconds())
      << fast.DebugString() << slow.DebugString();
  EXPECT_LT(slow.examples_per_second(), fast.examples_per_second());
  // ASYNC pulls never wait at the shards.
  EXPECT_EQ(fast.wait_seconds(), 0);
  EXPECT_EQ(slow.wait_seconds(), 0);
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
