#include "common/client/ps_client.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/net/proto_byte_buffer.h"
#include "common/net/testing/generic_test_server.h"
#include "gtest/gtest.h"
#include "proto/ps_service.pb.h"

namespace ps {
namespace {

// A ps shard's job-management calls, faked: knows the jobs in `jobs`, answers stats with
// version = `index`, and records the CreateJob requests it gets.
class FakeShard {
 public:
  // `listed`: its ListJobs answer.
  FakeShard(int index, std::vector<std::string> jobs, ListJobsResponse listed = {})
      : index_(index),
        jobs_(std::move(jobs)),
        listed_(std::move(listed)),
        server_([this](const std::string& method, const grpc::ByteBuffer& request,
                       grpc::ByteBuffer* response) { return Handle(method, request, response); }) {}

  std::string address() const { return server_.address(); }
  std::vector<CreateJobRequest> created() {
    absl::MutexLock lock(&mu_);
    return created_;
  }

 private:
  grpc::Status Handle(const std::string& method, const grpc::ByteBuffer& request,
                      grpc::ByteBuffer* response) {
    if (method == "/ps.ParameterServer/ListJobs") {
      *response = SerializeToByteBuffer(listed_);
      return grpc::Status::OK;
    }
    if (method == "/ps.ParameterServer/CreateJob") {
      CreateJobRequest create;
      if (!ParseFromByteBuffer(request, &create).ok()) return grpc::Status::CANCELLED;
      absl::MutexLock lock(&mu_);
      created_.push_back(create);
      *response = SerializeToByteBuffer(CreateJobResponse());
      return grpc::Status::OK;
    }
    JobStatsRequest named;  // Every other request here has job_id as field 1.
    if (!ParseFromByteBuffer(request, &named).ok()) return grpc::Status::CANCELLED;
    if (std::find(jobs_.begin(), jobs_.end(), named.job_id()) == jobs_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown job");
    }
    if (method == "/ps.ParameterServer/GetJobStats") {
      JobStats stats;
      stats.set_version(index_);
      *response = SerializeToByteBuffer(stats);
    } else {
      *response = SerializeToByteBuffer(DeleteJobResponse());
    }
    return grpc::Status::OK;
  }

  const int index_;
  const std::vector<std::string> jobs_;
  const ListJobsResponse listed_;
  absl::Mutex mu_;
  std::vector<CreateJobRequest> created_ ABSL_GUARDED_BY(mu_);
  GenericTestServer server_;
};

// Job `id`: one worker, one variable of 4 floats.
ParameterSpec OneVariableJob(const std::string& id) {
  ParameterSpec spec;
  spec.set_job_id(id);
  spec.set_num_workers(1);
  VariableDef* variable = spec.add_variables();
  variable->set_name("w");
  variable->add_shape(4);
  return spec;
}

std::unique_ptr<PsClient> Connect(FakeShard& a, FakeShard& b) {
  PsClientOptions options;
  options.ps_addresses = {a.address(), b.address()};
  options.max_attempts = 1;
  return *PsClient::Create(options);
}

// A ListJobs answer listing job `id` and serving a copy of its shard 0: one moved there
// (MoveShard), or a replicated shard's backup that took it over.
ListJobsResponse ServingShard0Of(const std::string& id, bool moved) {
  ListJobsResponse listed;
  listed.add_job_ids(id);
  ListJobsResponse::ShardCopy* copy = listed.add_copies();
  copy->set_job_id(id);
  copy->set_shard(0);
  copy->set_serving(true);
  copy->set_moved(moved);
  return listed;
}

// A shard that another ps serves, moved there (MoveShard), is not made again at its own ps
// (which may have been started again empty): its calls go there.
TEST(PsClientTest, CreateJobLeavesAMovedShardWhereItIsServed) {
  const ListJobsResponse listed = ServingShard0Of("j", /*moved=*/true);
  FakeShard a(0, {}), b(1, {"j"}, listed);
  std::unique_ptr<PsClient> client = Connect(a, b);
  ParameterSpec spec = OneVariableJob("j");
  ASSERT_TRUE(client->CreateJob(spec).ok());
  EXPECT_TRUE(a.created().empty());
  EXPECT_EQ(b.created().size(), 1u);
  EXPECT_EQ(client->connections()->MovedRoute("j", 0), 1);
  // A ps that cannot be asked, whose shard no ps serves, fails the creation before anything is
  // made (it may serve a moved shard whose own ps would make it anew).
  PsClientOptions options;
  options.ps_addresses = {b.address(), "127.0.0.1:1"};
  options.max_attempts = 1;
  std::unique_ptr<PsClient> half = *PsClient::Create(options);
  spec.set_job_id("k");
  absl::StatusOr<Placement> failed = half->CreateJob(spec);
  EXPECT_TRUE(absl::IsUnavailable(failed.status())) << failed.status();
  EXPECT_TRUE(absl::StrContains(failed.status().message(), "ps:1")) << failed.status();
  EXPECT_EQ(b.created().size(), 1u) << "made before every ps was asked";
  // One that serves a moved shard, gone: that shard's calls go where it is, from its own ps.
  FakeShard c(0, {"j"}, listed);
  options.ps_addresses = {"127.0.0.1:1", c.address()};
  std::unique_ptr<PsClient> gone = *PsClient::Create(options);
  spec.set_job_id("j");
  ASSERT_TRUE(gone->CreateJob(spec).ok());
  EXPECT_EQ(c.created().size(), 1u);
  EXPECT_EQ(gone->connections()->MovedRoute("j", 0), 1);
}

// A shard's own ps that cannot be reached: the other ps are asked where the shard is, and a
// call of it goes to one that serves it moved there (a ps removed from the job after its shard
// moved away); a replicated shard's backup there is not such a copy.
TEST(PsClientTest, ACallOfAShardWhosePsIsGoneGoesWhereTheShardMoved) {
  for (const bool moved : {true, false}) {
    SCOPED_TRACE(moved ? "moved" : "a backup");
    FakeShard b(1, {"j"}, ServingShard0Of("j", moved));
    PsClientOptions options;
    options.ps_addresses = {"127.0.0.1:1", b.address()};
    options.max_attempts = 3;
    options.initial_backoff = absl::Milliseconds(1);
    std::unique_ptr<PsClient> client = *PsClient::Create(options);
    absl::StatusOr<std::vector<JobStats>> stats = client->GetJobStats("j");
    if (!moved) {
      EXPECT_TRUE(absl::IsUnavailable(stats.status())) << stats.status();
      EXPECT_EQ(client->connections()->MovedRoute("j", 0), 0);
      continue;
    }
    ASSERT_TRUE(stats.ok()) << stats.status();
    ASSERT_EQ(stats->size(), 2u);
    EXPECT_EQ((*stats)[0].version(), 1) << "shard 0 answered by ps:1";
    EXPECT_EQ(client->connections()->MovedRoute("j", 0), 1);
  }
}

TEST(PsClientTest, CreateJobTellsEachShardItsIndexAndReturnsThePlacement) {
  FakeShard a(0, {}), b(1, {});
  std::unique_ptr<PsClient> client = Connect(a, b);
  ParameterSpec spec = OneVariableJob("j");
  absl::StatusOr<Placement> placement = client->CreateJob(spec);
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_FALSE(placement->slices.empty());
  for (auto [shard, index] : {std::pair<FakeShard*, int>{&a, 0}, {&b, 1}}) {
    std::vector<CreateJobRequest> created = shard->created();
    ASSERT_EQ(created.size(), 1u);
    EXPECT_EQ(created[0].ps_index(), index);
    EXPECT_EQ(created[0].num_ps(), 2);
    EXPECT_EQ(created[0].spec().job_id(), "j");
  }
}

TEST(PsClientTest, DeleteJobIsNotFoundOnlyWhenNoShardHasIt) {
  FakeShard a(0, {"j"}), b(1, {});
  std::unique_ptr<PsClient> client = Connect(a, b);
  EXPECT_TRUE(client->DeleteJob("j").ok());
  absl::Status missing = client->DeleteJob("k");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "unknown job \"k\": no ps task has it");
}

TEST(PsClientTest, GetJobStatsIsInPsOrderAndNamesAFailingShard) {
  FakeShard a(0, {"j"}), b(1, {"j"});
  std::unique_ptr<PsClient> client = Connect(a, b);
  absl::StatusOr<std::vector<JobStats>> stats = client->GetJobStats("j");
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->size(), 2u);
  EXPECT_EQ((*stats)[0].version(), 0);
  EXPECT_EQ((*stats)[1].version(), 1);

  FakeShard c(0, {"j"}), d(1, {});
  absl::Status status = Connect(c, d)->GetJobStats("j").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), absl::StrCat("ps:1 (", d.address(), "): GetJobStats: unknown job"));
}

}  // namespace
}  // namespace ps
