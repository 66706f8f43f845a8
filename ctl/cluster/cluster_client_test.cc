#include "ctl/cluster/cluster_client.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/net/proto_byte_buffer.h"
#include "common/process/subprocess.h"
#include "common/net/testing/generic_test_server.h"
#include "gtest/gtest.h"
#include "proto/health.pb.h"

namespace ps {
namespace {

using ::grpc::health::v1::HealthCheckResponse;

// A daemon faked by method: answers with the message `answers` holds for it, or fails with
// NOT_FOUND "no such job" when it holds none; a slow one answers after a second.
class FakeDaemon {
 public:
  explicit FakeDaemon(std::map<std::string, grpc::ByteBuffer> answers, bool slow = false)
      : answers_(std::move(answers)),
        slow_(slow),
        server_([this](const std::string& method, const grpc::ByteBuffer&,
                       grpc::ByteBuffer* response) {
          if (slow_) absl::SleepFor(absl::Seconds(1));
          auto it = answers_.find(method);
          if (it == answers_.end()) {
            return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such job");
          }
          *response = it->second;
          return grpc::Status::OK;
        }) {}
  std::string address() const { return server_.address(); }

 private:
  const std::map<std::string, grpc::ByteBuffer> answers_;
  const bool slow_;
  GenericTestServer server_;
};

HealthCheckResponse Serving() {
  HealthCheckResponse response;
  response.set_status(HealthCheckResponse::SERVING);
  return response;
}

class ClusterClientTest : public ::testing::Test {
 protected:
  ClusterClientTest()
      : ps_({{"/ps.ParameterServer/ListJobs", SerializeToByteBuffer(Jobs())},
             {"/ps.ParameterServer/DeleteJob", SerializeToByteBuffer(DeleteJobResponse())},
             {"/grpc.health.v1.Health/Check", SerializeToByteBuffer(Serving())}}),
        worker_({{"/ps.Worker/StartJob", SerializeToByteBuffer(Started())},
                 {"/ps.Worker/GetStatus", SerializeToByteBuffer(Status())},
                 {"/ps.Worker/WatchJob", SerializeToByteBuffer(Progress())}}),
        slow_worker_({{"/ps.Worker/GetStatus", SerializeToByteBuffer(Status())}}, true) {}

  static ListJobsResponse Jobs() {
    ListJobsResponse jobs;
    jobs.add_job_ids("a");
    return jobs;
  }
  static StartJobResponse Started() {
    StartJobResponse started;
    started.set_device("cpu");
    return started;
  }
  static WorkerStatus Status() {
    WorkerStatus status;
    status.set_worker(7);
    return status;
  }
  static JobProgress Progress() {
    JobProgress progress;
    progress.set_step(3);
    return progress;
  }

  std::unique_ptr<ClusterClient> Connect(std::vector<std::string> workers,
                                         ClusterClientOptions options = {}) {
    std::string json = absl::StrCat(R"({"ps": [")", ps_.address(), R"("], "worker": [)");
    for (size_t i = 0; i < workers.size(); ++i) {
      absl::StrAppend(&json, i > 0 ? ", " : "", "\"", workers[i], "\"");
    }
    absl::StatusOr<ClusterSpec> cluster = ClusterSpec::Parse(absl::StrCat(json, "]}"), "test");
    EXPECT_TRUE(cluster.ok()) << cluster.status();
    absl::StatusOr<std::unique_ptr<ClusterClient>> client =
        ClusterClient::Create(*cluster, options);
    EXPECT_TRUE(client.ok()) << client.status();
    return *std::move(client);
  }

  FakeDaemon ps_;
  FakeDaemon worker_;
  FakeDaemon slow_worker_;
};

TEST_F(ClusterClientTest, ReachesEachWorkerDaemonsCalls) {
  std::unique_ptr<ClusterClient> client = Connect({worker_.address()});
  absl::StatusOr<StartJobResponse> started = client->StartJob(0, StartJobRequest());
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->device(), "cpu");
  absl::StatusOr<WorkerStatus> status = client->GetWorkerStatus(0);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->worker(), 7);
  std::vector<int64_t> steps;
  grpc::ClientContext context;
  EXPECT_TRUE(client
                  ->WatchJob(0, "a", &context,
                             [&steps](const JobProgress& progress) {
                               steps.push_back(progress.step());
                             })
                  .ok());
  EXPECT_EQ(steps, std::vector<int64_t>{3});
}

TEST_F(ClusterClientTest, ErrorsKeepTheCodeAndNameTheTaskAndCall) {
  std::unique_ptr<ClusterClient> client = Connect({slow_worker_.address(), worker_.address()});
  absl::Status status = client->StopJob(1, "a");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            absl::StrCat("worker:1 (", worker_.address(), "): StopJob: no such job"));
  absl::Status stats = client->GetJobStats(0, "a").status();
  EXPECT_EQ(stats.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(stats.message(), absl::StrCat("ps:0 (", ps_.address(), "): GetJobStats: no such job"));
  // What reports that name the task themselves show.
  EXPECT_EQ(ClusterClient::Detail(status), "no such job");
  EXPECT_EQ(ClusterClient::Detail(absl::NotFoundError("a message of another kind")),
            "a message of another kind");
}

TEST_F(ClusterClientTest, ReachesThePsTasksOneByOneAndAllAtOnce) {
  std::unique_ptr<ClusterClient> client = Connect({worker_.address()});
  absl::StatusOr<ListJobsResponse> jobs = client->ListJobs(0);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->job_ids(0), "a");
  EXPECT_TRUE(client->ps()->DeleteJob("a").ok());
  EXPECT_EQ(client->ps()->num_ps(), 1);
}

TEST_F(ClusterClientTest, ChecksHealthAndConnections) {
  absl::StatusOr<int> unused = PickUnusedPort();
  ASSERT_TRUE(unused.ok());
  ClusterClientOptions options;
  options.status_timeout = absl::Milliseconds(300);
  std::unique_ptr<ClusterClient> client =
      Connect({worker_.address(), absl::StrCat("127.0.0.1:", *unused)}, options);
  absl::StatusOr<HealthCheckResponse::ServingStatus> health = client->CheckHealth(kPsJob, 0);
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, HealthCheckResponse::SERVING);
  EXPECT_TRUE(client->WaitForConnected(kWorkerJob, 0));
  EXPECT_FALSE(client->WaitForConnected(kWorkerJob, 1));
  EXPECT_EQ(client->CheckHealth(kWorkerJob, 0).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClusterClientTest, EveryCallHasADeadline) {
  ClusterClientOptions options;
  options.status_timeout = absl::Milliseconds(100);
  std::unique_ptr<ClusterClient> client = Connect({slow_worker_.address()}, options);
  absl::Status status = client->GetWorkerStatus(0).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_EQ(status.message().rfind(absl::StrCat("worker:0 (", slow_worker_.address(), "): "), 0),
            0u)
      << status;
}

}  // namespace
}  // namespace ps
