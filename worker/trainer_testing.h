// The fixture of RunTrainer's tests (worker/trainer*_test.cc): ps servers started in-process on
// loopback, and workers as threads, each with its own PsClient and CPU backend (and, for
// ALLREDUCE and LOCAL_SGD, an in-process ring), training small models for a few dozen steps.
#ifndef PS_WORKER_TRAINER_TESTING_H_
#define PS_WORKER_TRAINER_TESTING_H_

#include <time.h>

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
#include "worker/trainer.h"

namespace ps {
namespace trainer_testing {

// What one worker's RunTrainer returned and reported.
struct WorkerRun {
  absl::Status status;
  std::vector<JobProgress> reports;
  absl::Duration wall_time;  // Of the RunTrainer call.
  // CPU time of the worker's thread during the RunTrainer call: its compute (SetCpuComputeThreads
  // keeps that on the thread) and client calls, not the in-process ps's threads.
  double thread_cpu_seconds = 0;

  const JobProgress& last() const { return reports.back(); }
  // The steps reported: one report a step, and the chief's final evaluation (its report
  // repeats the last step's).
  size_t StepsReported() const {
    const bool final_evaluation = reports.size() >= 2 &&
                                  reports.back().step() == reports[reports.size() - 2].step();
    return reports.size() - (final_evaluation ? 1 : 0);
  }
  // The mean training loss of `count` reported steps from the first (or the last) one.
  double MeanLoss(int count, bool from_end) const {
    double sum = 0;
    for (int i = 0; i < count; ++i) {
      sum += reports[from_end ? reports.size() - 1 - i : i].loss();
    }
    return sum / count;
  }
};

// The calling thread's CPU time so far.
inline double ThreadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

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
  // (a flag nobody sets when null); `on_report` sees every report, on the worker's thread;
  // `adjust` may change each worker's context before it starts (its incarnation, say).
  std::vector<WorkerRun> RunWorkers(
      const JobSpec& spec, int num_workers, const std::atomic<bool>* stop = nullptr,
      std::function<void(const JobProgress&)> on_report = nullptr,
      std::function<void(TrainerContext*)> adjust = nullptr) {
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
        if (adjust) adjust(&context);
        absl::Time start = absl::Now();
        const double cpu_start = ThreadCpuSeconds();
        runs[w].status = RunTrainer(context);
        runs[w].thread_cpu_seconds = ThreadCpuSeconds() - cpu_start;
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
      ASSERT_EQ(run.StepsReported(), static_cast<size_t>(steps));
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

}  // namespace trainer_testing
}  // namespace ps

#endif  // PS_WORKER_TRAINER_TESTING_H_
