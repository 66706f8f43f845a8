// WorkerService in this process, reached over gRPC, against an in-process ps.
#include "worker/worker_service.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/cluster_spec.h"
#include "common/net/grpc_deadline.h"
#include "common/net/grpc_server.h"
#include "common/job/job_schema.h"
#include "common/metrics/metrics.h"
#include "proto/worker_service.grpc.pb.h"
#include "server/testing/in_process_ps_cluster.h"
#include "worker/compute/cpu_threads.h"

namespace ps {
namespace {

// A cluster of `ps`'s one task and one worker (which the test serves in process, so its
// address is never dialed).
absl::StatusOr<ClusterSpec> OneWorkerClusterOf(const InProcessPsCluster& ps) {
  return ClusterSpec::Parse(
      absl::StrCat(R"({"ps": [")", ps.addresses()[0], R"("], "worker": ["127.0.0.1:1"]})"),
      "test");
}

// An in-process ps of one task, the worker's compute on one thread; null (a test failure) if it
// cannot start.
std::unique_ptr<InProcessPsCluster> StartOnePs() {
  SetCpuComputeThreads(1);
  absl::StatusOr<std::unique_ptr<InProcessPsCluster>> ps =
      InProcessPsCluster::Start(InProcessPsClusterOptions());
  EXPECT_TRUE(ps.ok()) << ps.status();
  return ps.ok() ? *std::move(ps) : nullptr;
}

JobSpec SmallJob(const std::string& id) {
  JobSpec spec;
  spec.set_job_id(id);
  spec.set_run_id("run-1");
  spec.mutable_model()->set_kind(ModelSpec::SOFTMAX_REGRESSION);
  SyntheticData* data = spec.mutable_data()->mutable_synthetic();
  data->set_kind(SyntheticData::GAUSSIAN_MIXTURE);
  data->set_num_examples(200);
  data->set_feature_dim(8);
  data->set_num_classes(3);
  spec.mutable_learning_rate()->set_base(0.1f);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::SYNC);
  spec.set_batch_size(8);
  spec.set_steps(5);
  return spec;
}

// The worker's jobs as its status lists them: "id STATE".
std::vector<std::string> Jobs(Worker::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(absl::Seconds(5)));
  WorkerStatus status;
  EXPECT_TRUE(stub.GetStatus(&context, WorkerStatusRequest(), &status).ok());
  std::vector<std::string> jobs;
  for (const JobProgress& job : status.jobs()) {
    jobs.push_back(absl::StrCat(job.job_id(), " ", JobProgress::State_Name(job.state())));
  }
  return jobs;
}

// A WorkerService served on a free port of 127.0.0.1, and a stub that reaches it.
class ServedWorker {
 public:
  explicit ServedWorker(const WorkerServiceOptions& options) : service_(options) {
    absl::StatusOr<StartedServer> started = StartGrpcServer("127.0.0.1:0", {&service_}, 64 << 20);
    EXPECT_TRUE(started.ok()) << started.status();
    if (!started.ok()) return;
    server_ = std::move(started->server);
    stub_ = Worker::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", started->bound_port),
                                                grpc::InsecureChannelCredentials()));
  }
  ~ServedWorker() {
    if (server_ != nullptr) server_->Shutdown(GrpcDeadline(absl::Seconds(1)));
  }

  Worker::Stub& stub() { return *stub_; }
  WorkerService& service() { return service_; }
  grpc::Status StartJob(const StartJobRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(GrpcDeadline(absl::Seconds(5)));
    StartJobResponse response;
    return stub_->StartJob(&context, request, &response);
  }

 private:
  WorkerService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Worker::Stub> stub_;
};

TEST(WorkerServiceTest, AJobThatEndedIsForgottenAfterTheRetention) {
  std::unique_ptr<InProcessPsCluster> ps = StartOnePs();
  ASSERT_NE(ps, nullptr);
  absl::StatusOr<ClusterSpec> cluster = OneWorkerClusterOf(*ps);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ServedWorker worker(WorkerServiceOptions{
      *cluster, 0, Device{Device::Kind::kCpu, -1, "cpu"}, {}, absl::Milliseconds(300), {}});

  StartJobRequest request;
  *request.mutable_spec() = SmallJob("short");
  *request.mutable_cluster() = cluster->ToProto();
  grpc::Status started = worker.StartJob(request);
  ASSERT_TRUE(started.ok()) << started.error_message();

  // DONE, listed for a while, then forgotten.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::vector<std::string> jobs;
  while ((jobs = Jobs(worker.stub())) != std::vector<std::string>{"short DONE"} &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(jobs, std::vector<std::string>{"short DONE"});
  while (!(jobs = Jobs(worker.stub())).empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(jobs.empty());
}

// /metrics' worker families (ps_worker --metrics_port): a finished job's last progress.
TEST(WorkerServiceTest, MetricsShowAFinishedJobsProgress) {
  std::unique_ptr<InProcessPsCluster> ps = StartOnePs();
  ASSERT_NE(ps, nullptr);
  absl::StatusOr<ClusterSpec> cluster = OneWorkerClusterOf(*ps);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ServedWorker worker(WorkerServiceOptions{
      *cluster, 0, Device{Device::Kind::kCpu, -1, "cpu"}, {}, absl::Hours(1), {}});
  StartJobRequest request;
  *request.mutable_spec() = SmallJob("measured");
  *request.mutable_cluster() = cluster->ToProto();
  grpc::Status started = worker.StartJob(request);
  ASSERT_TRUE(started.ok()) << started.error_message();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (Jobs(worker.stub()) != std::vector<std::string>{"measured DONE"} &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }

  MetricsWriter writer;
  worker.service().WriteMetrics(&writer);
  const std::string& page = writer.text();
  EXPECT_NE(page.find("# TYPE ps_worker_steps_total counter\n"
                      "ps_worker_steps_total{job_id=\"measured\",worker=\"0\"} 5\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("ps_worker_job_running{job_id=\"measured\",worker=\"0\"} 0\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("ps_worker_examples_per_second{job_id=\"measured\",worker=\"0\"} "),
            std::string::npos)
      << page;
  for (const char* family : {"ps_worker_pull_seconds_total", "ps_worker_push_seconds_total",
                             "ps_worker_wait_seconds_total", "ps_worker_device_memory_bytes"}) {
    EXPECT_NE(page.find(absl::StrCat(family, "{job_id=\"measured\",worker=\"0\"} ")),
              std::string::npos)
        << family;
  }
}

// A job naming a data file outside the worker's --data_root directories is refused before it
// starts, and the refusal says nothing of the file.
TEST(WorkerServiceTest, AJobReadingOutsideTheDataRootsIsRefused) {
  const std::string roots_dir = std::string(std::getenv("TEST_TMPDIR")) + "/roots";
  std::filesystem::create_directories(roots_dir + "/data");
  std::ofstream(roots_dir + "/secret") << "SECRET-TOKEN-xyz123\n";
  absl::StatusOr<ClusterSpec> cluster =
      ClusterSpec::Parse(R"({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]})", "test");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<DataRoots> roots = DataRoots::Create({roots_dir + "/data"});
  ASSERT_TRUE(roots.ok()) << roots.status();
  ServedWorker worker(WorkerServiceOptions{
      *cluster, 0, Device{Device::Kind::kCpu, -1, "cpu"}, {}, absl::Hours(1), *roots});

  StartJobRequest request;
  *request.mutable_spec() = SmallJob("outside");
  request.mutable_spec()->mutable_data()->set_csv(roots_dir + "/data/../secret");
  *request.mutable_cluster() = cluster->ToProto();
  grpc::Status refused = worker.StartJob(request);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), ::testing::HasSubstr("is outside this worker's data"));
  EXPECT_THAT(refused.error_message(), ::testing::Not(::testing::HasSubstr("SECRET")));
  EXPECT_TRUE(Jobs(worker.stub()).empty()) << "the refused job must not be listed";
}

// A program job (JobSpec.program) runs the submitter's code on the worker's host: a daemon
// started without --allow_programs refuses it before anything runs.
TEST(WorkerServiceTest, AProgramJobIsRefusedUnlessTheDaemonAllowsPrograms) {
  absl::StatusOr<ClusterSpec> cluster =
      ClusterSpec::Parse(R"({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]})", "test");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string marker = std::string(std::getenv("TEST_TMPDIR")) + "/program_ran";
  ServedWorker worker(WorkerServiceOptions{
      *cluster, 0, Device{Device::Kind::kCpu, -1, "cpu"}, {}, absl::Hours(1), {}});
  StartJobRequest request;
  JobSpec& spec = *request.mutable_spec();
  spec.set_job_id("program");
  spec.set_run_id("run-1");
  for (const std::string& arg : std::vector<std::string>{"/bin/sh", "-c", "touch " + marker}) {
    spec.mutable_program()->add_argv(arg);
  }
  spec.mutable_learning_rate()->set_base(0.1f);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  *request.mutable_cluster() = cluster->ToProto();
  grpc::Status refused = worker.StartJob(request);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), ::testing::HasSubstr("--allow_programs"));
  EXPECT_TRUE(Jobs(worker.stub()).empty());
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the refused program ran";
}

// Counts that size what the worker allocates or runs are checked before the job starts.
TEST(WorkerServiceTest, CountsBeyondTheirBoundsAreRefusedBeforeTheJobStarts) {
  absl::StatusOr<ClusterSpec> cluster =
      ClusterSpec::Parse(R"({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]})", "test");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ServedWorker worker(WorkerServiceOptions{
      *cluster, 0, Device{Device::Kind::kCpu, -1, "cpu"}, {}, absl::Hours(1), {}});

  StartJobRequest request;
  *request.mutable_spec() = SmallJob("huge_batch");
  request.mutable_spec()->set_batch_size(kMaxBatchSize + 1);
  *request.mutable_cluster() = cluster->ToProto();
  grpc::Status refused = worker.StartJob(request);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), ::testing::HasSubstr("batch_size is 1048577"));

  *request.mutable_spec() = SmallJob("before_the_start");
  request.set_first_step(-1);
  refused = worker.StartJob(request);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused.error_message(),
            "first_step is -1, incarnation 0 and elapsed_s 0: each must be >= 0 (elapsed_s under "
            "1e9)");
  request.set_first_step(0);
  request.set_elapsed_s(std::nan(""));
  refused = worker.StartJob(request);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), ::testing::HasSubstr("elapsed_s nan"));
  EXPECT_TRUE(Jobs(worker.stub()).empty()) << "refused jobs must not be listed";
}

// StopJob with leave (psctl remove-worker) and RejoinJob (psctl add-worker) on worker:1 of two.
TEST(WorkerServiceTest, AWorkerLeavesARunningJobAndIsAskedBack) {
  std::unique_ptr<InProcessPsCluster> ps = StartOnePs();
  ASSERT_NE(ps, nullptr);
  absl::StatusOr<ClusterSpec> cluster = ClusterSpec::Parse(
      absl::StrCat(R"({"ps": [")", ps->addresses()[0],
                   R"("], "worker": ["127.0.0.1:1", "127.0.0.1:2"]})"),
      "test");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ServedWorker worker(WorkerServiceOptions{
      *cluster, 1, Device{Device::Kind::kCpu, -1, "cpu"}, {}, absl::Hours(1), {}});
  StartJobRequest request;
  *request.mutable_spec() = SmallJob("long");
  request.mutable_spec()->mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  request.mutable_spec()->set_steps(100000000);
  request.mutable_spec()->set_min_workers(1);
  request.mutable_spec()->set_worker_lease_s(2);
  *request.mutable_cluster() = cluster->ToProto();
  grpc::Status started = worker.StartJob(request);
  ASSERT_TRUE(started.ok()) << started.error_message();

  auto call_stop = [&](bool leave, int others) {
    grpc::ClientContext context;
    context.set_deadline(GrpcDeadline(absl::Seconds(5)));
    StopJobRequest stop;
    stop.set_job_id("long");
    stop.set_leave(leave);
    stop.set_others_running(others);
    StopJobResponse response;
    return worker.stub().StopJob(&context, stop, &response);
  };
  auto call_rejoin = [&](const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(GrpcDeadline(absl::Seconds(5)));
    RejoinJobRequest rejoin;
    rejoin.set_job_id(id);
    RejoinJobResponse response;
    return worker.stub().RejoinJob(&context, rejoin, &response);
  };
  auto await_jobs = [&](const std::vector<std::string>& want) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    std::vector<std::string> jobs;
    while ((jobs = Jobs(worker.stub())) != want && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    return jobs;
  };

  // Running: nothing to take back.
  grpc::Status refused = call_rejoin("long");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), ::testing::HasSubstr("did not leave job \"long\" (RUNNING)"));
  EXPECT_EQ(call_rejoin("unknown").error_code(), grpc::StatusCode::NOT_FOUND);
  // Alone in the job, it may not leave: the job would have no worker (and it keeps running).
  refused = call_stop(/*leave=*/true, /*others=*/0);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(),
              ::testing::HasSubstr("0 other workers would be left running it, and the job needs "
                                   "at least 1 (min_workers)"));
  EXPECT_EQ(Jobs(worker.stub()), std::vector<std::string>{"long RUNNING"});

  ASSERT_TRUE(call_stop(/*leave=*/true, /*others=*/1).ok());
  EXPECT_EQ(await_jobs({"long LEFT"}), std::vector<std::string>{"long LEFT"});
  // Gone already: a second leave is refused, and says why.
  refused = call_stop(/*leave=*/true, /*others=*/1);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), ::testing::HasSubstr("no longer running there"));

  auto rejoin_asked = [&] {
    grpc::ClientContext context;
    context.set_deadline(GrpcDeadline(absl::Seconds(5)));
    WorkerStatus status;
    EXPECT_TRUE(worker.stub().GetStatus(&context, WorkerStatusRequest(), &status).ok());
    return status.jobs_size() == 1 && status.jobs(0).rejoin_asked();
  };
  EXPECT_FALSE(rejoin_asked());
  ASSERT_TRUE(call_rejoin("long").ok());
  EXPECT_TRUE(rejoin_asked());
  ASSERT_TRUE(call_rejoin("long").ok()) << "asking twice is asking once";

  // psctl then starts it again as the worker's next incarnation, replacing the record.
  request.set_incarnation(1);
  started = worker.StartJob(request);
  ASSERT_TRUE(started.ok()) << started.error_message();
  EXPECT_EQ(await_jobs({"long RUNNING"}), std::vector<std::string>{"long RUNNING"});
  EXPECT_FALSE(rejoin_asked());
  ASSERT_TRUE(call_stop(/*leave=*/false, /*others=*/0).ok());
  EXPECT_EQ(await_jobs({"long STOPPED"}), std::vector<std::string>{"long STOPPED"});
  refused = call_rejoin("long");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << "stopped, not left";
}

// The chief evaluates the model and ends the job: it cannot leave.
TEST(WorkerServiceTest, TheChiefCannotLeave) {
  std::unique_ptr<InProcessPsCluster> ps = StartOnePs();
  ASSERT_NE(ps, nullptr);
  absl::StatusOr<ClusterSpec> cluster = OneWorkerClusterOf(*ps);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ServedWorker worker(WorkerServiceOptions{
      *cluster, 0, Device{Device::Kind::kCpu, -1, "cpu"}, {}, absl::Hours(1), {}});
  StartJobRequest request;
  *request.mutable_spec() = SmallJob("long");
  request.mutable_spec()->set_steps(100000000);
  *request.mutable_cluster() = cluster->ToProto();
  ASSERT_TRUE(worker.StartJob(request).ok());
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(absl::Seconds(5)));
  StopJobRequest stop;
  stop.set_job_id("long");
  stop.set_leave(true);
  stop.set_others_running(5);
  StopJobResponse response;
  grpc::Status refused = worker.stub().StopJob(&context, stop, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), ::testing::HasSubstr("it is the chief"));
  EXPECT_EQ(Jobs(worker.stub()), std::vector<std::string>{"long RUNNING"});
}

}  // namespace
}  // namespace ps
