// Compressed pushes and pulls (CompressionSpec) through WorkerSession against 2 in-process ps:
// 16-bit values at half the bytes, top-k pushes that apply each shard's largest values, and a
// top-k push with bad positions refused without a change.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include "common/tensor/float16.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/testing/in_process_ps_cluster.h"

namespace ps {
namespace {

constexpr int kRows = 100;
constexpr int kColumns = 10;
constexpr float kInitial = 1.0f / 3.0f;

// A 100 x 10 variable of 1/3 everywhere, in rows split over both shards; SGD at rate 1, so an
// applied gradient is the change in the values.
ParameterSpec Spec(const std::string& job_id, const CompressionSpec& compression) {
  ParameterSpec spec;
  spec.set_job_id(job_id);
  spec.set_run_id("run");
  spec.set_num_workers(1);
  spec.set_min_slice_bytes(kColumns * sizeof(float));
  VariableDef* w = spec.add_variables();
  w->set_name("w");
  w->add_shape(kRows);
  w->add_shape(kColumns);
  w->mutable_initializer()->set_kind(InitializerConfig::CONSTANT);
  w->mutable_initializer()->set_scale(kInitial);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  spec.mutable_learning_rate()->set_base(1.0f);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  *spec.mutable_compression() = compression;
  return spec;
}

CompressionSpec Encoding(TensorEncoding encoding) {
  CompressionSpec compression;
  compression.set_encoding(encoding);
  return compression;
}

class WorkerSessionCompressionTest : public ::testing::Test {
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
    client_ = *std::move(created);
  }

  std::unique_ptr<WorkerSession> Session(const ParameterSpec& spec, int incarnation = 0) {
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(client_.get(), spec, 0, incarnation);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }

  // The values as they are on the shards, read in float32 by an observer.
  std::vector<float> Values(const std::string& job_id) {
    std::vector<float> w(kRows * kColumns);
    absl::StatusOr<WorkerSession::PullResult> pulled =
        Session(Spec(job_id, CompressionSpec()), OBSERVER_INCARNATION)
            ->Pull({}, {{"w", absl::MakeSpan(w)}});
    EXPECT_TRUE(pulled.ok()) << pulled.status();
    return w;
  }

  std::unique_ptr<InProcessPsCluster> cluster_;
  std::unique_ptr<PsClient> client_;
};

TEST_F(WorkerSessionCompressionTest, SixteenBitPullsAndPushesTravelAtHalfTheBytes) {
  for (TensorEncoding encoding : {FLOAT16, BFLOAT16}) {
    SCOPED_TRACE(TensorEncoding_Name(encoding));
    const std::string job_id = "wire-" + TensorEncoding_Name(encoding);
    ASSERT_TRUE(client_->CreateJob(Spec(job_id, Encoding(encoding))).ok());
    std::unique_ptr<WorkerSession> plain = Session(Spec(job_id, CompressionSpec()));
    std::unique_ptr<WorkerSession> compressed = Session(Spec(job_id, Encoding(encoding)));

    std::vector<float> w(kRows * kColumns);
    ASSERT_TRUE(plain->Pull({}, {{"w", absl::MakeSpan(w)}}).ok());
    EXPECT_EQ(w[0], kInitial);
    ASSERT_TRUE(compressed->Pull({}, {{"w", absl::MakeSpan(w)}}).ok());
    for (float value : w) ASSERT_EQ(value, RoundTo(kInitial, encoding));
    EXPECT_NE(RoundTo(kInitial, encoding), kInitial);
    // 4,000 bytes of values against 2,000, and the same headers.
    EXPECT_NEAR(plain->bytes_received() - compressed->bytes_received(), 2000, 100);

    // The shard applies the gradient as it arrived, in float32.
    const std::vector<float> gradient(kRows * kColumns, 0.1f);
    const int64_t sent_before = compressed->bytes_sent();
    absl::StatusOr<std::vector<PushResponse>> pushed =
        compressed->Push({}, {{"w", absl::MakeConstSpan(gradient)}});
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    EXPECT_LT(compressed->bytes_sent() - sent_before, 2000 + 300) << "2 bytes a value";
    for (const PushResponse& response : *pushed) EXPECT_EQ(response.outcome(), PushResponse::APPLIED);
    const float expected = kInitial - RoundTo(0.1f, encoding);
    for (float value : Values(job_id)) ASSERT_EQ(value, expected);
  }
}

TEST_F(WorkerSessionCompressionTest, TopKPushesApplyEachShardsLargestValues) {
  CompressionSpec compression;
  compression.set_topk_fraction(0.1f);
  const ParameterSpec spec = Spec("topk", compression);
  ASSERT_TRUE(client_->CreateJob(spec).ok());
  std::unique_ptr<WorkerSession> session = Session(spec);
  std::unique_ptr<WorkerSession> plain = Session(Spec("topk", CompressionSpec()));
  std::vector<float> w(kRows * kColumns);
  ASSERT_TRUE(session->Pull({}, {{"w", absl::MakeSpan(w)}}).ok());

  // Distinct magnitudes, signs alternating.
  std::vector<float> gradient(kRows * kColumns);
  for (size_t i = 0; i < gradient.size(); ++i) {
    gradient[i] = (i % 2 == 0 ? 1.0f : -1.0f) * static_cast<float>((i * 37) % 1000 + 1) / 1000;
  }
  const int64_t sent_before = session->bytes_sent();
  ASSERT_TRUE(session->Push({}, {{"w", absl::MakeConstSpan(gradient)}}).ok());
  const int64_t topk_bytes = session->bytes_sent() - sent_before;

  const std::vector<float> after = Values("topk");
  const Placement& placement = session->placement();
  ASSERT_EQ(placement.num_ps, 2);
  for (int ps = 0; ps < 2; ++ps) {
    std::vector<size_t> positions;  // The shard's elements of w.
    for (int index : placement.SlicesOn(ps)) {
      const SlicePlacement& slice = placement.slices[index];
      for (int64_t i = slice.row_begin * kColumns; i < (slice.row_begin + slice.row_count) * kColumns;
           ++i) {
        positions.push_back(i);
      }
    }
    ASSERT_FALSE(positions.empty());
    const size_t k = std::max<size_t>(1, std::llround(0.1 * positions.size()));
    float smallest_applied = INFINITY, largest_kept = 0;
    size_t applied = 0;
    for (size_t i : positions) {
      if (after[i] != kInitial) {
        ++applied;
        EXPECT_EQ(after[i], kInitial - gradient[i]) << "element " << i;
        smallest_applied = std::min(smallest_applied, std::fabs(gradient[i]));
      } else {
        largest_kept = std::max(largest_kept, std::fabs(gradient[i]));
      }
    }
    EXPECT_EQ(applied, k) << "ps:" << ps;
    EXPECT_GT(smallest_applied, largest_kept) << "ps:" << ps;
  }
  // 10% of the values and their positions (1 to 2 bytes each), against every value.
  const int64_t before_plain = plain->bytes_sent();
  ASSERT_TRUE(plain->Push({}, {{"w", absl::MakeConstSpan(gradient)}}).ok());
  const int64_t dense_bytes = plain->bytes_sent() - before_plain;
  EXPECT_LT(topk_bytes, dense_bytes / 4) << topk_bytes << " against " << dense_bytes;
}

TEST_F(WorkerSessionCompressionTest, RefusesTopKPositionsBeyondTheShardAndChangesNothing) {
  const ParameterSpec spec = Spec("bad-topk", CompressionSpec());
  ASSERT_TRUE(client_->CreateJob(spec).ok());
  std::unique_ptr<WorkerSession> session = Session(spec);
  const Placement& placement = session->placement();
  PushRequest request;
  PushRequestHeader& header = *request.mutable_header();
  header.set_job_id("bad-topk");
  header.set_run_id("run");
  header.set_push_id(1);
  int64_t shard_floats = 0;
  for (int index : placement.SlicesOn(0)) {
    const SlicePlacement& slice = placement.slices[index];
    SliceRef* ref = header.add_slices();
    ref->set_variable(slice.variable);
    ref->set_row_begin(slice.row_begin);
    ref->set_row_count(slice.row_count);
    shard_floats += slice.num_elements();
  }
  for (uint32_t gap : {uint32_t{0}, static_cast<uint32_t>(shard_floats)}) {
    header.add_topk_index_gaps(gap);
  }
  const std::vector<float> values = {5.0f, 7.0f};
  request.set_data(std::string(reinterpret_cast<const char*>(values.data()), 8));
  std::unique_ptr<ParameterServer::Stub> stub = ParameterServer::NewStub(
      grpc::CreateChannel(cluster_->addresses()[0], grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  PushResponse response;
  grpc::Status status = stub->Push(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("beyond the shard's dense gradient"), std::string::npos)
      << status.error_message();
  for (float value : Values("bad-topk")) ASSERT_EQ(value, kInitial);
  absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats("bad-topk");
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ((*stats)[0].rejected().at("topk"), 1);
  EXPECT_EQ((*stats)[0].version(), 0);
}

}  // namespace
}  // namespace ps
