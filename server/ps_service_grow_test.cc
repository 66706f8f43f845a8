// GrowJob on a real ps over gRPC (docs/elastic.md "A ClusterSpec that grows"): a grown cluster
// that moves a worker, changes the ps tasks, or has more workers than the ps takes is refused
// and changes nothing; a growth is taken once, and the job's workers may then create it as
// it was at any size it had, but not at one it never had.
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <grpcpp/create_channel.h>

#include "common/client/ps_client.h"
#include "proto/ps_service.grpc.pb.h"
#include "proto/ps_service.pb.h"
#include "server/shard_job_testing.h"
#include "server/testing/in_process_ps_cluster.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr char kJob[] = "grows";
const std::vector<std::string> kWorkers = {"127.0.0.1:7001", "127.0.0.1:7002"};

// An elastic ASYNC job of 2 workers whose data is handed out: one that may grow.
ParameterSpec GrowableJob() {
  ParameterSpec spec = CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::SGD);
  spec.set_job_id(kJob);
  spec.set_num_workers(2);
  spec.set_lost_workers_leave(true);
  spec.set_worker_lease_ms(60'000);
  spec.mutable_data_handout()->set_batches_per_epoch(10);
  return spec;
}

class GrowJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InProcessPsClusterOptions options;
    options.server.service.worker_addresses = kWorkers;
    options.server.service.limits.max_workers = 4;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    absl::StatusOr<std::unique_ptr<PsClient>> created = cluster_->NewClient();
    ASSERT_TRUE(created.ok()) << created.status();
    client_ = *std::move(created);
    ASSERT_TRUE(client_->CreateJob(GrowableJob()).ok());
  }

  // A grow request to `workers`, with `ps` as the cluster's ps tasks (the cluster's by default).
  GrowJobRequest Grow(const std::vector<std::string>& workers,
                      std::vector<std::string> ps = {}) const {
    if (ps.empty()) ps = cluster_->addresses();
    GrowJobRequest request;
    request.set_job_id(kJob);
    request.set_run_id(GrowableJob().run_id());
    ClusterJob* ps_job = request.mutable_cluster()->add_jobs();
    ps_job->set_name("ps");
    for (const std::string& address : ps) ps_job->add_tasks(address);
    ClusterJob* worker_job = request.mutable_cluster()->add_jobs();
    worker_job->set_name("worker");
    for (const std::string& address : workers) worker_job->add_tasks(address);
    return request;
  }

  int NumWorkers() const {
    absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats(kJob);
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? (*stats)[0].spec().num_workers() : -1;
  }

  std::unique_ptr<InProcessPsCluster> cluster_;
  std::unique_ptr<PsClient> client_;
};

TEST_F(GrowJobTest, AClusterThatIsNotTheJobsGrownIsRefusedAndChangesNothing) {
  struct Case {
    GrowJobRequest request;
    absl::StatusCode code;
    const char* says;
  };
  const Case kCases[] = {
      {Grow({"127.0.0.1:7002", "127.0.0.1:7001", "127.0.0.1:7003"}),
       absl::StatusCode::kInvalidArgument, "runs worker:0 at 127.0.0.1:7002"},
      {Grow({"127.0.0.1:7001"}), absl::StatusCode::kInvalidArgument, "lacks worker:1"},
      {Grow({kWorkers[0], kWorkers[1], "127.0.0.1:7003"}, {"127.0.0.1:1", "127.0.0.1:2"}),
       absl::StatusCode::kInvalidArgument, "its ps tasks stay"},
      {Grow({kWorkers[0], kWorkers[1], "h:3", "h:4", "h:5"}),
       absl::StatusCode::kResourceExhausted, "--max_workers"},
      {Grow({kWorkers[0], kWorkers[1], "no port"}), absl::StatusCode::kInvalidArgument,
       "GrowJob: cluster"},
  };
  for (const Case& c : kCases) {
    absl::Status status = client_->GrowJob(c.request);
    EXPECT_EQ(status.code(), c.code) << status;
    EXPECT_THAT(status.message(), HasSubstr(c.says));
    EXPECT_EQ(NumWorkers(), 2) << c.says;
  }
  GrowJobRequest unknown = Grow({kWorkers[0], kWorkers[1], "127.0.0.1:7003"});
  unknown.set_job_id("another");
  EXPECT_EQ(client_->GrowJob(unknown).code(), absl::StatusCode::kNotFound);
  // A shard index the cluster lacks names no job (sent as is: PsClient names every shard).
  GrowJobRequest shard = Grow({kWorkers[0], kWorkers[1], "127.0.0.1:7003"});
  shard.set_shard(7);
  for (bool unreplicated : {false, true}) {
    shard.set_unreplicated(unreplicated);
    std::unique_ptr<ParameterServer::Stub> ps = ParameterServer::NewStub(
        grpc::CreateChannel(cluster_->addresses()[0], grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    GrowJobResponse response;
    EXPECT_FALSE(ps->GrowJob(&context, shard, &response).ok()) << unreplicated;
  }
  EXPECT_EQ(NumWorkers(), 2);
}

TEST_F(GrowJobTest, AGrownJobIsCreatedAgainAtASizeItHadAndAtNoOther) {
  absl::Status grown = client_->GrowJob(Grow({kWorkers[0], kWorkers[1], "127.0.0.1:7003"}));
  ASSERT_TRUE(grown.ok()) << grown;
  ASSERT_TRUE(client_->GrowJob(Grow({kWorkers[0], kWorkers[1], "127.0.0.1:7003"})).ok());
  EXPECT_EQ(NumWorkers(), 3);
  ASSERT_TRUE(client_->GrowJob(
                         Grow({kWorkers[0], kWorkers[1], "127.0.0.1:7003", "127.0.0.1:7004"}))
                  .ok());
  EXPECT_EQ(NumWorkers(), 4);
  // The workers started with the ClusterSpec the job began with, or one it grew through.
  for (int workers : {2, 3, 4}) {
    ParameterSpec as_it_was = GrowableJob();
    as_it_was.set_num_workers(workers);
    EXPECT_TRUE(client_->CreateJob(as_it_was).ok()) << workers << " workers";
  }
  ParameterSpec never = GrowableJob();
  never.set_num_workers(1);
  EXPECT_EQ(client_->CreateJob(never).status().code(), absl::StatusCode::kAlreadyExists);
  ParameterSpec changed = GrowableJob();
  changed.set_num_workers(3);
  changed.mutable_learning_rate()->set_base(0.5f);
  EXPECT_EQ(client_->CreateJob(changed).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(NumWorkers(), 4);
}

}  // namespace
}  // namespace ps
