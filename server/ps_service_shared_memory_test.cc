// Pushes and pulls through shared memory between a worker and a ps on one host
// (docs/shared_memory.md): the same values as through the requests, no tensor bytes in the
// requests, and a segment that serves only the worker it was opened for.
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <glog/logging.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "common/net/descriptor_handout.h"
#include "common/net/proto_byte_buffer.h"
#include "common/net/shared_memory_segment.h"
#include "common/tensor/tensor_coding.h"
#include "proto/ps_service.pb.h"
#include "server/shared_memory_registry.h"
#include "server/testing/in_process_ps_cluster.h"

namespace ps {
namespace {

using ::testing::Each;
using ::testing::HasSubstr;

constexpr int64_t kRows = 512;
constexpr int64_t kColumns = 256;  // 512 KiB of floats, over two shards.

ParameterSpec MakeSpec(const std::string& job_id, ConsistencyConfig::Mode mode, int workers) {
  ParameterSpec spec;
  spec.set_job_id(job_id);
  spec.set_run_id("run-1");
  spec.set_num_workers(workers);
  spec.set_min_slice_bytes(64);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  spec.mutable_learning_rate()->set_base(0.5f);
  spec.mutable_consistency()->set_mode(mode);
  VariableDef* w = spec.add_variables();
  w->set_name("w");
  w->add_shape(kRows);
  w->add_shape(kColumns);
  w->mutable_initializer()->set_kind(InitializerConfig::CONSTANT);
  w->mutable_initializer()->set_scale(1.0f);
  return spec;
}

class SharedMemoryTest : public testing::Test {
 protected:
  void SetUp() override { StartCluster(int64_t{64} << 20); }

  void StartCluster(int64_t shared_memory_bytes) {
    cluster_.reset();
    InProcessPsClusterOptions options;
    options.num_ps = 2;
    options.server.service.shared_memory_bytes = shared_memory_bytes;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }

  std::unique_ptr<PsClient> Client(bool shared_memory) {
    PsClientOptions options;
    options.call_timeout = absl::Seconds(10);
    options.wait_timeout = absl::Seconds(10);
    options.shared_memory = shared_memory;
    options.initial_backoff = absl::Milliseconds(10);
    absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient(options);
    CHECK(client.ok()) << client.status();
    return *std::move(client);
  }

  std::unique_ptr<WorkerSession> Session(PsClient* client, const ParameterSpec& spec, int worker) {
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(client, spec, worker);
    CHECK(session.ok()) << session.status();
    return *std::move(session);
  }


  // Opens a segment on shard `ps` as `worker` of `spec`'s job, and maps it as the worker would.
  struct Opened {
    OpenSharedMemoryResponse response;
    std::unique_ptr<SharedMemorySegment> mapping;
  };
  absl::StatusOr<Opened> Open(PsClient* client, const ParameterSpec& spec, int ps, int worker) {
    OpenSharedMemoryRequest request;
    request.set_job_id(spec.job_id());
    request.set_worker(worker);
    request.set_run_id(spec.run_id());
    absl::StatusOr<grpc::ByteBuffer> answer =
        CallShard(client, ps, "OpenSharedMemory", SerializeToByteBuffer(request));
    if (!answer.ok()) return answer.status();
    Opened opened;
    absl::Status parsed = ParseFromByteBuffer(*answer, &opened.response);
    if (!parsed.ok()) return parsed;
    absl::StatusOr<int> fd = DescriptorHandout::Fetch(
        opened.response.socket_path(), opened.response.ticket(), absl::Seconds(5));
    if (!fd.ok()) return fd.status();
    const int64_t bytes =
        (opened.response.push_floats() + opened.response.pull_floats()) * sizeof(float);
    absl::StatusOr<std::unique_ptr<SharedMemorySegment>> mapping =
        SharedMemorySegment::Map(*fd, bytes);
    if (!mapping.ok()) return mapping.status();
    opened.mapping = *std::move(mapping);
    return opened;
  }

  // A push by `worker` to shard `ps` whose gradient is in segment `segment`.
  absl::StatusOr<PushResponse> PushNaming(PsClient* client, const ParameterSpec& spec, int ps,
                                          int worker, uint64_t segment, int64_t push_id) {
    absl::StatusOr<Placement> placement = PlaceVariables(spec, 2);
    if (!placement.ok()) return placement.status();
    PushRequestHeader header;
    header.set_job_id(spec.job_id());
    header.set_run_id(spec.run_id());
    header.set_worker(worker);
    header.set_push_id(push_id);
    header.set_shared_memory(segment);
    for (int index : placement->SlicesOn(ps)) {
      const SlicePlacement& slice = placement->slices[index];
      SliceRef* ref = header.add_slices();
      ref->set_variable(slice.variable);
      ref->set_row_begin(slice.row_begin);
      ref->set_row_count(slice.row_count);
    }
    absl::StatusOr<grpc::ByteBuffer> answer =
        CallShard(client, ps, "Push", EncodeTensorMessage(header, {}, nullptr));
    if (!answer.ok()) return answer.status();
    PushResponse response;
    absl::Status parsed = ParseFromByteBuffer(*answer, &response);
    if (!parsed.ok()) return parsed;
    return response;
  }

  std::vector<float> Values(PsClient* client, const ParameterSpec& spec) {
    std::vector<float> values(kRows * kColumns, -1.0f);
    absl::Status status = PullCurrentValues(client, spec, {{"w", absl::MakeSpan(values)}});
    CHECK(status.ok()) << status;
    return values;
  }

  // Creates `spec`'s job; OpenSharedMemory is refused with `code`, saying `why`, and the
  // worker's push of ones goes in the requests, applied all the same.
  void ExpectRefusedThenPushedInTheRequests(const ParameterSpec& spec, absl::StatusCode code,
                                            const std::string& why) {
    std::unique_ptr<PsClient> client = Client(true);
    ASSERT_TRUE(client->CreateJob(spec).ok());
    absl::StatusOr<Opened> refused = Open(client.get(), spec, 0, 0);
    EXPECT_EQ(refused.status().code(), code) << refused.status();
    EXPECT_THAT(refused.status().message(), HasSubstr(why));
    std::unique_ptr<WorkerSession> session = Session(client.get(), spec, 0);
    std::vector<float> gradient(kRows * kColumns, 1.0f);
    ASSERT_TRUE(session->Push({}, {{"w", absl::MakeConstSpan(gradient)}}).ok());
    EXPECT_EQ(session->shared_memory_bytes(), 0);
    EXPECT_THAT(Values(client.get(), spec), Each(0.5f));
  }

  std::unique_ptr<InProcessPsCluster> cluster_;
};

TEST_F(SharedMemoryTest, PushesAndPullsGiveTheValuesOfTheRequestsPathWithoutTheirBytes) {
  std::unique_ptr<PsClient> through_memory = Client(true);
  std::unique_ptr<PsClient> in_requests = Client(false);
  ParameterSpec memory_spec = MakeSpec("memory", ConsistencyConfig::ASYNC, 1);
  ParameterSpec requests_spec = MakeSpec("requests", ConsistencyConfig::ASYNC, 1);
  ASSERT_TRUE(through_memory->CreateJob(memory_spec).ok());
  ASSERT_TRUE(in_requests->CreateJob(requests_spec).ok());
  std::unique_ptr<WorkerSession> memory = Session(through_memory.get(), memory_spec, 0);
  std::unique_ptr<WorkerSession> requests = Session(in_requests.get(), requests_spec, 0);

  std::vector<float> gradient(kRows * kColumns);
  std::vector<float> memory_values(gradient.size()), request_values(gradient.size());
  for (int step = 0; step < 4; ++step) {
    for (size_t i = 0; i < gradient.size(); ++i) gradient[i] = 0.001f * ((i * 7 + step) % 13);
    const ConstVariables grads = {{"w", absl::MakeConstSpan(gradient)}};
    if (step % 2 == 0) {
      ASSERT_TRUE(memory->Push({}, grads).ok());
      ASSERT_TRUE(requests->Push({}, grads).ok());
      ASSERT_TRUE(memory->Pull({}, {{"w", absl::MakeSpan(memory_values)}}).ok());
      ASSERT_TRUE(requests->Pull({}, {{"w", absl::MakeSpan(request_values)}}).ok());
    } else {
      absl::StatusOr<WorkerSession::PushPullResult> a =
          memory->PushPull({}, grads, {}, {{"w", absl::MakeSpan(memory_values)}});
      ASSERT_TRUE(a.ok()) << a.status();
      absl::StatusOr<WorkerSession::PushPullResult> b =
          requests->PushPull({}, grads, {}, {{"w", absl::MakeSpan(request_values)}});
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_THAT(a->pulled.versions, Each(step + 1));
    }
    ASSERT_EQ(memory_values, request_values) << "step " << step;
  }
  EXPECT_NE(memory_values[0], 1.0f);  // The pushes were applied.
  // 4 pushes and 4 pulls of 512 KiB each, counted as moved either way; through memory, only
  // their headers in the messages.
  const int64_t tensors = 8 * kRows * kColumns * static_cast<int64_t>(sizeof(float));
  EXPECT_EQ(memory->shared_memory_bytes(), tensors);
  EXPECT_EQ(requests->shared_memory_bytes(), 0);
  EXPECT_GE(memory->bytes_sent() + memory->bytes_received(), tensors);
  EXPECT_LT(memory->bytes_sent() + memory->bytes_received(), tensors + (16 << 10));
  EXPECT_GE(requests->bytes_sent() + requests->bytes_received(), tensors);
}

// A pull in place leaves a variable that came whole through one shard's link in its pull region
// (no copy), copies one split over the shards into the caller's buffer, and gives the values of
// the requests path either way; the region holds the next pull's values after it.
TEST_F(SharedMemoryTest, APullInPlaceViewsAWholeVariableInTheRegionAndCopiesASplitOne) {
  std::unique_ptr<PsClient> through_memory = Client(true);
  std::unique_ptr<PsClient> in_requests = Client(false);
  auto with_bias = [](ParameterSpec spec) {
    VariableDef* b = spec.add_variables();
    b->set_name("b");
    b->add_shape(8);
    b->mutable_initializer()->set_kind(InitializerConfig::CONSTANT);
    b->mutable_initializer()->set_scale(2.0f);
    return spec;
  };
  const ParameterSpec memory_spec = with_bias(MakeSpec("in-place", ConsistencyConfig::ASYNC, 1));
  const ParameterSpec requests_spec = with_bias(MakeSpec("copied", ConsistencyConfig::ASYNC, 1));
  ASSERT_TRUE(through_memory->CreateJob(memory_spec).ok());
  ASSERT_TRUE(in_requests->CreateJob(requests_spec).ok());
  std::unique_ptr<WorkerSession> memory = Session(through_memory.get(), memory_spec, 0);
  std::unique_ptr<WorkerSession> requests = Session(in_requests.get(), requests_spec, 0);
  std::vector<float> w(kRows * kColumns, -1.0f), b(8, -1.0f);
  const MutableVariables out = {{"w", absl::MakeSpan(w)}, {"b", absl::MakeSpan(b)}};
  std::vector<float> w_gradient(w.size(), 0.25f), b_gradient(b.size(), 1.0f);
  const ConstVariables gradients = {{"w", absl::MakeConstSpan(w_gradient)},
                                    {"b", absl::MakeConstSpan(b_gradient)}};
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(memory->Push({}, gradients).ok());
    ASSERT_TRUE(requests->Push({}, gradients).ok());
    ConstVariables views;
    absl::StatusOr<WorkerSession::PullResult> pulled = memory->PullInPlace({}, out, &views);
    ASSERT_TRUE(pulled.ok()) << pulled.status();
    EXPECT_THAT(pulled->versions, Each(step + 1));
    // "w" is split over both shards: in `out`. "b" is whole on one: in its region, not copied.
    EXPECT_EQ(views.at("w").data(), w.data());
    EXPECT_NE(views.at("b").data(), b.data());
    EXPECT_THAT(b, Each(-1.0f));
    std::vector<float> expected_w(w.size()), expected_b(b.size());
    ConstVariables copied;
    ASSERT_TRUE(requests
                    ->PullInPlace({}, {{"w", absl::MakeSpan(expected_w)},
                                       {"b", absl::MakeSpan(expected_b)}},
                                  &copied)
                    .ok());
    EXPECT_EQ(copied.at("b").data(), expected_b.data());  // No link: in the caller's buffer.
    EXPECT_EQ(std::vector<float>(views.at("w").begin(), views.at("w").end()), expected_w);
    EXPECT_EQ(std::vector<float>(views.at("b").begin(), views.at("b").end()), expected_b);
    EXPECT_THAT(expected_b, Each(2.0f - 0.5f * (step + 1)));
  }
}

// A gradient computed in its push region (PushRegions) is sent from there, and applied as one
// sent from the caller's buffer; a variable split over the shards has no region.
TEST_F(SharedMemoryTest, AGradientComputedInItsPushRegionIsPushedFromThere) {
  std::unique_ptr<PsClient> client = Client(true);
  ParameterSpec spec = MakeSpec("regions", ConsistencyConfig::ASYNC, 1);
  VariableDef* b = spec.add_variables();
  b->set_name("b");
  b->add_shape(8);
  ASSERT_TRUE(client->CreateJob(spec).ok());
  std::unique_ptr<WorkerSession> session = Session(client.get(), spec, 0);
  MutableVariables regions = session->PushRegions();
  ASSERT_EQ(regions.size(), 1u);  // "w" is split over both shards.
  ASSERT_EQ(regions.at("b").size(), 8u);
  std::fill(regions.at("b").begin(), regions.at("b").end(), 4.0f);
  std::vector<float> w_gradient(kRows * kColumns, 1.0f);
  ASSERT_TRUE(session
                  ->Push({}, {{"w", absl::MakeConstSpan(w_gradient)},
                              {"b", absl::MakeConstSpan(regions.at("b"))}})
                  .ok());
  EXPECT_EQ(session->shared_memory_bytes(),
            static_cast<int64_t>((w_gradient.size() + 8) * sizeof(float)));
  std::vector<float> w(kRows * kColumns), b_values(8);
  ASSERT_TRUE(PullCurrentValues(client.get(), spec,
                                {{"w", absl::MakeSpan(w)}, {"b", absl::MakeSpan(b_values)}})
                  .ok());
  EXPECT_THAT(w, Each(0.5f));
  EXPECT_THAT(b_values, Each(-2.0f));  // 0 - 0.5 * 4.
  // Without shared memory there is no region: the caller computes into its own buffers.
  std::unique_ptr<PsClient> plain = Client(false);
  EXPECT_TRUE(Session(plain.get(), spec, 0)->PushRegions().empty());

  // A variable whole on one shard and larger than a chunk has its region too (a push through
  // memory is one message, whatever its size).
  PsClientOptions small_chunks;
  small_chunks.shared_memory = true;
  small_chunks.chunk_bytes = 64 << 10;
  absl::StatusOr<std::unique_ptr<PsClient>> chunked = cluster_->NewClient(small_chunks);
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  ParameterSpec whole = MakeSpec("whole", ConsistencyConfig::ASYNC, 1);
  whole.set_min_slice_bytes(int64_t{1} << 20);  // "w", 512 KiB, in one slice.
  ASSERT_TRUE((*chunked)->CreateJob(whole).ok());
  std::unique_ptr<WorkerSession> one_piece = Session(chunked->get(), whole, 0);
  MutableVariables whole_regions = one_piece->PushRegions();
  ASSERT_EQ(whole_regions.count("w"), 1u);
  std::fill(whole_regions.at("w").begin(), whole_regions.at("w").end(), 1.0f);
  ASSERT_TRUE(one_piece->Push({}, {{"w", absl::MakeConstSpan(whole_regions.at("w"))}}).ok());
  EXPECT_THAT(Values(chunked->get(), whole), Each(0.5f));
}

TEST_F(SharedMemoryTest, SyncStepsThroughMemoryWaitAndAverageAsThroughRequests) {
  std::unique_ptr<PsClient> client = Client(true);
  ParameterSpec spec = MakeSpec("sync", ConsistencyConfig::SYNC, 2);
  ASSERT_TRUE(client->CreateJob(spec).ok());
  std::unique_ptr<WorkerSession> first = Session(client.get(), spec, 0);
  std::unique_ptr<WorkerSession> second = Session(client.get(), spec, 1);
  std::vector<float> a(kRows * kColumns, 1.0f), b(kRows * kColumns, 3.0f);
  std::vector<float> values(kRows * kColumns);
  WorkerSession::PushOptions push;
  push.step = 0;
  ASSERT_TRUE(first->Push(push, {{"w", absl::MakeConstSpan(a)}}).ok());
  ASSERT_TRUE(second->Push(push, {{"w", absl::MakeConstSpan(b)}}).ok());
  WorkerSession::PullOptions pull;
  pull.step = 1;
  ASSERT_TRUE(first->Pull(pull, {{"w", absl::MakeSpan(values)}}).ok());
  EXPECT_THAT(values, Each(1.0f - 0.5f * 2.0f));  // The mean gradient, 2, at rate 0.5.
}

TEST_F(SharedMemoryTest, ASegmentServesOnlyTheWorkerItWasOpenedFor) {
  std::unique_ptr<PsClient> client = Client(true);
  ParameterSpec spec = MakeSpec("victim", ConsistencyConfig::ASYNC, 2);
  ParameterSpec other = MakeSpec("other", ConsistencyConfig::ASYNC, 1);
  ASSERT_TRUE(client->CreateJob(spec).ok());
  ASSERT_TRUE(client->CreateJob(other).ok());
  absl::StatusOr<Opened> victim = Open(client.get(), spec, 0, 0);
  ASSERT_TRUE(victim.ok()) << victim.status();
  for (float& value : victim->mapping->Floats(0, victim->response.push_floats())) value = 100.0f;

  // Worker 1 of the job, and worker 0 of another job, name worker 0's segment.
  absl::StatusOr<PushResponse> by_other_worker =
      PushNaming(client.get(), spec, 0, 1, victim->response.segment(), 1);
  EXPECT_EQ(by_other_worker.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(by_other_worker.status().message(), HasSubstr("belongs to another worker"));
  absl::StatusOr<PushResponse> by_other_job =
      PushNaming(client.get(), other, 0, 0, victim->response.segment(), 1);
  EXPECT_EQ(by_other_job.status().code(), absl::StatusCode::kPermissionDenied);
  // A segment id this ps never gave out.
  absl::StatusOr<PushResponse> made_up =
      PushNaming(client.get(), spec, 0, 1, victim->response.segment() ^ 1, 1);
  EXPECT_EQ(made_up.status().code(), absl::StatusCode::kUnavailable);

  EXPECT_THAT(Values(client.get(), spec), Each(1.0f));  // Nothing was applied.
  absl::StatusOr<std::vector<JobStats>> stats = client->GetJobStats(spec.job_id());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].applied_gradients(), 0);
  EXPECT_EQ((*stats)[0].rejected().at("shared_memory"), 1);  // Worker 1's; the made-up id not.
  absl::StatusOr<std::vector<JobStats>> other_stats = client->GetJobStats(other.job_id());
  ASSERT_TRUE(other_stats.ok());
  EXPECT_EQ((*other_stats)[0].rejected().at("shared_memory"), 1);  // Counted where it came from.

  // Its own worker's push through it is applied.
  absl::StatusOr<PushResponse> own =
      PushNaming(client.get(), spec, 0, 0, victim->response.segment(), 1);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->outcome(), PushResponse::APPLIED);
}

TEST_F(SharedMemoryTest, APullNamingAnotherWorkersSegmentIsRefusedAndWritesNothingThere) {
  std::unique_ptr<PsClient> client = Client(true);
  ParameterSpec spec = MakeSpec("pull_victim", ConsistencyConfig::ASYNC, 2);
  ASSERT_TRUE(client->CreateJob(spec).ok());
  absl::StatusOr<Opened> victim = Open(client.get(), spec, 0, 0);
  ASSERT_TRUE(victim.ok()) << victim.status();
  absl::Span<float> pull = victim->mapping->Floats(victim->response.push_floats(),
                                                   victim->response.pull_floats());
  for (float& value : pull) value = -7.0f;
  PullRequest request;
  request.set_job_id(spec.job_id());
  request.set_run_id(spec.run_id());
  request.set_worker(1);
  request.set_shared_memory(victim->response.segment());
  absl::StatusOr<grpc::ByteBuffer> answer =
      CallShard(client.get(), 0, "Pull", SerializeToByteBuffer(request));
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kPermissionDenied) << answer.status();
  EXPECT_THAT(std::vector<float>(pull.begin(), pull.end()), Each(-7.0f));
}

TEST_F(SharedMemoryTest, ANonFiniteGradientInTheSegmentIsRefusedAndChangesNothing) {
  std::unique_ptr<PsClient> client = Client(true);
  ParameterSpec spec = MakeSpec("nan", ConsistencyConfig::ASYNC, 1);
  ASSERT_TRUE(client->CreateJob(spec).ok());
  absl::StatusOr<Opened> opened = Open(client.get(), spec, 1, 0);
  ASSERT_TRUE(opened.ok()) << opened.status();
  absl::Span<float> push = opened->mapping->Floats(0, opened->response.push_floats());
  for (float& value : push) value = 0.25f;
  push[push.size() - 1] = std::numeric_limits<float>::quiet_NaN();
  absl::StatusOr<PushResponse> pushed =
      PushNaming(client.get(), spec, 1, 0, opened->response.segment(), 1);
  EXPECT_FALSE(pushed.ok() && pushed->outcome() == PushResponse::APPLIED) << pushed.status();
  EXPECT_THAT(Values(client.get(), spec), Each(1.0f));
}

TEST_F(SharedMemoryTest, AChunkedOrCompressedCallNamingASegmentIsInvalid) {
  std::unique_ptr<PsClient> client = Client(true);
  ParameterSpec spec = MakeSpec("chunked", ConsistencyConfig::ASYNC, 1);
  ASSERT_TRUE(client->CreateJob(spec).ok());
  absl::StatusOr<Opened> opened = Open(client.get(), spec, 0, 0);
  ASSERT_TRUE(opened.ok()) << opened.status();
  PushRequestHeader header;
  header.set_job_id(spec.job_id());
  header.set_run_id(spec.run_id());
  header.set_push_id(1);
  header.set_shared_memory(opened->response.segment());
  header.set_total_chunks(2);
  header.set_chunk_offset(0);
  header.set_chunk_size(8);
  std::vector<float> chunk(8, 1.0f);
  std::vector<absl::Span<const float>> pieces = {chunk};
  absl::StatusOr<grpc::ByteBuffer> chunked =
      CallShard(client.get(), 0, "Push", EncodeTensorMessage(header, pieces, nullptr));
  EXPECT_EQ(chunked.status().code(), absl::StatusCode::kInvalidArgument) << chunked.status();

  PullRequest pull;
  pull.set_job_id(spec.job_id());
  pull.set_run_id(spec.run_id());
  pull.set_shared_memory(opened->response.segment());
  pull.set_encoding(FLOAT16);
  absl::StatusOr<grpc::ByteBuffer> compressed =
      CallShard(client.get(), 0, "Pull", SerializeToByteBuffer(pull));
  EXPECT_EQ(compressed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(compressed.status().message(), HasSubstr("dense float32 values only"));
  EXPECT_THAT(Values(client.get(), spec), Each(1.0f));
}

TEST_F(SharedMemoryTest, AJobThatMayNotUseItGoesInTheRequestsSayingWhy) {
  ParameterSpec spec = MakeSpec("float16", ConsistencyConfig::ASYNC, 1);
  spec.mutable_compression()->set_encoding(FLOAT16);
  ExpectRefusedThenPushedInTheRequests(spec, absl::StatusCode::kFailedPrecondition,
                                       "compresses its values");
}

TEST_F(SharedMemoryTest, APsThatServesNoneIsUsedThroughTheRequests) {
  StartCluster(0);
  ExpectRefusedThenPushedInTheRequests(MakeSpec("none", ConsistencyConfig::ASYNC, 1),
                                       absl::StatusCode::kFailedPrecondition,
                                       "--shared_memory_mb=0");
}

TEST_F(SharedMemoryTest, ASegmentTooLargeForTheBudgetIsRefusedAndTheRequestsCarryOn) {
  StartCluster(64 << 10);  // Less than a shard's two regions.
  ExpectRefusedThenPushedInTheRequests(MakeSpec("big", ConsistencyConfig::ASYNC, 1),
                                       absl::StatusCode::kResourceExhausted,
                                       "--shared_memory_mb");
}

// A call through memory made again in the requests carries its shard whole: a shard over
// max_message_bytes gets no segment, and its tensors go in chunks in the requests.
TEST_F(SharedMemoryTest, AShardTooLargeForOneMessageGoesInChunkedRequests) {
  const ParameterSpec spec = MakeSpec("wide", ConsistencyConfig::ASYNC, 1);
  PsClientOptions options;
  options.call_timeout = absl::Seconds(10);
  options.wait_timeout = absl::Seconds(10);
  options.max_message_bytes = 128 << 10;  // A shard is 256 KiB.
  options.chunk_bytes = 32 << 10;
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->CreateJob(spec).ok());
  std::unique_ptr<WorkerSession> session = Session(client->get(), spec, 0);
  std::vector<float> gradient(kRows * kColumns, 1.0f), values(kRows * kColumns);
  ASSERT_TRUE(session->Push({}, {{"w", absl::MakeConstSpan(gradient)}}).ok());
  ASSERT_TRUE(session->Pull({}, {{"w", absl::MakeSpan(values)}}).ok());
  EXPECT_EQ(session->shared_memory_bytes(), 0);
  EXPECT_THAT(values, Each(0.5f));
}

TEST_F(SharedMemoryTest, ACallWhoseSegmentThePsDroppedIsMadeAgainInTheRequests) {
  std::unique_ptr<PsClient> client = Client(true);
  ParameterSpec spec = MakeSpec("dropped", ConsistencyConfig::ASYNC, 1);
  ASSERT_TRUE(client->CreateJob(spec).ok());
  std::unique_ptr<WorkerSession> session = Session(client.get(), spec, 0);
  std::vector<float> gradient(kRows * kColumns, 1.0f), values(kRows * kColumns);
  const ConstVariables grads = {{"w", absl::MakeConstSpan(gradient)}};
  const int64_t tensor_bytes = kRows * kColumns * static_cast<int64_t>(sizeof(float));
  ASSERT_TRUE(session->Push({}, grads).ok());
  EXPECT_EQ(session->shared_memory_bytes(), tensor_bytes);

  // Other sessions of the worker fill its room on each shard: the ps drops the session's
  // segments, which the session still holds.
  std::vector<Opened> others;
  for (int i = 0; i < SharedMemoryRegistry::kSegmentsPerWorker; ++i) {
    for (int ps = 0; ps < 2; ++ps) {
      absl::StatusOr<Opened> opened = Open(client.get(), spec, ps, 0);
      ASSERT_TRUE(opened.ok()) << opened.status();
      others.push_back(*std::move(opened));
    }
  }
  ASSERT_TRUE(session->Pull({}, {{"w", absl::MakeSpan(values)}}).ok());
  EXPECT_THAT(values, Each(0.5f));
  EXPECT_EQ(session->shared_memory_bytes(), tensor_bytes);  // That pull came in the answers.
  ASSERT_TRUE(session->Push({}, grads).ok());               // Through segments opened again.
  EXPECT_EQ(session->shared_memory_bytes(), 2 * tensor_bytes);
  EXPECT_THAT(Values(client.get(), spec), Each(0.0f));

  // The worker leaves, which drops its segments; reading the values after still works.
  ASSERT_TRUE(client->LeaveJob(spec.job_id(), spec.run_id(), 0).ok());
  ASSERT_TRUE(session->Pull({}, {{"w", absl::MakeSpan(values)}}).ok());
  EXPECT_THAT(values, Each(0.0f));
}

TEST_F(SharedMemoryTest, DeletingTheJobFreesItsSegments) {
  std::unique_ptr<PsClient> client = Client(true);
  ParameterSpec spec = MakeSpec("freed", ConsistencyConfig::ASYNC, 1);
  ASSERT_TRUE(client->CreateJob(spec).ok());
  absl::StatusOr<Opened> opened = Open(client.get(), spec, 0, 0);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ASSERT_TRUE(client->DeleteJob(spec.job_id()).ok());
  ASSERT_TRUE(client->CreateJob(spec).ok());  // The same id again, a new job.
  absl::StatusOr<PushResponse> stale =
      PushNaming(client.get(), spec, 0, 0, opened->response.segment(), 1);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kUnavailable) << stale.status();
}

}  // namespace
}  // namespace ps
