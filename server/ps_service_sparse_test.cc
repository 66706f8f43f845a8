// Sparse rows through the gRPC service, as any client would send them with the generated
// messages: keys split by SparseShardOf over 2 ps, pulled and pushed as raw float32 after the
// dense values; the ps answers rows in the order asked and applies pushed rows.
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "common/job/partitioner.h"
#include "common/client/ps_client.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/testing/in_process_ps_cluster.h"
#include "server/testing/sparse_job.h"

namespace ps {
namespace {

constexpr int kWidth = 3;

ParameterSpec Spec() {
  SparseJob job;
  job.job_id = "sparse-wire";
  job.width = kWidth;
  job.initializer = InitializerConfig::NORMAL;
  job.initializer_scale = 0.1f;
  job.learning_rate = 1.0f;
  return SparseJobSpec(job);
}

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> floats(bytes.size() / sizeof(float));
  std::memcpy(floats.data(), bytes.data(), floats.size() * sizeof(float));
  return floats;
}

std::string Bytes(const std::vector<float>& floats) {
  return std::string(reinterpret_cast<const char*>(floats.data()), floats.size() * sizeof(float));
}

class PsServiceSparseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InProcessPsClusterOptions options;
    options.num_ps = 2;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    absl::StatusOr<std::unique_ptr<PsClient>> created = cluster_->NewClient();
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_TRUE((*created)->CreateJob(Spec()).ok());
    client_ = *std::move(created);
    for (const std::string& address : cluster_->addresses()) {
      stubs_.push_back(ParameterServer::NewStub(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials())));
    }
  }

  // Every key's row, pulled from its shard: the rows after the dense values, in key order.
  std::map<uint64_t, std::vector<float>> Pull(const std::vector<uint64_t>& keys) {
    std::map<uint64_t, std::vector<float>> rows;
    for (int ps = 0; ps < 2; ++ps) {
      PullRequest request;
      request.set_job_id("sparse-wire");
      request.set_run_id("run");
      request.set_incarnation(OBSERVER_INCARNATION);
      SparseRows* sparse = request.add_sparse();
      sparse->set_table("emb");
      for (uint64_t key : keys) {
        if (SparseShardOf(key, 2) == ps) sparse->add_keys(key);
      }
      grpc::ClientContext context;
      PullResponse response;
      grpc::Status status = stubs_[ps]->Pull(&context, request, &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      const std::vector<float> data = Floats(response.data());
      EXPECT_EQ(response.header().sparse_size(), 1);
      // The dense slices this shard holds come first.
      int64_t dense = 0;
      for (const SliceRef& slice : response.header().slices()) dense += slice.row_count();
      EXPECT_EQ(data.size(), dense + sparse->keys_size() * kWidth);
      for (int k = 0; k < sparse->keys_size(); ++k) {
        rows[sparse->keys(k)] = std::vector<float>(data.begin() + dense + k * kWidth,
                                                   data.begin() + dense + (k + 1) * kWidth);
      }
    }
    return rows;
  }

  std::unique_ptr<InProcessPsCluster> cluster_;
  std::unique_ptr<PsClient> client_;
  std::vector<std::unique_ptr<ParameterServer::Stub>> stubs_;
};

TEST_F(PsServiceSparseTest, RowsTravelAfterTheDenseValuesBothWays) {
  const std::vector<uint64_t> keys = {5, 17, uint64_t{1} << 39, 123456789};
  const std::map<uint64_t, std::vector<float>> initial = Pull(keys);
  ASSERT_EQ(initial.size(), keys.size());
  EXPECT_EQ(Pull({17, 5}), (std::map<uint64_t, std::vector<float>>{{5, initial.at(5)},
                                                                    {17, initial.at(17)}}));
  // A push to each shard: its dense gradient (zeros), then a row of (1, 2, 3) per key.
  int64_t push_id = 0;
  for (int ps = 0; ps < 2; ++ps) {
    absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats("sparse-wire");
    ASSERT_TRUE(stats.ok());
    PushRequest request;
    PushRequestHeader* header = request.mutable_header();
    header->set_job_id("sparse-wire");
    header->set_run_id("run");
    header->set_push_id(++push_id);
    int64_t dense = 0;
    for (const SliceRef& slice : (*stats)[ps].slices()) {
      *header->add_slices() = slice;
      dense += slice.row_count();
    }
    SparseRows* sparse = header->add_sparse();
    sparse->set_table("emb");
    std::vector<float> data(dense, 0.0f);
    for (uint64_t key : keys) {
      if (SparseShardOf(key, 2) != ps) continue;
      sparse->add_keys(key);
      data.insert(data.end(), {1.0f, 2.0f, 3.0f});
    }
    request.set_data(Bytes(data));
    grpc::ClientContext context;
    PushResponse response;
    grpc::Status status = stubs_[ps]->Push(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.outcome(), PushResponse::APPLIED);
  }
  const std::map<uint64_t, std::vector<float>> after = Pull(keys);
  for (uint64_t key : keys) {
    for (int j = 0; j < kWidth; ++j) {
      EXPECT_FLOAT_EQ(after.at(key)[j], initial.at(key)[j] - (j + 1)) << key << " " << j;
    }
  }
  absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats("sparse-wire");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].sparse_rows().at("emb") + (*stats)[1].sparse_rows().at("emb"), 4);
}

}  // namespace
}  // namespace ps
