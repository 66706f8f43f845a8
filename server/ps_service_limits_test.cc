// A ps refuses a job beyond its limits (ServiceLimits: ps_server --max_jobs, --max_workers,
// --max_job_mb, --max_memory_mb) with RESOURCE_EXHAUSTED naming the limit and its flag, before
// anything of the job is allocated, and has room again once jobs are deleted; and a call beyond
// a peer's requests in flight (--max_requests_per_peer) likewise, while other peers are served.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <grpc/grpc.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/net/grpc_deadline.h"
#include "common/net/proto_byte_buffer.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "proto/ps_service.pb.h"
#include "server/shard_job_testing.h"
#include "server/testing/in_process_ps_cluster.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// One variable of `rows` x 256 floats (1 KiB a row) with plain SGD: 2 KiB a row on the shard.
ParameterSpec Job(const std::string& id, int64_t rows, int workers = 2) {
  ParameterSpec spec = CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::SGD);
  spec.set_job_id(id);
  spec.clear_variables();
  VariableDef* variable = spec.add_variables();
  variable->set_name("w");
  variable->add_shape(rows);
  variable->add_shape(256);
  spec.set_num_workers(workers);
  return spec;
}

class LimitsTest : public ::testing::Test {
 protected:
  void Start(const ServiceLimits& limits) {
    InProcessPsClusterOptions options;
    options.server.service.limits = limits;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    PsClientOptions client;
    client.ps_addresses = cluster_->addresses();
    absl::StatusOr<std::unique_ptr<PsClient>> created = PsClient::Create(client);
    ASSERT_TRUE(created.ok()) << created.status();
    client_ = *std::move(created);
  }
  absl::Status Create(const ParameterSpec& spec) { return client_->CreateJob(spec).status(); }
  void ExpectExhausted(const ParameterSpec& spec, const std::string& flag) {
    absl::Status status = Create(spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
    EXPECT_THAT(status.message(), HasSubstr(flag));
  }

  std::unique_ptr<InProcessPsCluster> cluster_;
  std::unique_ptr<PsClient> client_;
};

// The report that found it: a 47-byte CreateJob with ten million workers grew a ps by 6 GB.
TEST_F(LimitsTest, AJobWithTooManyWorkersIsRefusedBeforeAnythingIsAllocated) {
  Start(ServiceLimits());
  ExpectExhausted(Job("crowd", 4, 10'000'000), "--max_workers");
  EXPECT_TRUE(Create(Job("fine", 4, 8)).ok());
}

TEST_F(LimitsTest, TheNumberOfJobsIsBoundedAndDeletingOneMakesRoom) {
  ServiceLimits limits;
  limits.max_jobs = 2;
  Start(limits);
  ASSERT_TRUE(Create(Job("a", 4)).ok());
  ASSERT_TRUE(Create(Job("b", 4)).ok());
  ExpectExhausted(Job("c", 4), "--max_jobs");
  EXPECT_TRUE(Create(Job("a", 4)).ok()) << "creating a job that exists is not a new job";
  ASSERT_TRUE(client_->DeleteJob("a").ok());
  EXPECT_TRUE(Create(Job("c", 4)).ok());
}

TEST_F(LimitsTest, BytesPerJobAndInTotalAreBounded) {
  ServiceLimits limits;
  limits.max_job_bytes = 3 << 20;    // 3 MiB: 1,024 rows (2 MiB) fit, 2,048 (4 MiB) do not.
  limits.max_total_bytes = 5 << 20;  // Two jobs of 2 MiB fit, not a third.
  Start(limits);
  ExpectExhausted(Job("big", 2048), "--max_job_mb");
  ASSERT_TRUE(Create(Job("one", 1024)).ok());
  ASSERT_TRUE(Create(Job("two", 1024)).ok());
  ExpectExhausted(Job("three", 1024), "--max_memory_mb");
  ASSERT_TRUE(client_->DeleteJob("one").ok());
  EXPECT_TRUE(Create(Job("three", 1024)).ok());
}

// A replicated job's ps also holds the backup of the previous ps's shard: --max_memory_mb counts
// it, at the job's creation and at each install.
TEST_F(LimitsTest, BackupCopiesCountAgainstTheTotal) {
  // Two variables of 512 rows, so that each ps holds a shard of about the same size.
  ParameterSpec one = Job("one", 512);
  *one.add_variables() = one.variables(0);
  one.mutable_variables(1)->set_name("v");
  one.set_replicas(2);
  ParameterSpec two = one;
  two.set_job_id("two");
  int64_t shard_bytes = 0;
  for (int ps = 0; ps < 2; ++ps) {
    absl::StatusOr<int64_t> bytes = ShardJob::MemoryBytes(one, 2, ps);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    shard_bytes = std::max(shard_bytes, *bytes);
  }
  InProcessPsClusterOptions options;
  options.num_ps = 2;
  // Three shards fit on a ps: "one" with its backup, and "two" only without one.
  options.server.service.limits.max_total_bytes = 3 * shard_bytes;
  absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster = InProcessPsCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  cluster_ = *std::move(cluster);
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient(PsClientOptions());
  ASSERT_TRUE(client.ok()) << client.status();
  client_ = *std::move(client);

  ASSERT_TRUE(Create(one).ok());
  // Once each ps holds the other's backup.
  auto installed = [&] {
    return cluster_->server(1).service().BackupForTesting("one", 0) != nullptr &&
           cluster_->server(0).service().BackupForTesting("one", 1) != nullptr;
  };
  for (int i = 0; i < 250 && !installed(); ++i) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(installed());
  absl::Status refused = Create(two);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("of it for the backup of shard"));
  EXPECT_THAT(refused.message(), HasSubstr("--max_memory_mb"));
  two.set_replicas(0);
  absl::Status created = Create(two);
  EXPECT_TRUE(created.ok()) << created;
}

// One TCP connection of its own to a ps (gRPC would otherwise share one between channels of
// the same target and arguments): one peer, as a ps without mutual TLS tells peers apart.
class Connection {
 public:
  explicit Connection(const std::string& address) {
    grpc::ChannelArguments arguments;
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel_ = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), arguments);
    stub_ = std::make_unique<grpc::GenericStub>(channel_);
  }

  // A call of ParameterServer method `method` in flight; Wait() for its status.
  class Call {
   public:
    grpc::Status Wait() {
      done_.WaitForNotification();
      return status_;
    }

   private:
    friend class Connection;
    grpc::ClientContext context_;
    grpc::ByteBuffer request_;
    grpc::ByteBuffer response_;
    grpc::Status status_;
    absl::Notification done_;
  };
  std::unique_ptr<Call> Start(const std::string& method,
                              const google::protobuf::MessageLite& request) {
    auto call = std::make_unique<Call>();
    call->context_.set_deadline(GrpcDeadline(absl::Seconds(30)));
    call->request_ = SerializeToByteBuffer(request);
    Call* raw = call.get();
    stub_->UnaryCall(&raw->context_, "/ps.ParameterServer/" + method, grpc::StubOptions(),
                     &raw->request_, &raw->response_, [raw](grpc::Status status) {
                       raw->status_ = std::move(status);
                       raw->done_.Notify();
                     });
    return call;
  }
  grpc::Status ListJobs() { return Start("ListJobs", ListJobsRequest())->Wait(); }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;
};

// Pulls parked at a SYNC barrier hold their places until they are answered.
TEST_F(LimitsTest, APeerBeyondItsRequestsInFlightIsRefusedWhileOthersAreServed) {
  ServiceLimits limits;
  limits.max_requests_per_peer = 2;
  Start(limits);
  ParameterSpec spec = Job("sync", 4);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::SYNC);
  ASSERT_TRUE(Create(spec).ok());

  Connection busy(cluster_->addresses()[0]);
  std::vector<std::unique_ptr<Connection::Call>> parked;
  for (int worker = 0; worker < 2; ++worker) {
    PullRequest pull;  // Step 1 begins once both workers have pushed step 0.
    pull.set_job_id(spec.job_id());
    pull.set_run_id(spec.run_id());
    pull.set_worker(worker);
    pull.set_step(1);
    parked.push_back(busy.Start("Pull", pull));
  }
  for (int tries = 0; tries < 500; ++tries) {
    absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats(spec.job_id());
    ASSERT_TRUE(stats.ok()) << stats.status();
    if ((*stats)[0].parked_pulls() == 2) break;
    absl::SleepFor(absl::Milliseconds(10));
  }

  grpc::Status refused = busy.ListJobs();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              ::testing::MatchesRegex("ps:0 has 2 requests in flight from "
                                      "ipv4:127\\.0\\.0\\.1:[0-9]+; the limit is "
                                      "--max_requests_per_peer=2"));
  Connection other(cluster_->addresses()[0]);
  EXPECT_TRUE(other.ListJobs().ok()) << "another peer has room of its own";

  // Both workers push step 0 (through client_, another peer): the barrier opens.
  std::vector<float> gradient(4 * 256, 0.5f);
  for (int worker = 0; worker < 2; ++worker) {
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(client_.get(), spec, worker);
    ASSERT_TRUE(session.ok()) << session.status();
    WorkerSession::PushOptions push;
    push.read_versions = {0};
    ASSERT_TRUE((*session)->Push(push, {{"w", absl::MakeConstSpan(gradient)}}).ok());
  }
  for (auto& call : parked) EXPECT_TRUE(call->Wait().ok());
  EXPECT_TRUE(busy.ListJobs().ok()) << "the parked pulls' places are free again";
}

}  // namespace
}  // namespace ps
