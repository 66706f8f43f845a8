// The ps service end to end over gRPC: ps servers started in-process on loopback, driven by
// PsClient and WorkerSession as workers drive them. Covers the consistency models of
// docs/ARCHITECTURE.md section 5 (sync with and without backup workers, async staleness and its
// learning-rate rule, SSP, softsync), concurrency, bad input, shutdown, retries and chunking.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/job/partitioner.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "proto/ps_service.pb.h"
#include "server/testing/in_process_ps_cluster.h"
#include "server/ps_server.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

#define PS_CONCAT_INNER(a, b) a##b
#define PS_CONCAT(a, b) PS_CONCAT_INNER(a, b)

#define ASSERT_OK(expression)                             \
  do {                                                    \
    const absl::Status ps_status_ = StatusOf(expression); \
    ASSERT_TRUE(ps_status_.ok()) << ps_status_;           \
  } while (false)

#define EXPECT_OK(expression)                             \
  do {                                                    \
    const absl::Status ps_status_ = StatusOf(expression); \
    EXPECT_TRUE(ps_status_.ok()) << ps_status_;           \
  } while (false)

#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  ASSERT_OK_AND_ASSIGN_IMPL(PS_CONCAT(ps_status_or_, __LINE__), lhs, rexpr)
#define ASSERT_OK_AND_ASSIGN_IMPL(status_or, lhs, rexpr) \
  auto status_or = (rexpr);                              \
  ASSERT_TRUE(status_or.ok()) << status_or.status();     \
  lhs = std::move(status_or).value()

// Number of elements of a variable.
int64_t NumElements(const VariableDef& variable) {
  int64_t n = 1;
  for (int64_t dim : variable.shape()) n *= dim;
  return n;
}

// Host copies of every variable of a job, by name, row-major.
class Tensors {
 public:
  explicit Tensors(const ParameterSpec& spec, float fill = 0.0f) {
    for (const VariableDef& variable : spec.variables()) {
      values_[variable.name()].assign(NumElements(variable), fill);
    }
  }

  std::vector<float>& operator[](const std::string& name) { return values_.at(name); }
  const std::vector<float>& operator[](const std::string& name) const { return values_.at(name); }

  MutableVariables Mutable() {
    MutableVariables out;
    for (auto& [name, values] : values_) out[name] = absl::MakeSpan(values);
    return out;
  }
  ConstVariables Const() const {
    ConstVariables out;
    for (const auto& [name, values] : values_) out[name] = absl::MakeConstSpan(values);
    return out;
  }

  bool operator==(const Tensors& other) const { return values_ == other.values_; }

 private:
  std::map<std::string, std::vector<float>> values_;
};

// `count` ps servers on free ports of 127.0.0.1, task i being ps:i of `count`, and clients
// for them.
class LocalCluster {
 public:
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(
      int count, int max_message_bytes = PsServerOptions().max_message_bytes) {
    InProcessPsClusterOptions options;
    options.num_ps = count;
    options.server.max_message_bytes = max_message_bytes;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> servers =
        InProcessPsCluster::Start(options);
    if (!servers.ok()) return servers.status();
    return std::unique_ptr<LocalCluster>(new LocalCluster(*std::move(servers)));
  }

  const std::vector<std::string>& addresses() const { return servers_->addresses(); }
  PsServer& server(int ps) { return servers_->server(ps); }

  // Short timeouts and backoff, so that a failure shows in seconds.
  PsClientOptions ClientOptions() const {
    PsClientOptions options;
    options.ps_addresses = addresses();
    options.call_timeout = absl::Seconds(10);
    options.wait_timeout = absl::Seconds(10);
    options.max_attempts = 3;
    options.initial_backoff = absl::Milliseconds(10);
    options.max_backoff = absl::Milliseconds(100);
    return options;
  }
  absl::StatusOr<std::unique_ptr<PsClient>> NewClient() const {
    return PsClient::Create(ClientOptions());
  }

 private:
  explicit LocalCluster(std::unique_ptr<InProcessPsCluster> servers)
      : servers_(std::move(servers)) {}

  std::unique_ptr<InProcessPsCluster> servers_;
};

// A job with SGD at learning rate 1 and small slices (so variables of a few hundred bytes
// split across shards); the variables are added by the caller.
ParameterSpec MakeSpec(const std::string& job_id, ConsistencyConfig::Mode mode, int num_workers) {
  ParameterSpec spec;
  spec.set_job_id(job_id);
  spec.set_num_workers(num_workers);
  spec.set_seed(1234);
  spec.set_min_slice_bytes(64);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  spec.mutable_learning_rate()->set_kind(LearningRateSchedule::CONSTANT);
  spec.mutable_learning_rate()->set_base(1.0f);
  spec.mutable_consistency()->set_mode(mode);
  return spec;
}

void AddVariable(ParameterSpec* spec, const std::string& name, std::vector<int64_t> shape,
                 InitializerConfig::Kind kind, float scale) {
  VariableDef* variable = spec->add_variables();
  variable->set_name(name);
  for (int64_t dim : shape) variable->add_shape(dim);
  variable->mutable_initializer()->set_kind(kind);
  variable->mutable_initializer()->set_scale(scale);
}

std::vector<std::unique_ptr<WorkerSession>> MakeSessions(PsClient* client,
                                                         const ParameterSpec& spec) {
  std::vector<std::unique_ptr<WorkerSession>> sessions;
  for (int w = 0; w < spec.num_workers(); ++w) {
    absl::StatusOr<std::unique_ptr<WorkerSession>> session = WorkerSession::Create(client, spec, w);
    EXPECT_TRUE(session.ok()) << session.status();
    sessions.push_back(session.ok() ? *std::move(session) : nullptr);
  }
  return sessions;
}

// Whether `variable` has slices on every one of `num_ps` tasks.
bool SpansAllShards(const Placement& placement, const std::string& variable, int num_ps) {
  std::vector<bool> on(num_ps, false);
  for (const SlicePlacement& slice : placement.slices) {
    if (slice.variable == variable) on[slice.ps_task] = true;
  }
  return std::all_of(on.begin(), on.end(), [](bool b) { return b; });
}

WorkerSession::PullOptions PullAt(int64_t step, int64_t clock) {
  WorkerSession::PullOptions options;
  options.step = step;
  options.clock = clock;
  return options;
}

WorkerSession::PushOptions PushAt(int64_t step, int64_t clock) {
  WorkerSession::PushOptions options;
  options.step = step;
  options.clock = clock;
  return options;
}

int64_t CountAt(const StalenessHistogramData& histogram, int staleness) {
  return staleness < histogram.counts_size() ? histogram.counts(staleness) : 0;
}

int64_t MapValue(const google::protobuf::Map<std::string, int64_t>& map, const std::string& key) {
  auto it = map.find(key);
  return it == map.end() ? 0 : it->second;
}

// ---------------------------------------------------------------------------------------------
// SYNC

// Linear regression y = Xw + b on one worker's fixed batch; gradient of
// 0.5 * ||Xw + b - y||^2 / batch, in double.
struct Batch {
  std::vector<std::vector<double>> x;  // [batch][features]
  std::vector<double> y;
};

void LinearGradient(const Batch& batch, const std::vector<double>& w, double b,
                    std::vector<double>* grad_w, double* grad_b) {
  const size_t n = batch.y.size();
  grad_w->assign(w.size(), 0.0);
  *grad_b = 0.0;
  for (size_t i = 0; i < n; ++i) {
    double residual = b - batch.y[i];
    for (size_t j = 0; j < w.size(); ++j) residual += batch.x[i][j] * w[j];
    for (size_t j = 0; j < w.size(); ++j) (*grad_w)[j] += batch.x[i][j] * residual;
    *grad_b += residual;
  }
  for (double& g : *grad_w) g /= static_cast<double>(n);
  *grad_b /= static_cast<double>(n);
}

TEST(SyncTest, FourWorkersEqualSingleProcessSgdOnTheUnionOfTheirBatches) {
  constexpr int kWorkers = 4;
  constexpr int kFeatures = 16;
  constexpr int kBatch = 8;
  constexpr int kSteps = 20;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, cluster->NewClient());

  ParameterSpec spec = MakeSpec("sync_exact", ConsistencyConfig::SYNC, kWorkers);
  spec.mutable_consistency()->set_replicas_to_aggregate(0);
  spec.mutable_learning_rate()->set_base(0.1f);
  spec.set_min_slice_bytes(32);
  AddVariable(&spec, "w", {kFeatures, 1}, InitializerConfig::UNIFORM, 0.5f);
  AddVariable(&spec, "b", {1}, InitializerConfig::CONSTANT, 0.25f);
  ASSERT_OK_AND_ASSIGN(Placement placement, client->CreateJob(spec));
  ASSERT_TRUE(SpansAllShards(placement, "w", 2));

  std::vector<Batch> batches(kWorkers);
  std::mt19937_64 random(42);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> true_w(kFeatures);
  for (double& v : true_w) v = uniform(random);
  for (Batch& batch : batches) {
    for (int i = 0; i < kBatch; ++i) {
      std::vector<double> row(kFeatures);
      double y = 0.3 + 0.1 * uniform(random);
      for (int j = 0; j < kFeatures; ++j) {
        row[j] = uniform(random);
        y += row[j] * true_w[j];
      }
      batch.x.push_back(std::move(row));
      batch.y.push_back(y);
    }
  }

  std::vector<std::unique_ptr<WorkerSession>> sessions = MakeSessions(client.get(), spec);
  Tensors initial(spec);
  ASSERT_OK(sessions[0]->Pull({}, initial.Mutable()));

  std::vector<std::thread> threads;
  for (int worker = 0; worker < kWorkers; ++worker) {
    threads.emplace_back([&, worker] {
      WorkerSession& session = *sessions[worker];
      Tensors weights(spec);
      Tensors gradient(spec);
      for (int step = 0; step < kSteps; ++step) {
        absl::StatusOr<WorkerSession::PullResult> pulled =
            session.Pull(PullAt(step, 0), weights.Mutable());
        ASSERT_TRUE(pulled.ok()) << pulled.status();
        // The barrier: every shard has applied exactly the steps before this one.
        EXPECT_EQ(pulled->step, step);
        EXPECT_THAT(pulled->versions, ::testing::Each(step));
        std::vector<double> w(weights["w"].begin(), weights["w"].end());
        std::vector<double> grad_w;
        double grad_b;
        LinearGradient(batches[worker], w, weights["b"][0], &grad_w, &grad_b);
        for (int j = 0; j < kFeatures; ++j) gradient["w"][j] = static_cast<float>(grad_w[j]);
        gradient["b"][0] = static_cast<float>(grad_b);
        absl::StatusOr<std::vector<PushResponse>> pushed =
            session.Push(PushAt(step, 0), gradient.Const());
        ASSERT_TRUE(pushed.ok()) << pushed.status();
        for (const PushResponse& response : *pushed) {
          EXPECT_NE(response.outcome(), PushResponse::DROPPED) << response.ShortDebugString();
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  Tensors final_weights(spec);
  ASSERT_OK_AND_ASSIGN(WorkerSession::PullResult final_pull,
                       sessions[0]->Pull(PullAt(kSteps, 0), final_weights.Mutable()));
  EXPECT_EQ(final_pull.step, kSteps);

  // Single-process SGD on the union of the batches, in double.
  const double learning_rate = static_cast<double>(spec.learning_rate().base());
  std::vector<double> w(initial["w"].begin(), initial["w"].end());
  double b = initial["b"][0];
  for (int step = 0; step < kSteps; ++step) {
    std::vector<double> mean_w(kFeatures, 0.0);
    double mean_b = 0.0;
    for (const Batch& batch : batches) {
      std::vector<double> grad_w;
      double grad_b;
      LinearGradient(batch, w, b, &grad_w, &grad_b);
      for (int j = 0; j < kFeatures; ++j) mean_w[j] += grad_w[j] / kWorkers;
      mean_b += grad_b / kWorkers;
    }
    for (int j = 0; j < kFeatures; ++j) w[j] -= learning_rate * mean_w[j];
    b -= learning_rate * mean_b;
  }
  auto tolerance = [](double expected) { return std::max(1e-6 * std::abs(expected), 1e-6); };
  for (int j = 0; j < kFeatures; ++j) {
    EXPECT_NEAR(final_weights["w"][j], w[j], tolerance(w[j])) << "w[" << j << "]";
  }
  EXPECT_NEAR(final_weights["b"][0], b, tolerance(b));
  // The weights moved: the comparison is not between two copies of the initial values.
  EXPECT_GT(std::abs(final_weights["b"][0] - initial["b"][0]), 1e-3);

  ASSERT_OK_AND_ASSIGN(std::vector<JobStats> stats, client->GetJobStats(spec.job_id()));
  ASSERT_EQ(stats.size(), 2u);
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.version(), kSteps);
    EXPECT_EQ(shard.step(), kSteps);
    EXPECT_EQ(shard.applied_updates(), kSteps);
    EXPECT_EQ(shard.applied_gradients(), kWorkers * kSteps);
    EXPECT_EQ(shard.staleness().max(), 0);
    EXPECT_TRUE(shard.dropped().empty());
    EXPECT_TRUE(shard.rejected().empty());
  }
}

TEST(SyncTest, BackupWorkersApplyTwoOfThreeAndDropTheLateOne) {
  constexpr int kSteps = 6;
  constexpr int kMoreSteps = 5;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, cluster->NewClient());
  ParameterSpec spec = MakeSpec("backup", ConsistencyConfig::SYNC, 3);
  spec.mutable_consistency()->set_replicas_to_aggregate(2);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::ZEROS, 0.0f);
  ASSERT_OK_AND_ASSIGN(Placement placement, client->CreateJob(spec));
  ASSERT_TRUE(SpansAllShards(placement, "w", 2));
  std::vector<std::unique_ptr<WorkerSession>> sessions = MakeSessions(client.get(), spec);

  Tensors weights(spec);
  Tensors gradient(spec, 1.0f);
  for (int step = 0; step < kSteps; ++step) {
    for (auto& session : sessions) {
      ASSERT_OK(session->Pull(PullAt(step, 0), weights.Mutable()));
    }
    // A different worker is late each step.
    for (int k = 0; k < 3; ++k) {
      int worker = (step + k) % 3;
      ASSERT_OK_AND_ASSIGN(std::vector<PushResponse> responses,
                           sessions[worker]->Push(PushAt(step, 0), gradient.Const()));
      for (const PushResponse& response : responses) {
        SCOPED_TRACE(absl::StrCat("step ", step, ", push ", k, ": ", response.ShortDebugString()));
        if (k == 0) {
          EXPECT_EQ(response.outcome(), PushResponse::ACCUMULATED);
        } else if (k == 1) {
          EXPECT_EQ(response.outcome(), PushResponse::APPLIED);
          EXPECT_EQ(response.step(), step + 1);
          EXPECT_EQ(response.version(), step + 1);
        } else {
          EXPECT_EQ(response.outcome(), PushResponse::DROPPED);
          EXPECT_EQ(response.drop_reason(), "stale_step");
        }
      }
    }
  }
  ASSERT_OK_AND_ASSIGN(std::vector<JobStats> stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) {
    SCOPED_TRACE(absl::StrCat("ps:", shard.ps_index()));
    EXPECT_EQ(shard.version(), kSteps);
    EXPECT_EQ(shard.step(), kSteps);
    EXPECT_EQ(shard.applied_gradients(), 2 * kSteps);
    EXPECT_EQ(MapValue(shard.dropped(), "stale_step"), kSteps);
  }

  // Worker 2 stops for good; the other two go on, concurrently, without waiting for it.
  std::vector<std::thread> threads;
  for (int worker = 0; worker < 2; ++worker) {
    threads.emplace_back([&, worker] {
      Tensors local(spec);
      for (int step = kSteps; step < kSteps + kMoreSteps; ++step) {
        absl::StatusOr<WorkerSession::PullResult> pulled =
            sessions[worker]->Pull(PullAt(step, 0), local.Mutable());
        ASSERT_TRUE(pulled.ok()) << pulled.status();
        absl::StatusOr<std::vector<PushResponse>> pushed =
            sessions[worker]->Push(PushAt(step, 0), gradient.Const());
        ASSERT_TRUE(pushed.ok()) << pushed.status();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_OK_AND_ASSIGN(stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) {
    SCOPED_TRACE(absl::StrCat("ps:", shard.ps_index()));
    EXPECT_EQ(shard.version(), kSteps + kMoreSteps);
    EXPECT_EQ(shard.applied_gradients(), 2 * (kSteps + kMoreSteps));
    EXPECT_EQ(MapValue(shard.dropped(), "stale_step"), kSteps);
  }
  // Every applied update was the mean of two all-ones gradients.
  ASSERT_OK(sessions[0]->Pull(PullAt(kSteps + kMoreSteps, 0), weights.Mutable()));
  EXPECT_THAT(weights["w"], ::testing::Each(-static_cast<float>(kSteps + kMoreSteps)));
}

TEST(SyncTest, BarrierThatCannotCompleteNamesTheMissingWorker) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  PsClientOptions options = cluster->ClientOptions();
  options.wait_timeout = absl::Milliseconds(500);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, PsClient::Create(options));
  ParameterSpec spec = MakeSpec("barrier", ConsistencyConfig::SYNC, 2);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::ZEROS, 0.0f);
  ASSERT_OK(client->CreateJob(spec));
  std::vector<std::unique_ptr<WorkerSession>> sessions = MakeSessions(client.get(), spec);

  Tensors weights(spec);
  Tensors gradient(spec, 1.0f);
  ASSERT_OK(sessions[0]->Pull(PullAt(0, 0), weights.Mutable()));
  ASSERT_OK(sessions[0]->Push(PushAt(0, 0), gradient.Const()));
  absl::Time start = absl::Now();
  absl::StatusOr<WorkerSession::PullResult> pulled =
      sessions[0]->Pull(PullAt(1, 0), weights.Mutable());
  absl::Duration elapsed = absl::Now() - start;
  ASSERT_EQ(pulled.status().code(), absl::StatusCode::kDeadlineExceeded) << pulled.status();
  EXPECT_THAT(pulled.status().message(), HasSubstr("missing workers 1"));
  EXPECT_THAT(pulled.status().message(),
              HasSubstr(absl::StrCat("ps:0 (", cluster->addresses()[0], ")")));
  EXPECT_THAT(pulled.status().message(), HasSubstr("barrier"));
  // The server's wait timeout ended it, not the client's call deadline.
  EXPECT_GE(elapsed, absl::Milliseconds(400));
  EXPECT_LT(elapsed, absl::Seconds(5));

  ASSERT_OK_AND_ASSIGN(std::vector<JobStats> stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.step(), 0);
    EXPECT_EQ(shard.version(), 0);
    EXPECT_THAT(shard.waiting_for(), ::testing::ElementsAre(1));
    EXPECT_EQ(shard.parked_pulls(), 0);
  }
}

// ---------------------------------------------------------------------------------------------
// ASYNC

// Round robin of `num_workers` workers, controlled by the test: all pull once, then worker
// (i mod N) pushes and pulls again, for i = 0 .. rounds * N - 1. `on_push` sees each push's
// responses.
void RoundRobin(
    std::vector<std::unique_ptr<WorkerSession>>& sessions, const ParameterSpec& spec, int rounds,
    const Tensors& gradient,
    const std::function<void(int push, int worker, const std::vector<PushResponse>&)>& on_push) {
  const int num_workers = static_cast<int>(sessions.size());
  Tensors weights(spec);
  for (auto& session : sessions) ASSERT_OK(session->Pull({}, weights.Mutable()));
  for (int push = 0; push < rounds * num_workers; ++push) {
    int worker = push % num_workers;
    ASSERT_OK_AND_ASSIGN(std::vector<PushResponse> responses,
                         sessions[worker]->Push({}, gradient.Const()));
    on_push(push, worker, responses);
    ASSERT_OK(sessions[worker]->Pull({}, weights.Mutable()));
  }
}

TEST(AsyncTest, RoundRobinStalenessIsNumWorkersMinusOneAfterTheFirstRound) {
  constexpr int kWorkers = 3;
  constexpr int kRounds = 5;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, cluster->NewClient());
  ParameterSpec spec = MakeSpec("async_round_robin", ConsistencyConfig::ASYNC, kWorkers);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::ZEROS, 0.0f);
  ASSERT_OK_AND_ASSIGN(Placement placement, client->CreateJob(spec));
  ASSERT_TRUE(SpansAllShards(placement, "w", 2));
  std::vector<std::unique_ptr<WorkerSession>> sessions = MakeSessions(client.get(), spec);

  Tensors gradient(spec, 1.0f);
  RoundRobin(sessions, spec, kRounds, gradient,
             [&](int push, int worker, const std::vector<PushResponse>& responses) {
               int64_t expected = push < kWorkers ? worker : kWorkers - 1;
               for (const PushResponse& response : responses) {
                 EXPECT_EQ(response.outcome(), PushResponse::APPLIED);
                 EXPECT_EQ(response.staleness(), expected) << "push " << push;
                 EXPECT_EQ(response.version(), push + 1);
               }
             });

  ASSERT_OK_AND_ASSIGN(std::vector<JobStats> stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) {
    SCOPED_TRACE(absl::StrCat("ps:", shard.ps_index()));
    EXPECT_EQ(shard.version(), kRounds * kWorkers);
    EXPECT_EQ(shard.staleness().total(), kRounds * kWorkers);
    EXPECT_EQ(CountAt(shard.staleness(), 0), 1);
    EXPECT_EQ(CountAt(shard.staleness(), 1), 1);
    EXPECT_EQ(CountAt(shard.staleness(), 2), kRounds * kWorkers - 2);
    EXPECT_EQ(shard.staleness().max(), kWorkers - 1);
    ASSERT_EQ(shard.workers_size(), kWorkers);
    for (int w = 0; w < kWorkers; ++w) {
      const StalenessHistogramData& histogram = shard.workers(w).staleness();
      EXPECT_EQ(histogram.total(), kRounds);
      EXPECT_EQ(CountAt(histogram, w), w == kWorkers - 1 ? kRounds : 1) << "worker " << w;
      EXPECT_EQ(CountAt(histogram, kWorkers - 1), w == kWorkers - 1 ? kRounds : kRounds - 1)
          << "worker " << w;
    }
  }
}

// A worker that pulls again before pushing (the trainer's overlap_communication) tags its push
// with the versions its gradient was computed from, not those of its last pull.
TEST(AsyncTest, PushTaggedWithEarlierReadVersionsCountsTheirStaleness) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, cluster->NewClient());
  ParameterSpec spec = MakeSpec("async_read_versions", ConsistencyConfig::ASYNC, 1);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::ZEROS, 0.0f);
  ASSERT_OK_AND_ASSIGN(Placement placement, client->CreateJob(spec));
  ASSERT_TRUE(SpansAllShards(placement, "w", 2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerSession> session,
                       WorkerSession::Create(client.get(), spec, 0));
  Tensors values(spec);
  Tensors gradient(spec, 1.0f);
  ASSERT_OK_AND_ASSIGN(WorkerSession::PullResult first, session->Pull({}, values.Mutable()));
  ASSERT_OK(session->Push({}, gradient.Const()));
  ASSERT_OK(session->Push({}, gradient.Const()));
  ASSERT_OK(session->Pull({}, values.Mutable()));  // At version 2 now.

  WorkerSession::PushOptions computed_earlier;
  computed_earlier.read_versions = first.versions;  // Version 0 on both shards.
  ASSERT_OK_AND_ASSIGN(std::vector<PushResponse> responses,
                       session->Push(computed_earlier, gradient.Const()));
  for (const PushResponse& response : responses) EXPECT_EQ(response.staleness(), 2);
  ASSERT_OK_AND_ASSIGN(responses, session->Push({}, gradient.Const()));
  for (const PushResponse& response : responses) EXPECT_EQ(response.staleness(), 1);

  computed_earlier.read_versions = {0};  // One version for a job on two shards.
  absl::StatusOr<std::vector<PushResponse>> wrong = session->Push(computed_earlier,
                                                                  gradient.Const());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument) << wrong.status();
  EXPECT_THAT(wrong.status().message(), HasSubstr("read_versions has 1 versions"));
  ASSERT_OK_AND_ASSIGN(std::vector<JobStats> stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) EXPECT_EQ(shard.version(), 4);  // Nothing sent.
}

TEST(AsyncTest, MaxStalenessDropsAndCounts) {
  constexpr int kWorkers = 3;
  constexpr int kRounds = 4;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, cluster->NewClient());
  ParameterSpec spec = MakeSpec("async_max_staleness", ConsistencyConfig::ASYNC, kWorkers);
  spec.mutable_consistency()->set_max_staleness(1);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::ZEROS, 0.0f);
  ASSERT_OK(client->CreateJob(spec));
  std::vector<std::unique_ptr<WorkerSession>> sessions = MakeSessions(client.get(), spec);

  // The same round robin, simulated: which pushes are applied and with what staleness.
  int64_t version = 0;
  std::vector<int64_t> read(kWorkers, 0);
  int64_t dropped = 0;
  Tensors gradient(spec, 1.0f);
  RoundRobin(sessions, spec, kRounds, gradient,
             [&](int push, int worker, const std::vector<PushResponse>& responses) {
               int64_t staleness = version - read[worker];
               bool drop = staleness > 1;
               if (drop) {
                 ++dropped;
               } else {
                 ++version;
               }
               read[worker] = version;
               for (const PushResponse& response : responses) {
                 SCOPED_TRACE(absl::StrCat("push ", push, ": ", response.ShortDebugString()));
                 EXPECT_EQ(response.staleness(), staleness);
                 EXPECT_EQ(response.version(), version);
                 if (drop) {
                   EXPECT_EQ(response.outcome(), PushResponse::DROPPED);
                   EXPECT_EQ(response.drop_reason(), "max_staleness");
                 } else {
                   EXPECT_EQ(response.outcome(), PushResponse::APPLIED);
                 }
               }
             });
  ASSERT_GT(dropped, 0);

  ASSERT_OK_AND_ASSIGN(std::vector<JobStats> stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.version(), version);
    EXPECT_EQ(shard.applied_gradients(), version);
    EXPECT_EQ(MapValue(shard.dropped(), "max_staleness"), dropped);
    EXPECT_EQ(shard.staleness().max(), 1);
  }
  Tensors weights(spec);
  ASSERT_OK(sessions[0]->Pull({}, weights.Mutable()));
  EXPECT_THAT(weights["w"], ::testing::Each(-static_cast<float>(version)));
}

TEST(AsyncTest, InverseLearningRateDividesByStaleness) {
  constexpr int kWorkers = 3;
  constexpr int kRounds = 4;
  constexpr float kInitial = 100.0f;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, cluster->NewClient());
  ParameterSpec spec = MakeSpec("async_inverse", ConsistencyConfig::ASYNC, kWorkers);
  spec.mutable_consistency()->set_staleness_learning_rate(ConsistencyConfig::INVERSE);
  spec.mutable_learning_rate()->set_base(1.5f);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::CONSTANT, kInitial);
  ASSERT_OK(client->CreateJob(spec));
  std::vector<std::unique_ptr<WorkerSession>> sessions = MakeSessions(client.get(), spec);

  Tensors gradient(spec);
  for (size_t i = 0; i < gradient["w"].size(); ++i) {
    gradient["w"][i] = 0.25f * static_cast<float>(i % 4 + 1);
  }
  // Expected: w -= (base / staleness, or base at staleness 0) * g, in float as the server does.
  std::vector<float> expected(gradient["w"].size(), kInitial);
  RoundRobin(sessions, spec, kRounds, gradient,
             [&](int push, int, const std::vector<PushResponse>& responses) {
               ASSERT_FALSE(responses.empty());
               int64_t staleness = responses[0].staleness();
               EXPECT_EQ(staleness, push < kWorkers ? push : kWorkers - 1);
               float learning_rate = spec.learning_rate().base();
               if (staleness > 0) learning_rate /= static_cast<float>(staleness);
               for (size_t i = 0; i < expected.size(); ++i) {
                 expected[i] -= learning_rate * gradient["w"][i];
               }
             });
  Tensors weights(spec);
  ASSERT_OK(sessions[0]->Pull({}, weights.Mutable()));
  EXPECT_EQ(weights["w"], expected);
  // Without the rule every update would use the full rate: a visibly different result.
  EXPECT_NE(weights["w"][0], kInitial - kRounds * kWorkers * 1.5f * gradient["w"][0]);
}

// ---------------------------------------------------------------------------------------------
// SSP and SOFTSYNC

TEST(SspTest, WorkerTooFarAheadWaitsForTheSlowestWorker) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, cluster->NewClient());
  ParameterSpec spec = MakeSpec("ssp_bound_2", ConsistencyConfig::SSP, 2);
  spec.mutable_consistency()->set_ssp_bound(2);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::ZEROS, 0.0f);
  ASSERT_OK(client->CreateJob(spec));
  std::vector<std::unique_ptr<WorkerSession>> sessions = MakeSessions(client.get(), spec);

  Tensors weights(spec);
  Tensors gradient(spec, 1.0f);
  // Worker 0 runs clocks 0, 1, 2 while worker 1 stays at clock 0: within the bound.
  for (int clock = 0; clock < 3; ++clock) {
    ASSERT_OK(sessions[0]->Pull(PullAt(0, clock), weights.Mutable()));
    ASSERT_OK(sessions[0]->Push(PushAt(0, clock), gradient.Const()));
  }
  // Clock 3 is 3 ahead of worker 1: the pull waits.
  std::atomic<bool> returned{false};
  absl::StatusOr<WorkerSession::PullResult> blocked;
  Tensors blocked_weights(spec);
  std::thread thread([&] {
    blocked = sessions[0]->Pull(PullAt(0, 3), blocked_weights.Mutable());
    returned = true;
  });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(returned);
  ASSERT_OK_AND_ASSIGN(std::vector<JobStats> stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) EXPECT_EQ(shard.parked_pulls(), 1);

  ASSERT_OK(sessions[1]->Pull(PullAt(0, 0), weights.Mutable()));
  EXPECT_FALSE(returned);
  ASSERT_OK(sessions[1]->Push(PushAt(0, 0), gradient.Const()));
  thread.join();
  ASSERT_TRUE(blocked.ok()) << blocked.status();
  EXPECT_THAT(blocked->versions, ::testing::Each(4));
  EXPECT_THAT(blocked_weights["w"], ::testing::Each(-4.0f));
}

TEST(SspTest, BoundZeroIsLockstep) {
  constexpr int kClocks = 6;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  // Lockstep waits are short here: one worker's push; a wait of a second means a lost wake-up.
  PsClientOptions options = cluster->ClientOptions();
  options.wait_timeout = absl::Seconds(1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, PsClient::Create(options));
  ParameterSpec spec = MakeSpec("ssp_bound_0", ConsistencyConfig::SSP, 2);
  spec.mutable_consistency()->set_ssp_bound(0);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::ZEROS, 0.0f);
  ASSERT_OK(client->CreateJob(spec));
  std::vector<std::unique_ptr<WorkerSession>> sessions = MakeSessions(client.get(), spec);

  // Worker 0 may not start clock 1 before worker 1 has finished clock 0.
  Tensors weights(spec);
  Tensors gradient(spec, 1.0f);
  ASSERT_OK(sessions[0]->Pull(PullAt(0, 0), weights.Mutable()));
  ASSERT_OK(sessions[0]->Push(PushAt(0, 0), gradient.Const()));
  absl::StatusOr<WorkerSession::PullResult> early =
      sessions[0]->Pull(PullAt(0, 1), weights.Mutable());
  ASSERT_EQ(early.status().code(), absl::StatusCode::kDeadlineExceeded) << early.status();
  EXPECT_THAT(early.status().message(), HasSubstr("waiting for workers 1"));

  // Both workers in lockstep: a pull at clock c sees every clock before c of both workers, and
  // at most the other worker's clock c.
  std::vector<std::thread> threads;
  for (int worker = 0; worker < 2; ++worker) {
    threads.emplace_back([&, worker] {
      Tensors local(spec);
      for (int clock = worker == 0 ? 1 : 0; clock < kClocks; ++clock) {
        absl::StatusOr<WorkerSession::PullResult> pulled =
            sessions[worker]->Pull(PullAt(0, clock), local.Mutable());
        ASSERT_TRUE(pulled.ok()) << pulled.status();
        for (int64_t version : pulled->versions) {
          EXPECT_GE(version, 2 * clock);
          EXPECT_LE(version, 2 * clock + 1);
        }
        absl::StatusOr<std::vector<PushResponse>> pushed =
            sessions[worker]->Push(PushAt(0, clock), gradient.Const());
        ASSERT_TRUE(pushed.ok()) << pushed.status();
        for (const PushResponse& response : *pushed) {
          EXPECT_EQ(response.outcome(), PushResponse::APPLIED);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_OK_AND_ASSIGN(std::vector<JobStats> stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.version(), 2 * kClocks);
    ASSERT_EQ(shard.workers_size(), 2);
    EXPECT_EQ(shard.workers(0).clock(), kClocks);
    EXPECT_EQ(shard.workers(1).clock(), kClocks);
  }
}

TEST(SoftsyncTest, AppliesTheMeanOfEveryTwoGradients) {
  constexpr int kWorkers = 4;
  constexpr int kRounds = 2;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, cluster->NewClient());
  ParameterSpec spec = MakeSpec("softsync", ConsistencyConfig::SOFTSYNC, kWorkers);
  spec.mutable_consistency()->set_softsync_n(2);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::CONSTANT, 10.0f);
  ASSERT_OK(client->CreateJob(spec));
  std::vector<std::unique_ptr<WorkerSession>> sessions = MakeSessions(client.get(), spec);

  Tensors weights(spec);
  float expected = 10.0f;
  float pending = 0.0f;
  int pushes = 0;
  for (int round = 0; round < kRounds; ++round) {
    for (auto& session : sessions) ASSERT_OK(session->Pull({}, weights.Mutable()));
    for (int worker = 0; worker < kWorkers; ++worker) {
      Tensors gradient(spec, static_cast<float>(worker + 1));
      ASSERT_OK_AND_ASSIGN(std::vector<PushResponse> responses,
                           sessions[worker]->Push({}, gradient.Const()));
      ++pushes;
      pending += static_cast<float>(worker + 1);
      bool completes = pushes % 2 == 0;
      if (completes) {
        expected -= pending / 2.0f;
        pending = 0.0f;
      }
      for (const PushResponse& response : responses) {
        SCOPED_TRACE(absl::StrCat("push ", pushes, ": ", response.ShortDebugString()));
        EXPECT_EQ(response.outcome(),
                  completes ? PushResponse::APPLIED : PushResponse::ACCUMULATED);
        EXPECT_EQ(response.version(), pushes / 2);
      }
    }
  }
  ASSERT_OK(sessions[0]->Pull({}, weights.Mutable()));
  EXPECT_THAT(weights["w"], ::testing::Each(expected));
  ASSERT_OK_AND_ASSIGN(std::vector<JobStats> stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.version(), kRounds * kWorkers / 2);
    EXPECT_EQ(shard.applied_updates(), kRounds * kWorkers / 2);
    EXPECT_EQ(shard.applied_gradients(), kRounds * kWorkers);
  }
}

// ---------------------------------------------------------------------------------------------
// Concurrency

TEST(ConcurrencyTest, ManyWorkersPushingAtOnceLoseNoUpdate) {
  constexpr int kThreads = 8;
  constexpr int kPushes = 1000;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, cluster->NewClient());
  ParameterSpec spec = MakeSpec("concurrent", ConsistencyConfig::ASYNC, kThreads);
  AddVariable(&spec, "w", {64, 4}, InitializerConfig::CONSTANT, 3.0f);
  ASSERT_OK_AND_ASSIGN(Placement placement, client->CreateJob(spec));
  ASSERT_TRUE(SpansAllShards(placement, "w", 2));
  std::vector<std::unique_ptr<WorkerSession>> sessions = MakeSessions(client.get(), spec);

  std::vector<std::thread> threads;
  for (int worker = 0; worker < kThreads; ++worker) {
    threads.emplace_back([&, worker] {
      Tensors gradient(spec, 1.0f);
      Tensors weights(spec);
      for (int push = 0; push < kPushes; ++push) {
        if (push % 100 == 0) {
          absl::StatusOr<WorkerSession::PullResult> pulled =
              sessions[worker]->Pull({}, weights.Mutable());
          ASSERT_TRUE(pulled.ok()) << pulled.status();
        }
        absl::StatusOr<std::vector<PushResponse>> pushed =
            sessions[worker]->Push({}, gradient.Const());
        ASSERT_TRUE(pushed.ok()) << pushed.status();
        for (const PushResponse& response : *pushed) {
          ASSERT_EQ(response.outcome(), PushResponse::APPLIED);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  ASSERT_OK_AND_ASSIGN(std::vector<JobStats> stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) {
    SCOPED_TRACE(absl::StrCat("ps:", shard.ps_index()));
    EXPECT_EQ(shard.version(), kThreads * kPushes);
    EXPECT_EQ(shard.applied_gradients(), kThreads * kPushes);
    for (const WorkerStats& worker : shard.workers()) {
      EXPECT_EQ(worker.applied(), kPushes);
      EXPECT_EQ(worker.last_push_id(), kPushes);
    }
  }
  Tensors weights(spec);
  ASSERT_OK(sessions[0]->Pull({}, weights.Mutable()));
  EXPECT_THAT(weights["w"], ::testing::Each(3.0f - kThreads * kPushes));
}

// ---------------------------------------------------------------------------------------------
// Bad input: a precise code, counted, and nothing changes.

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(cluster_, LocalCluster::Start(2));
    ASSERT_OK_AND_ASSIGN(client_, cluster_->NewClient());
    spec_ = MakeSpec("bad_input", ConsistencyConfig::ASYNC, 2);
    AddVariable(&spec_, "w", {64, 8}, InitializerConfig::UNIFORM, 1.0f);
    AddVariable(&spec_, "b", {8}, InitializerConfig::CONSTANT, 0.5f);
    ASSERT_OK_AND_ASSIGN(Placement placement, client_->CreateJob(spec_));
    ASSERT_TRUE(SpansAllShards(placement, "w", 2));
    ASSERT_OK_AND_ASSIGN(session_, WorkerSession::Create(client_.get(), spec_, 0));
    before_ = Tensors(spec_);
    ASSERT_OK(session_->Pull({}, before_.Mutable()));
  }

  // The job's values and versions are what SetUp read, and no push was recorded.
  void ExpectUnchanged() {
    Tensors after(spec_);
    ASSERT_OK_AND_ASSIGN(WorkerSession::PullResult pulled, session_->Pull({}, after.Mutable()));
    EXPECT_THAT(pulled.versions, ::testing::Each(0));
    EXPECT_TRUE(after == before_);
  }

  std::vector<JobStats> Stats() {
    absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats(spec_.job_id());
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *std::move(stats) : std::vector<JobStats>();
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<PsClient> client_;
  ParameterSpec spec_;
  std::unique_ptr<WorkerSession> session_;
  Tensors before_{ParameterSpec()};
};

TEST_F(BadInputTest, UnknownJobIsNotFound) {
  absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats("no_such_job");
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kNotFound) << stats.status();
  EXPECT_THAT(stats.status().message(), HasSubstr("no_such_job"));

  ParameterSpec unknown = spec_;
  unknown.set_job_id("no_such_job");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerSession> stranger,
                       WorkerSession::Create(client_.get(), unknown, 0));
  Tensors values(unknown, 1.0f);
  absl::StatusOr<WorkerSession::PullResult> pulled = stranger->Pull({}, values.Mutable());
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kNotFound) << pulled.status();
  EXPECT_THAT(pulled.status().message(), HasSubstr("no_such_job"));
  absl::StatusOr<std::vector<PushResponse>> pushed = stranger->Push({}, values.Const());
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kNotFound) << pushed.status();
  EXPECT_THAT(pushed.status().message(), HasSubstr("no_such_job"));
  EXPECT_EQ(client_->DeleteJob("no_such_job").code(), absl::StatusCode::kNotFound);

  ExpectUnchanged();
  for (const JobStats& shard : Stats()) {
    EXPECT_TRUE(shard.rejected().empty());
    EXPECT_EQ(shard.applied_gradients(), 0);
  }
}

TEST_F(BadInputTest, NonFiniteGradientIsRejectedOnEveryShard) {
  Tensors gradient(spec_, 1.0f);
  // One NaN in each shard's slice of w, and an Inf in b.
  gradient["w"][0] = std::numeric_limits<float>::quiet_NaN();
  gradient["w"][gradient["w"].size() - 1] = std::numeric_limits<float>::quiet_NaN();
  gradient["b"][3] = std::numeric_limits<float>::infinity();
  absl::StatusOr<std::vector<PushResponse>> pushed = session_->Push({}, gradient.Const());
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kInvalidArgument) << pushed.status();
  EXPECT_THAT(pushed.status().message(), HasSubstr("NaN"));

  ExpectUnchanged();
  for (const JobStats& shard : Stats()) {
    EXPECT_EQ(MapValue(shard.rejected(), "non_finite"), 1) << "ps:" << shard.ps_index();
    EXPECT_EQ(shard.applied_gradients(), 0);
  }
  // The worker goes on with a good gradient.
  Tensors good(spec_, 1.0f);
  ASSERT_OK_AND_ASSIGN(std::vector<PushResponse> responses, session_->Push({}, good.Const()));
  for (const PushResponse& response : responses) {
    EXPECT_EQ(response.outcome(), PushResponse::APPLIED);
  }
}

TEST_F(BadInputTest, SameSpecAgainIsFineAndADifferentOneAlreadyExists) {
  EXPECT_OK(client_->CreateJob(spec_));
  ParameterSpec different = spec_;
  different.mutable_learning_rate()->set_base(0.5f);
  absl::StatusOr<Placement> created = client_->CreateJob(different);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kAlreadyExists) << created.status();
  EXPECT_THAT(created.status().message(), HasSubstr("bad_input"));

  ExpectUnchanged();
  // The job keeps its first spec: learning rate 1.
  Tensors gradient(spec_, 1.0f);
  ASSERT_OK(session_->Push({}, gradient.Const()));
  Tensors after(spec_);
  ASSERT_OK(session_->Pull({}, after.Mutable()));
  EXPECT_EQ(after["b"], std::vector<float>(8, -0.5f));
}

TEST_F(BadInputTest, WrongVariableSizeInTheClientSendsNothing) {
  Tensors gradient(spec_, 1.0f);
  gradient["w"].pop_back();
  absl::StatusOr<std::vector<PushResponse>> pushed = session_->Push({}, gradient.Const());
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kInvalidArgument) << pushed.status();
  EXPECT_THAT(pushed.status().message(), HasSubstr("\"w\""));

  Tensors short_values(spec_);
  short_values["b"].push_back(0.0f);
  absl::StatusOr<WorkerSession::PullResult> pulled = session_->Pull({}, short_values.Mutable());
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kInvalidArgument) << pulled.status();
  EXPECT_THAT(pulled.status().message(), HasSubstr("\"b\""));

  ExpectUnchanged();
  for (const JobStats& shard : Stats()) {
    EXPECT_TRUE(shard.rejected().empty());
    for (const WorkerStats& worker : shard.workers()) EXPECT_EQ(worker.last_push_id(), 0);
  }
}

TEST_F(BadInputTest, PushNotMatchingThePlacementIsRejected) {
  // The same job computed with another min_slice_bytes: w in one slice on ps:0, which holds
  // half of it.
  ParameterSpec other = spec_;
  other.set_min_slice_bytes(0);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerSession> mismatched,
                       WorkerSession::Create(client_.get(), other, 1));
  Tensors gradient(other, 1.0f);
  absl::StatusOr<std::vector<PushResponse>> pushed = mismatched->Push({}, gradient.Const());
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kInvalidArgument) << pushed.status();
  EXPECT_THAT(pushed.status().message(), HasSubstr("placement"));

  ExpectUnchanged();
  std::vector<JobStats> stats = Stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(MapValue(stats[0].rejected(), "shape"), 1);
  EXPECT_EQ(stats[0].applied_gradients(), 0);
  EXPECT_EQ(stats[1].applied_gradients(), 0);
}

TEST_F(BadInputTest, CreateJobForTheWrongTaskIsFailedPrecondition) {
  ParameterSpec spec = spec_;
  spec.set_job_id("wrong_task");
  // The addresses in the wrong order: ps:0's request reaches ps:1 and the other way round.
  PsClientOptions swapped = cluster_->ClientOptions();
  std::swap(swapped.ps_addresses[0], swapped.ps_addresses[1]);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> swapped_client, PsClient::Create(swapped));
  absl::StatusOr<Placement> created = swapped_client->CreateJob(spec);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kFailedPrecondition) << created.status();
  EXPECT_THAT(created.status().message(), HasSubstr("ps:1 of 2"));

  // A cluster of one ps task, as the client sees it.
  PsClientOptions one = cluster_->ClientOptions();
  one.ps_addresses.resize(1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> one_client, PsClient::Create(one));
  created = one_client->CreateJob(spec);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kFailedPrecondition) << created.status();
  EXPECT_THAT(created.status().message(), HasSubstr("of 1"));

  absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats("wrong_task");
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kNotFound) << stats.status();
  ExpectUnchanged();
}

TEST(MessageSizeTest, GradientOverTheServersLimitIsResourceExhaustedUnlessChunked) {
  constexpr int kLimit = 64 * 1024;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2, kLimit));
  PsClientOptions options = cluster->ClientOptions();
  options.shared_memory = false;    // Tensors in the messages, which the limit is about.
  options.chunk_bytes = 16 * 1024;  // Pulls and pushes in pieces below the limit.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, PsClient::Create(options));
  options.chunk_bytes = 1 << 20;  // Pushes of a shard in one message, over the limit.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> unchunked, PsClient::Create(options));
  ParameterSpec spec = MakeSpec("oversized", ConsistencyConfig::ASYNC, 1);
  AddVariable(&spec, "w", {64, 1024}, InitializerConfig::CONSTANT, 2.0f);  // 128 KiB a shard.
  ASSERT_OK_AND_ASSIGN(Placement placement, client->CreateJob(spec));
  ASSERT_TRUE(SpansAllShards(placement, "w", 2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerSession> session,
                       WorkerSession::Create(client.get(), spec, 0));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerSession> oversized,
                       WorkerSession::Create(unchunked.get(), spec, 0));

  Tensors before(spec);
  ASSERT_OK(session->Pull({}, before.Mutable()));
  EXPECT_THAT(before["w"], ::testing::Each(2.0f));
  Tensors gradient(spec, 1.0f);
  absl::StatusOr<std::vector<PushResponse>> pushed = oversized->Push({}, gradient.Const());
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kResourceExhausted) << pushed.status();
  EXPECT_THAT(pushed.status().message(), HasSubstr("ps:"));

  Tensors after(spec);
  ASSERT_OK_AND_ASSIGN(WorkerSession::PullResult pulled, session->Pull({}, after.Mutable()));
  EXPECT_THAT(pulled.versions, ::testing::Each(0));
  EXPECT_TRUE(after == before);
  ASSERT_OK_AND_ASSIGN(std::vector<JobStats> stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.applied_gradients(), 0);
    EXPECT_EQ(shard.workers(0).last_push_id(), 0);
  }

  // The same gradient in chunks below the limit is applied once, as one update per shard.
  ASSERT_OK_AND_ASSIGN(std::vector<PushResponse> responses, session->Push({}, gradient.Const()));
  for (const PushResponse& response : responses) {
    EXPECT_EQ(response.outcome(), PushResponse::APPLIED);
    EXPECT_EQ(response.version(), 1);
  }
  ASSERT_OK_AND_ASSIGN(stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.applied_gradients(), 1);
    EXPECT_EQ(shard.version(), 1);
    EXPECT_EQ(shard.rejected().size(), 0);
  }
  ASSERT_OK(session->Pull({}, after.Mutable()));
  EXPECT_THAT(after["w"], ::testing::Each(::testing::Lt(2.0f)));
  EXPECT_THAT(after["w"], ::testing::Each(after["w"][0]));
}

// ---------------------------------------------------------------------------------------------
// Lifecycle and transport

TEST(ShutdownTest, ParkedPullEndsUnavailableAndShutdownIsPrompt) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  PsClientOptions options = cluster->ClientOptions();
  options.wait_timeout = absl::Seconds(30);
  options.max_attempts = 2;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, PsClient::Create(options));
  ParameterSpec spec = MakeSpec("shutdown", ConsistencyConfig::SYNC, 2);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::ZEROS, 0.0f);
  ASSERT_OK(client->CreateJob(spec));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerSession> session,
                       WorkerSession::Create(client.get(), spec, 0));
  Tensors weights(spec);
  Tensors gradient(spec, 1.0f);
  ASSERT_OK(session->Pull(PullAt(0, 0), weights.Mutable()));
  ASSERT_OK(session->Push(PushAt(0, 0), gradient.Const()));

  absl::StatusOr<WorkerSession::PullResult> parked;
  absl::Time parked_returned;
  std::thread thread([&] {
    parked = session->Pull(PullAt(1, 0), weights.Mutable());
    parked_returned = absl::Now();
  });
  // Wait until both shards hold the pull.
  absl::Time give_up = absl::Now() + absl::Seconds(10);
  bool both_parked = false;
  while (!both_parked && absl::Now() < give_up) {
    absl::StatusOr<std::vector<JobStats>> stats = client->GetJobStats(spec.job_id());
    both_parked = stats.ok() && std::all_of(stats->begin(), stats->end(), [](const JobStats& s) {
                    return s.parked_pulls() == 1;
                  });
    if (!both_parked) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(both_parked);

  absl::Time shutdown_start = absl::Now();
  cluster->server(0).Shutdown(absl::Seconds(20));
  cluster->server(1).Shutdown(absl::Seconds(20));
  absl::Duration shutdown_took = absl::Now() - shutdown_start;
  thread.join();
  EXPECT_LT(shutdown_took, absl::Seconds(3));
  EXPECT_EQ(parked.status().code(), absl::StatusCode::kUnavailable) << parked.status();
  EXPECT_LT(parked_returned - shutdown_start, absl::Seconds(5));
}

// Finished jobs leave the shard's memory: once every worker has left, after the retention.
TEST(RetentionTest, AJobIsForgottenAfterTheRetentionOnceEveryWorkerHasLeft) {
  InProcessPsClusterOptions cluster_options;
  cluster_options.server.service.finished_job_retention = absl::Milliseconds(300);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<InProcessPsCluster> servers,
                       InProcessPsCluster::Start(cluster_options));
  PsClientOptions options;
  options.ps_addresses = servers->addresses();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, PsClient::Create(options));
  for (const char* id : {"finished", "half-finished"}) {
    ParameterSpec spec = MakeSpec(id, ConsistencyConfig::ASYNC, 2);
    AddVariable(&spec, "w", {8}, InitializerConfig::ZEROS, 0.0f);
    ASSERT_TRUE(client->CreateJob(spec).ok());
  }
  ASSERT_TRUE(client->LeaveJob("finished", "", 0).ok());
  ASSERT_TRUE(client->LeaveJob("finished", "", 1).ok());
  ASSERT_TRUE(client->LeaveJob("half-finished", "", 0).ok());
  EXPECT_TRUE(client->GetJobStats("finished").ok());  // Kept for its status and results.

  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (client->GetJobStats("finished").ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(absl::IsNotFound(client->GetJobStats("finished").status()));
  EXPECT_TRUE(client->GetJobStats("half-finished").ok());  // A worker is still in it.
}

// A ps restarted on its address is reached within a second of listening, however long it was
// away (gRPC's default reconnect backoff would have grown to several seconds by then).
TEST(RetryTest, APsRestartedOnItsAddressIsReachedWithinASecondOfListening) {
  PsServerOptions server_options;
  server_options.listen_address = "127.0.0.1:0";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsServer> server, PsServer::Start(server_options));
  const std::string address = absl::StrCat("127.0.0.1:", server->bound_port());
  PsClientOptions options;
  options.ps_addresses = {address};
  options.call_timeout = absl::Seconds(2);
  options.max_attempts = 1;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, PsClient::Create(options));
  EXPECT_TRUE(absl::IsNotFound(client->GetJobStats("none").status()));

  server->Shutdown(absl::ZeroDuration());
  server.reset();
  // Away for 4 s while the client keeps trying: the connection backs off between attempts.
  const absl::Time away_until = absl::Now() + absl::Seconds(4);
  while (absl::Now() < away_until) {
    EXPECT_TRUE(absl::IsUnavailable(client->GetJobStats("none").status()));
    absl::SleepFor(absl::Milliseconds(100));
  }
  server_options.listen_address = address;
  ASSERT_OK_AND_ASSIGN(server, PsServer::Start(server_options));
  const absl::Time listening = absl::Now();
  absl::Status status;
  do {
    status = client->GetJobStats("none").status();
    if (absl::IsUnavailable(status)) absl::SleepFor(absl::Milliseconds(20));
  } while (absl::IsUnavailable(status) && absl::Now() - listening < absl::Seconds(10));
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_LT(absl::Now() - listening, absl::Seconds(1));
}

TEST(RetryTest, NothingListeningIsUnavailableAfterMaxAttemptsNamingTheShard) {
  int port;
  {
    // A port that was free a moment ago and has nothing listening now.
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> gone, LocalCluster::Start(1));
    port = gone->server(0).bound_port();
  }
  PsClientOptions options;
  options.ps_addresses = {absl::StrCat("127.0.0.1:", port)};
  options.call_timeout = absl::Seconds(5);
  options.max_attempts = 3;
  options.initial_backoff = absl::Milliseconds(10);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, PsClient::Create(options));
  ParameterSpec spec = MakeSpec("retry", ConsistencyConfig::ASYNC, 1);
  AddVariable(&spec, "w", {8}, InitializerConfig::ZEROS, 0.0f);

  absl::Time start = absl::Now();
  absl::StatusOr<Placement> created = client->CreateJob(spec);
  absl::Duration elapsed = absl::Now() - start;
  EXPECT_EQ(created.status().code(), absl::StatusCode::kUnavailable) << created.status();
  EXPECT_THAT(created.status().message(), HasSubstr(absl::StrCat("ps:0 (127.0.0.1:", port, ")")));
  EXPECT_THAT(created.status().message(), HasSubstr("after 3 attempts"));
  EXPECT_LT(elapsed, absl::Seconds(5));
}

TEST(ChunkedPullTest, SmallChunksReadTheSameValuesAsOneBigPull) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  PsClientOptions big_options = cluster->ClientOptions();
  big_options.chunk_bytes = 64 << 20;
  PsClientOptions small_options = cluster->ClientOptions();
  small_options.chunk_bytes = 1024;
  small_options.shared_memory = false;  // Chunks in the requests; the big client's in memory.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> big_client, PsClient::Create(big_options));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> small_client, PsClient::Create(small_options));

  ParameterSpec spec = MakeSpec("chunked", ConsistencyConfig::ASYNC, 1);
  AddVariable(&spec, "tall", {300, 7}, InitializerConfig::UNIFORM, 1.0f);  // Many rows a chunk.
  AddVariable(&spec, "wide", {4, 600}, InitializerConfig::NORMAL, 1.0f);   // Rows over a chunk.
  AddVariable(&spec, "constant", {50, 3}, InitializerConfig::CONSTANT, 0.5f);
  ASSERT_OK_AND_ASSIGN(Placement placement, big_client->CreateJob(spec));
  ASSERT_TRUE(SpansAllShards(placement, "tall", 2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerSession> big,
                       WorkerSession::Create(big_client.get(), spec, 0));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerSession> small,
                       WorkerSession::Create(small_client.get(), spec, 0));

  auto expect_same_pulls = [&](int64_t version) {
    Tensors whole(spec, -1.0f);
    Tensors pieces(spec, -2.0f);
    ASSERT_OK_AND_ASSIGN(WorkerSession::PullResult whole_result, big->Pull({}, whole.Mutable()));
    ASSERT_OK_AND_ASSIGN(WorkerSession::PullResult pieces_result,
                         small->Pull({}, pieces.Mutable()));
    EXPECT_THAT(whole_result.versions, ::testing::Each(version));
    EXPECT_THAT(pieces_result.versions, ::testing::Each(version));
    EXPECT_TRUE(whole == pieces);
    // The initializers ran: values differ from the fills and from each other.
    EXPECT_NE(whole["tall"][0], whole["tall"][1]);
    EXPECT_NE(whole["wide"][0], whole["wide"][2399]);
    EXPECT_THAT(whole["constant"], ::testing::Each(0.5f - static_cast<float>(version)));
  };
  expect_same_pulls(0);
  Tensors gradient(spec, 1.0f);
  for (size_t i = 0; i < gradient["tall"].size(); ++i) gradient["tall"][i] = 0.001f * i;
  ASSERT_OK(big->Push({}, gradient.Const()));
  expect_same_pulls(1);
}

// ---------------------------------------------------------------------------------------------
// PushPull: a push and the next pull in one round trip

TEST(PushPullTest, AnswersWithTheValuesAfterThePush) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, cluster->NewClient());
  ParameterSpec spec = MakeSpec("pushpull_async", ConsistencyConfig::ASYNC, 2);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::CONSTANT, 3.0f);
  AddVariable(&spec, "b", {8}, InitializerConfig::CONSTANT, 1.0f);
  ASSERT_OK_AND_ASSIGN(Placement placement, client->CreateJob(spec));
  ASSERT_TRUE(SpansAllShards(placement, "w", 2));
  std::vector<std::unique_ptr<WorkerSession>> sessions = MakeSessions(client.get(), spec);
  Tensors values(spec);
  ASSERT_OK(sessions[0]->Pull({}, values.Mutable()));

  // Worker 1 pushes in between: worker 0's next push has staleness 1, and its values show both.
  Tensors quarter(spec, 0.25f);
  ASSERT_OK(sessions[1]->Push({}, quarter.Const()));
  Tensors gradient(spec, 0.5f);
  ASSERT_OK_AND_ASSIGN(WorkerSession::PushPullResult result,
                       sessions[0]->PushPull({}, gradient.Const(), {}, values.Mutable()));
  for (const PushResponse& response : result.pushed) {
    EXPECT_EQ(response.outcome(), PushResponse::APPLIED);
    EXPECT_EQ(response.staleness(), 1);
    EXPECT_EQ(response.version(), 2);
  }
  EXPECT_THAT(result.pulled.versions, ::testing::Each(2));
  EXPECT_THAT(values["w"], ::testing::Each(3.0f - 0.25f - 0.5f));
  EXPECT_THAT(values["b"], ::testing::Each(1.0f - 0.25f - 0.5f));

  // The versions it read are those the next push carries: staleness 0 without other pushes.
  ASSERT_OK_AND_ASSIGN(result, sessions[0]->PushPull({}, gradient.Const(), {}, values.Mutable()));
  for (const PushResponse& response : result.pushed) EXPECT_EQ(response.staleness(), 0);
  EXPECT_THAT(values["w"], ::testing::Each(3.0f - 0.25f - 1.0f));
}

TEST(PushPullTest, SyncPullWaitsForTheStepThePushJoined) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, cluster->NewClient());
  ParameterSpec spec = MakeSpec("pushpull_sync", ConsistencyConfig::SYNC, 2);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::ZEROS, 0.0f);
  ASSERT_OK_AND_ASSIGN(Placement placement, client->CreateJob(spec));
  std::vector<std::unique_ptr<WorkerSession>> sessions = MakeSessions(client.get(), spec);
  Tensors values(spec, -1.0f);
  absl::StatusOr<WorkerSession::PushPullResult> result;
  absl::Notification done;
  std::thread worker0([&] {
    Tensors gradient(spec, 1.0f);
    result = sessions[0]->PushPull(PushAt(0, 0), gradient.Const(), PullAt(1, 0), values.Mutable());
    done.Notify();
  });
  // Its push is in and its pull parked, until worker 1's gradient completes step 0.
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(300)));
  EXPECT_THAT(values["w"], ::testing::Each(-1.0f));
  Tensors gradient(spec, 3.0f);
  ASSERT_OK_AND_ASSIGN(std::vector<PushResponse> pushed,
                       sessions[1]->Push(PushAt(0, 0), gradient.Const()));
  worker0.join();
  ASSERT_TRUE(result.ok()) << result.status();
  for (const PushResponse& response : result->pushed) {
    EXPECT_EQ(response.outcome(), PushResponse::ACCUMULATED);
  }
  EXPECT_EQ(result->pulled.step, 1);
  EXPECT_THAT(values["w"], ::testing::Each(-2.0f));  // The mean of 1 and 3, at rate 1.
}

TEST(PushPullTest, ARejectedPushPullsNothingAndChangesNothing) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, cluster->NewClient());
  ParameterSpec spec = MakeSpec("pushpull_bad", ConsistencyConfig::ASYNC, 1);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::CONSTANT, 2.0f);
  ASSERT_OK_AND_ASSIGN(Placement placement, client->CreateJob(spec));
  ASSERT_TRUE(SpansAllShards(placement, "w", 2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerSession> session,
                       WorkerSession::Create(client.get(), spec, 0));
  Tensors gradient(spec, 1.0f);
  // One in each shard's slice: each shard handles its own push.
  gradient["w"][5] = std::numeric_limits<float>::infinity();
  gradient["w"][gradient["w"].size() - 1] = -std::numeric_limits<float>::infinity();
  Tensors values(spec, -1.0f);
  absl::StatusOr<WorkerSession::PushPullResult> result =
      session->PushPull({}, gradient.Const(), {}, values.Mutable());
  EXPECT_EQ(StatusOf(result).code(), absl::StatusCode::kInvalidArgument) << StatusOf(result);
  EXPECT_THAT(StatusOf(result).message(), HasSubstr("Inf in variable \"w\""));
  EXPECT_THAT(StatusOf(result).message(), HasSubstr("PushPull"));
  EXPECT_THAT(values["w"], ::testing::Each(-1.0f));
  ASSERT_OK_AND_ASSIGN(std::vector<JobStats> stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.version(), 0);
    EXPECT_EQ(MapValue(shard.rejected(), "non_finite"), 1);
  }
}

TEST(PushPullTest, GradientsOverAChunkGoAsPushThenPull) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(2));
  PsClientOptions options = cluster->ClientOptions();
  options.chunk_bytes = 512;  // Below a shard's 1 KiB of w.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PsClient> client, PsClient::Create(options));
  ParameterSpec spec = MakeSpec("pushpull_chunked", ConsistencyConfig::ASYNC, 1);
  AddVariable(&spec, "w", {64, 8}, InitializerConfig::CONSTANT, 2.0f);
  ASSERT_OK_AND_ASSIGN(Placement placement, client->CreateJob(spec));
  ASSERT_TRUE(SpansAllShards(placement, "w", 2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WorkerSession> session,
                       WorkerSession::Create(client.get(), spec, 0));
  Tensors gradient(spec, 0.5f);
  Tensors values(spec, -1.0f);
  ASSERT_OK_AND_ASSIGN(WorkerSession::PushPullResult result,
                       session->PushPull({}, gradient.Const(), {}, values.Mutable()));
  for (const PushResponse& response : result.pushed) {
    EXPECT_EQ(response.outcome(), PushResponse::APPLIED);
  }
  EXPECT_THAT(result.pulled.versions, ::testing::Each(1));
  EXPECT_THAT(values["w"], ::testing::Each(1.5f));
  ASSERT_OK_AND_ASSIGN(std::vector<JobStats> stats, client->GetJobStats(spec.job_id()));
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.applied_gradients(), 1);
    EXPECT_TRUE(shard.rejected().empty());
  }
}

}  // namespace
}  // namespace ps
