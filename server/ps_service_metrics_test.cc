// The ps's /metrics after scripted jobs: every count equals what the script did, exactly.
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "proto/ps_service.pb.h"
#include "proto/task.grpc.pb.h"
#include "server/ps_server.h"
#include "server/testing/in_process_ps_cluster.h"

namespace ps {
namespace {

ParameterSpec MakeSpec(const std::string& job_id, ConsistencyConfig::Mode mode, int num_workers) {
  ParameterSpec spec;
  spec.set_job_id(job_id);
  spec.set_num_workers(num_workers);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  spec.mutable_learning_rate()->set_kind(LearningRateSchedule::CONSTANT);
  spec.mutable_learning_rate()->set_base(1.0f);
  spec.mutable_consistency()->set_mode(mode);
  VariableDef* variable = spec.add_variables();
  variable->set_name("w");
  variable->add_shape(16);
  variable->mutable_initializer()->set_kind(InitializerConfig::ZEROS);
  return spec;
}

// The samples of a /metrics page by "name{labels}" as written; every line that is not a
// comment must be "series value".
std::map<std::string, double> ParseSamples(const std::string& page) {
  std::map<std::string, double> samples;
  std::istringstream lines(page);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    if (space == std::string::npos) continue;
    const std::string value = line.substr(space + 1);
    samples[line.substr(0, space)] =
        value == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(value);
  }
  return samples;
}

// The value of `series`; a failure (and NaN) when the page lacks it.
double Value(const std::map<std::string, double>& samples, const std::string& series) {
  auto it = samples.find(series);
  if (it == samples.end()) {
    ADD_FAILURE() << "no " << series;
    return std::nan("");
  }
  return it->second;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InProcessPsClusterOptions options;
    options.server.metrics_port = 0;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    ASSERT_GT(cluster_->server(0).metrics_port(), 0);
    PsClientOptions client_options;
    client_options.ps_addresses = cluster_->addresses();
    client_options.call_timeout = absl::Seconds(10);
    client_options.wait_timeout = absl::Seconds(10);
    // Tensors in the requests, whose calls and bytes these tests count.
    client_options.shared_memory = false;
    client_options.bulk_streams = false;
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(client_options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // GET /metrics over HTTP, parsed.
  std::map<std::string, double> Scrape() {
    httplib::Client http("127.0.0.1", cluster_->server(0).metrics_port());
    httplib::Result result = http.Get("/metrics");
    EXPECT_TRUE(result) << httplib::to_string(result.error());
    if (!result) return {};
    EXPECT_EQ(result->status, 200);
    EXPECT_EQ(result->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    return ParseSamples(result->body);
  }

  std::vector<std::unique_ptr<WorkerSession>> Sessions(const ParameterSpec& spec) {
    std::vector<std::unique_ptr<WorkerSession>> sessions;
    for (int worker = 0; worker < spec.num_workers(); ++worker) {
      absl::StatusOr<std::unique_ptr<WorkerSession>> session =
          WorkerSession::Create(client_.get(), spec, worker);
      EXPECT_TRUE(session.ok()) << session.status();
      if (session.ok()) sessions.push_back(*std::move(session));
    }
    return sessions;
  }

  std::unique_ptr<InProcessPsCluster> cluster_;
  std::unique_ptr<PsClient> client_;
};

// "name{job_id="...",shard="0"<extra>}".
std::string Series(const std::string& name, const std::string& job, const std::string& extra = "") {
  return absl::StrCat(name, "{job_id=\"", job, "\",shard=\"0\"", extra, "}");
}

TEST_F(MetricsTest, AsyncJobCountsStalenessDropsAndRejectionsExactly) {
  ParameterSpec spec = MakeSpec("async", ConsistencyConfig::ASYNC, 1);
  spec.mutable_consistency()->set_max_staleness(2);
  ASSERT_TRUE(client_->CreateJob(spec).ok());
  std::vector<std::unique_ptr<WorkerSession>> sessions = Sessions(spec);
  ASSERT_EQ(sessions.size(), 1u);
  std::vector<float> values(16), gradient(16, 1.0f);
  ASSERT_TRUE(sessions[0]->Pull({}, {{"w", absl::MakeSpan(values)}}).ok());

  // Each push names the version it read: staleness = version now - read version; beyond
  // max_staleness 2 it is dropped.
  struct Push {
    int64_t read;
    int64_t staleness;
    bool dropped;
  };
  const std::vector<Push> script = {{0, 0, false}, {0, 1, false}, {0, 2, false}, {0, 3, true},
                                    {3, 0, false}, {1, 3, true},  {2, 2, false}};
  for (size_t i = 0; i < script.size(); ++i) {
    WorkerSession::PushOptions options;
    options.read_versions = {script[i].read};
    absl::StatusOr<std::vector<PushResponse>> pushed =
        sessions[0]->Push(options, {{"w", absl::MakeConstSpan(gradient)}});
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    SCOPED_TRACE(absl::StrCat("push ", i, ": ", (*pushed)[0].ShortDebugString()));
    EXPECT_EQ((*pushed)[0].staleness(), script[i].staleness);
    EXPECT_EQ((*pushed)[0].outcome(),
              script[i].dropped ? PushResponse::DROPPED : PushResponse::APPLIED);
  }
  std::vector<float> bad(16, 1.0f);
  bad[3] = std::nanf("");
  EXPECT_FALSE(sessions[0]->Push({}, {{"w", absl::MakeConstSpan(bad)}}).ok());

  std::map<std::string, double> samples = Scrape();
  EXPECT_EQ(Value(samples, R"(ps_jobs{shard="0"})"), 1);
  EXPECT_EQ(Value(samples, Series("ps_job_version", "async")), 5);
  EXPECT_EQ(samples.count(Series("ps_job_sync_step", "async")), 0u);
  EXPECT_EQ(Value(samples, Series("ps_job_updates_applied_total", "async")), 5);
  EXPECT_EQ(Value(samples, Series("ps_job_gradients_applied_total", "async")), 5);
  EXPECT_EQ(Value(samples,
                  Series("ps_job_gradients_dropped_total", "async", R"(,reason="max_staleness")")),
            2);
  EXPECT_EQ(
      Value(samples, Series("ps_job_pushes_rejected_total", "async", R"(,reason="non_finite")")),
      1);
  EXPECT_EQ(Value(samples, Series("ps_job_duplicate_pushes_total", "async")), 0);
  // Applied stalenesses 0, 1, 2, 0, 2.
  const std::map<std::string, double> buckets = {
      {"0", 2}, {"1", 3},  {"2", 5},  {"3", 5},  {"4", 5},  {"5", 5},  {"6", 5},  {"7", 5},
      {"8", 5}, {"12", 5}, {"16", 5}, {"24", 5}, {"32", 5}, {"48", 5}, {"62", 5}, {"+Inf", 5}};
  for (const auto& [le, count] : buckets) {
    EXPECT_EQ(Value(samples,
                    Series("ps_job_staleness_bucket", "async", absl::StrCat(",le=\"", le, "\""))),
              count)
        << "le=" << le;
    EXPECT_EQ(Value(samples, Series("ps_job_worker_staleness_bucket", "async",
                                    absl::StrCat(",worker=\"0\",le=\"", le, "\""))),
              count)
        << "le=" << le;
  }
  EXPECT_EQ(Value(samples, Series("ps_job_staleness_sum", "async")), 5);
  EXPECT_EQ(Value(samples, Series("ps_job_staleness_count", "async")), 5);
  EXPECT_EQ(
      Value(samples, Series("ps_job_worker_gradients_applied_total", "async", R"(,worker="0")")),
      5);

  // The calls: one CreateJob (after the ListJobs that asks where moved shards are), one Pull,
  // 7 pushes answered OK and the non-finite one refused.
  EXPECT_EQ(Value(samples, R"(ps_rpcs_total{method="ListJobs",code="OK"})"), 1);
  EXPECT_EQ(Value(samples, R"(ps_rpcs_total{method="CreateJob",code="OK"})"), 1);
  EXPECT_EQ(Value(samples, R"(ps_rpcs_total{method="Pull",code="OK"})"), 1);
  EXPECT_EQ(Value(samples, R"(ps_rpcs_total{method="Push",code="OK"})"), 7);
  EXPECT_EQ(Value(samples, R"(ps_rpcs_total{method="Push",code="INVALID_ARGUMENT"})"), 1);
  EXPECT_EQ(Value(samples, R"(ps_rpc_duration_seconds_count{method="Push"})"), 8);
  EXPECT_EQ(Value(samples, R"(ps_rpc_duration_seconds_bucket{method="Push",le="+Inf"})"), 8);
  EXPECT_EQ(Value(samples, R"(ps_rpc_duration_seconds_bucket{method="Push",le="60"})"), 8);
  int rpc_series = 0;
  for (const auto& [series, value] : samples) rpc_series += series.rfind("ps_rpcs_total", 0) == 0;
  EXPECT_EQ(rpc_series, 5);
  // The same calls, of this job (CreateJob is not one of its requests).
  EXPECT_EQ(Value(samples, Series("ps_job_requests_total", "async", R"(,method="Pull",code="OK")")),
            1);
  EXPECT_EQ(Value(samples, Series("ps_job_requests_total", "async", R"(,method="Push",code="OK")")),
            7);
  EXPECT_EQ(Value(samples, Series("ps_job_requests_total", "async",
                                  R"(,method="Push",code="INVALID_ARGUMENT")")),
            1);
  // 8 pushes of 16 floats each and their headers in; the pull's 16 floats and 7 answers out.
  const double received = Value(samples, Series("ps_job_received_bytes_total", "async"));
  EXPECT_GE(received, 8 * 64);
  EXPECT_LE(received, 8 * (64 + 200));
  const double sent = Value(samples, Series("ps_job_sent_bytes_total", "async"));
  EXPECT_GE(sent, 64 + 7 * 2);
  EXPECT_LE(sent, 64 + 100 + 7 * 50);
}

TEST_F(MetricsTest, SyncJobCountsStepsAndStaleStepDropsExactly) {
  constexpr int kSteps = 4;
  ParameterSpec spec = MakeSpec("sync", ConsistencyConfig::SYNC, 3);
  spec.mutable_consistency()->set_replicas_to_aggregate(2);
  ASSERT_TRUE(client_->CreateJob(spec).ok());
  std::vector<std::unique_ptr<WorkerSession>> sessions = Sessions(spec);
  ASSERT_EQ(sessions.size(), 3u);
  std::vector<float> values(16), gradient(16, 1.0f);
  // Each step the first two pushes make the update and the third is dropped as stale; worker
  // (step + 2) % 3 is the late one.
  for (int step = 0; step < kSteps; ++step) {
    WorkerSession::PullOptions pull;
    pull.step = step;
    for (auto& session : sessions) {
      ASSERT_TRUE(session->Pull(pull, {{"w", absl::MakeSpan(values)}}).ok());
    }
    WorkerSession::PushOptions push;
    push.step = step;
    for (int k = 0; k < 3; ++k) {
      ASSERT_TRUE(
          sessions[(step + k) % 3]->Push(push, {{"w", absl::MakeConstSpan(gradient)}}).ok());
    }
  }

  std::map<std::string, double> samples = Scrape();
  EXPECT_EQ(Value(samples, Series("ps_job_version", "sync")), kSteps);
  EXPECT_EQ(Value(samples, Series("ps_job_sync_step", "sync")), kSteps);
  EXPECT_EQ(Value(samples, Series("ps_job_updates_applied_total", "sync")), kSteps);
  EXPECT_EQ(Value(samples, Series("ps_job_gradients_applied_total", "sync")), 2 * kSteps);
  EXPECT_EQ(
      Value(samples, Series("ps_job_gradients_dropped_total", "sync", R"(,reason="stale_step")")),
      kSteps);
  EXPECT_EQ(Value(samples, Series("ps_job_workers_waited_for", "sync")), 3);
  for (int worker = 0; worker < 3; ++worker) {
    EXPECT_EQ(Value(samples, Series("ps_job_waiting_for_worker", "sync",
                                    absl::StrCat(",worker=\"", worker, "\""))),
              1);
  }
  EXPECT_EQ(Value(samples, Series("ps_job_parked_pulls", "sync")), 0);
  EXPECT_EQ(Value(samples, Series("ps_job_staleness_bucket", "sync", R"(,le="0")")), 2 * kSteps);
  EXPECT_EQ(Value(samples, Series("ps_job_staleness_bucket", "sync", R"(,le="+Inf")")), 2 * kSteps);
  EXPECT_EQ(Value(samples, Series("ps_job_staleness_sum", "sync")), 0);
  // Late: worker 2 at step 0, 0 at 1, 1 at 2, 2 at 3.
  const int applied[3] = {3, 3, 2};
  for (int worker = 0; worker < 3; ++worker) {
    const std::string label = absl::StrCat(",worker=\"", worker, "\"");
    EXPECT_EQ(Value(samples, Series("ps_job_worker_gradients_applied_total", "sync", label)),
              applied[worker])
        << "worker " << worker;
    EXPECT_EQ(Value(samples, Series("ps_job_worker_staleness_count", "sync", label)),
              applied[worker])
        << "worker " << worker;
  }
  // Step 4 with worker 1's gradient: it is no longer waited for.
  WorkerSession::PushOptions push;
  push.step = kSteps;
  ASSERT_TRUE(sessions[1]->Push(push, {{"w", absl::MakeConstSpan(gradient)}}).ok());
  samples = Scrape();
  EXPECT_EQ(Value(samples, Series("ps_job_workers_waited_for", "sync")), 2);
  EXPECT_EQ(samples.count(Series("ps_job_waiting_for_worker", "sync", ",worker=\"1\"")), 0u);
  EXPECT_EQ(Value(samples, Series("ps_job_waiting_for_worker", "sync", ",worker=\"2\"")), 1);
}

TEST_F(MetricsTest, SyncBarrierWaitIsTimedOnTheShardAndReportedToTheWorker) {
  ParameterSpec spec = MakeSpec("barrier", ConsistencyConfig::SYNC, 2);
  ASSERT_TRUE(client_->CreateJob(spec).ok());
  std::vector<std::unique_ptr<WorkerSession>> sessions = Sessions(spec);
  ASSERT_EQ(sessions.size(), 2u);
  std::vector<float> values(16), late_values(16), gradient(16, 1.0f);
  WorkerSession::PushOptions push;  // Step 0.
  ASSERT_TRUE(sessions[0]->Push(push, {{"w", absl::MakeConstSpan(gradient)}}).ok());
  // Worker 0 waits for step 1, which needs worker 1's gradient.
  absl::StatusOr<WorkerSession::PullResult> parked;
  std::thread waiting([&] {
    WorkerSession::PullOptions pull;
    pull.step = 1;
    parked = sessions[0]->Pull(pull, {{"w", absl::MakeSpan(values)}});
  });
  // Once the shard holds the pull parked (the thread may take a moment to send it), it waits
  // at least kWait.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Value(Scrape(), Series("ps_job_parked_pulls", "barrier")) != 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  constexpr absl::Duration kWait = absl::Milliseconds(300);
  absl::SleepFor(kWait);
  std::map<std::string, double> samples = Scrape();
  EXPECT_EQ(Value(samples, Series("ps_job_parked_pulls", "barrier")), 1);
  EXPECT_GE(Value(samples, Series("ps_job_oldest_parked_pull_seconds", "barrier")),
            absl::ToDoubleSeconds(kWait) - 0.05);
  EXPECT_EQ(Value(samples, Series("ps_job_park_seconds_count", "barrier")), 0);
  ASSERT_TRUE(sessions[1]->Push(push, {{"w", absl::MakeConstSpan(gradient)}}).ok());
  waiting.join();
  ASSERT_TRUE(parked.ok()) << parked.status();
  EXPECT_EQ(parked->step, 1);
  EXPECT_GE(parked->parked, kWait);
  EXPECT_LT(parked->parked, absl::Seconds(10));
  // A pull that need not wait reports no wait.
  WorkerSession::PullOptions pull;
  pull.step = 1;
  absl::StatusOr<WorkerSession::PullResult> at_once =
      sessions[1]->Pull(pull, {{"w", absl::MakeSpan(late_values)}});
  ASSERT_TRUE(at_once.ok()) << at_once.status();
  EXPECT_EQ(at_once->parked, absl::ZeroDuration());

  samples = Scrape();
  EXPECT_EQ(Value(samples, Series("ps_job_parked_pulls", "barrier")), 0);
  EXPECT_EQ(Value(samples, Series("ps_job_oldest_parked_pull_seconds", "barrier")), 0);
  EXPECT_EQ(Value(samples, Series("ps_job_park_seconds_count", "barrier")), 1);
  EXPECT_GE(Value(samples, Series("ps_job_park_seconds_sum", "barrier")),
            absl::ToDoubleSeconds(kWait));
  EXPECT_EQ(Value(samples, Series("ps_job_park_seconds_bucket", "barrier", R"(,le="0.1")")), 0);
  EXPECT_EQ(Value(samples, Series("ps_job_park_seconds_bucket", "barrier", R"(,le="+Inf")")), 1);
  EXPECT_EQ(Value(samples, Series("ps_job_requests_total", "barrier", R"(,method="Pull",code="OK")")),
            2);
}

TEST_F(MetricsTest, NoJobsAndNoCallsIsTheJobCountAndAnIdleByteBudgetBesideTheProcess) {
  std::map<std::string, double> samples = Scrape();
  EXPECT_GT(Value(samples, "process_resident_memory_bytes"), 0);
  EXPECT_GT(Value(samples, "process_cpu_seconds_total"), 0);
  for (auto it = samples.begin(); it != samples.end();) {
    it = it->first.rfind("process_", 0) == 0 ? samples.erase(it) : std::next(it);
  }
  // The budget's default is a quarter of this machine's memory.
  EXPECT_GT(Value(samples, R"(ps_byte_budget_bytes{shard="0"})"), 0);
  samples.erase(R"(ps_byte_budget_bytes{shard="0"})");
  EXPECT_EQ(samples, (std::map<std::string, double>{
                         {R"(ps_jobs{shard="0"})", 0},
                         {R"(ps_shared_memory_bytes{shard="0"})", 0},
                         {R"(ps_shared_memory_segments{shard="0"})", 0},
                         {R"(ps_bulk_streams{shard="0"})", 0},
                         {R"(ps_bulk_frames_total{shard="0"})", 0},
                         {R"(ps_bulk_bytes_total{shard="0"})", 0},
                         {R"(ps_bulk_push_frames_total{shard="0"})", 0},
                         {R"(ps_bulk_push_bytes_total{shard="0"})", 0},
                         {R"(ps_byte_budget_buffer_bytes{shard="0"})", 0},
                         {R"(ps_byte_budget_request_bytes{shard="0"})", 0},
                         {R"(ps_byte_budget_peak_bytes{shard="0"})", 0},
                         {R"(ps_byte_budget_waiting_calls{shard="0"})", 0},
                         {R"(ps_byte_budget_clients{shard="0"})", 0},
                         {R"(ps_byte_budget_waits_total{shard="0"})", 0},
                         {R"(ps_byte_budget_wait_timeouts_total{shard="0"})", 0},
                         {R"(ps_byte_budget_wait_seconds_total{shard="0"})", 0},
                     }));
}

// A whole push's buffer takes over the room reserved for it: the budget counts its request and
// its buffer once each (the reservation and the buffer both, before).
TEST_F(MetricsTest, TheByteBudgetCountsAWholePushsBufferOnce) {
  constexpr int64_t kFloats = 256 * 1024;  // 1 MiB: one chunk, a whole push.
  ParameterSpec spec = MakeSpec("whole", ConsistencyConfig::ASYNC, 1);
  spec.mutable_variables(0)->set_shape(0, kFloats);
  spec.mutable_learning_rate()->set_base(0.001f);
  ASSERT_TRUE(client_->CreateJob(spec).ok());
  std::vector<std::unique_ptr<WorkerSession>> sessions = Sessions(spec);
  ASSERT_EQ(sessions.size(), 1u);
  std::vector<float> values(kFloats), gradient(kFloats, 1.0f);
  ASSERT_TRUE(sessions[0]->Pull({}, {{"w", absl::MakeSpan(values)}}).ok());
  ASSERT_TRUE(sessions[0]->Push({}, {{"w", absl::MakeConstSpan(gradient)}}).ok());
  const double bytes = kFloats * 4.0;
  const double peak = Value(Scrape(), R"(ps_byte_budget_peak_bytes{shard="0"})");
  EXPECT_GE(peak, 2 * bytes);                // The request and the buffer, at once.
  EXPECT_LT(peak, 2 * bytes + 64 * 1024.0);  // With the request's header, not a third copy.
}

TEST_F(MetricsTest, TaskInfoNamesTheMetricsPort) {
  std::unique_ptr<Task::Stub> stub = Task::NewStub(
      grpc::CreateChannel(cluster_->addresses()[0], grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  TaskInfo info;
  grpc::Status status = stub->GetTaskInfo(&context, TaskInfoRequest(), &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(info.job(), "ps");
  EXPECT_EQ(info.index(), 0);
  EXPECT_EQ(info.metrics_port(), cluster_->server(0).metrics_port());
}

}  // namespace
}  // namespace ps
