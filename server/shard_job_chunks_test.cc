// Chunked pushes on one shard (ShardJob::PushChunkBuffer / PushChunkDone / AbandonChunk), as
// the service drives them.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensor/finite.h"
#include "server/byte_budget.h"
#include "server/deadline_timer.h"
#include "server/io_thread.h"
#include "server/shard_job.h"
#include "server/shard_job_testing.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr float kLearningRate = 0.5f;
constexpr int64_t kFloats = 40;  // "a" [6, 4] and "b" [16]: two slices, 24 + 16 floats.

std::unique_ptr<ShardJob> CreateJob(int num_workers = 1) {
  ParameterSpec spec;
  spec.set_job_id("chunks");
  for (auto [name, rows, columns] : {std::tuple{"a", 6, 4}, std::tuple{"b", 16, 1}}) {
    VariableDef* variable = spec.add_variables();
    variable->set_name(name);
    variable->add_shape(rows);
    if (columns > 1) variable->add_shape(columns);
    variable->mutable_initializer()->set_kind(InitializerConfig::CONSTANT);
    variable->mutable_initializer()->set_scale(1.0f);
  }
  spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  spec.mutable_learning_rate()->set_base(kLearningRate);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  spec.set_num_workers(num_workers);
  spec.set_min_slice_bytes(16);
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, 1, 0);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? std::move(*job) : nullptr;
}

// Multiples of 1/8: SGD with kLearningRate is exact in float.
std::vector<float> Gradient(int seed) {
  std::vector<float> gradient(kFloats);
  for (int64_t i = 0; i < kFloats; ++i) gradient[i] = static_cast<float>((i * 7 + seed) % 17 - 8) / 8;
  return gradient;
}

PushRequestHeader Chunk(const ShardJob& job, int64_t push_id, int total_chunks, int64_t offset,
                        int64_t size, int worker = 0) {
  PushRequestHeader header;
  header.set_job_id("chunks");
  header.set_worker(worker);
  header.set_push_id(push_id);
  for (const SliceRef& ref : job.SliceRefs()) *header.add_slices() = ref;
  header.set_total_chunks(total_chunks);
  header.set_chunk_offset(offset);
  header.set_chunk_size(size);
  return header;
}

// Sends one chunk of `gradient` as the service does: its buffer, the copy, then done.
absl::StatusOr<PushResponse> SendChunk(ShardJob* job, const PushRequestHeader& header,
                                       const std::vector<float>& gradient) {
  absl::StatusOr<ShardJob::ChunkTarget> target = job->PushChunkBuffer(header);
  if (!target.ok()) return target.status();
  if (target->answer.has_value()) return *target->answer;
  absl::Span<const float> data =
      absl::MakeConstSpan(gradient).subspan(header.chunk_offset(), header.chunk_size());
  std::copy(data.begin(), data.end(), target->destination.begin());
  return job->PushChunkDone(header, AllFinite(data));
}

std::vector<float> SgdStep(std::vector<float> weights, const std::vector<float>& gradient) {
  for (size_t i = 0; i < weights.size(); ++i) weights[i] -= kLearningRate * gradient[i];
  return weights;
}

int64_t Rejected(ShardJob* job, const std::string& reason) {
  JobStats stats = job->Stats();
  auto it = stats.rejected().find(reason);
  return it == stats.rejected().end() ? 0 : it->second;
}

TEST(ShardJobChunksTest, ChunksInAnyOrderApplyOnceWhenTheLastIsIn) {
  std::unique_ptr<ShardJob> job = CreateJob();
  ASSERT_NE(job, nullptr);
  const std::vector<float> before = AllValues(job.get());
  ASSERT_EQ(before.size(), static_cast<size_t>(kFloats));
  const std::vector<float> gradient = Gradient(1);
  // Three chunks that straddle the slices' boundary (24), sent last first.
  const std::vector<std::pair<int64_t, int64_t>> chunks = {{30, 10}, {0, 13}, {13, 17}};
  for (size_t i = 0; i < chunks.size(); ++i) {
    absl::StatusOr<PushResponse> response =
        SendChunk(job.get(), Chunk(*job, 1, 3, chunks[i].first, chunks[i].second), gradient);
    ASSERT_TRUE(response.ok()) << response.status();
    if (i + 1 < chunks.size()) {
      EXPECT_EQ(response->outcome(), PushResponse::RECEIVED);
      EXPECT_EQ(AllValues(job.get()), before) << "applied before the last chunk";
      EXPECT_EQ(job->Stats().version(), 0);
    } else {
      EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
      EXPECT_EQ(response->version(), 1);
    }
  }
  EXPECT_EQ(AllValues(job.get()), SgdStep(before, gradient));
  EXPECT_EQ(job->Stats().applied_gradients(), 1);
}

TEST(ShardJobChunksTest, RetriedChunksAreNotCountedTwice) {
  std::unique_ptr<ShardJob> job = CreateJob();
  ASSERT_NE(job, nullptr);
  const std::vector<float> before = AllValues(job.get());
  const std::vector<float> gradient = Gradient(2);
  absl::StatusOr<PushResponse> response = SendChunk(job.get(), Chunk(*job, 1, 2, 0, 20), gradient);
  ASSERT_TRUE(response.ok()) << response.status();
  response = SendChunk(job.get(), Chunk(*job, 1, 2, 0, 20), gradient);  // Its retry.
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::RECEIVED);
  EXPECT_EQ(AllValues(job.get()), before);
  response = SendChunk(job.get(), Chunk(*job, 1, 2, 20, 20), gradient);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  // A retry of either chunk once the push is applied.
  for (int64_t offset : {0, 20}) {
    response = SendChunk(job.get(), Chunk(*job, 1, 2, offset, 20), gradient);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->outcome(), PushResponse::DUPLICATE);
  }
  EXPECT_EQ(AllValues(job.get()), SgdStep(before, gradient));
  EXPECT_EQ(job->Stats().applied_gradients(), 1);
  EXPECT_EQ(job->Stats().duplicate_pushes(), 1);  // One push retried, counted once.
}

// A chunk whose values come on a bulk stream (its header names one): a retry while they are
// awaited is told to wait (the frame may yet fail, and the chunk with it), not that it is in.
TEST(ShardJobChunksTest, ARetryOfAChunkStillComingOnABulkStreamIsToldToWait) {
  std::unique_ptr<ShardJob> job = CreateJob();
  ASSERT_NE(job, nullptr);
  const std::vector<float> before = AllValues(job.get());
  const std::vector<float> gradient = Gradient(3);
  PushRequestHeader on_stream = Chunk(*job, 1, 2, 0, 20);
  on_stream.set_bulk_stream(7);
  on_stream.set_bulk_frame(1);
  absl::StatusOr<ShardJob::ChunkTarget> awaited = job->PushChunkBuffer(on_stream);
  ASSERT_TRUE(awaited.ok()) << awaited.status();
  absl::StatusOr<PushResponse> retry = SendChunk(job.get(), Chunk(*job, 1, 2, 0, 20), gradient);
  EXPECT_EQ(retry.status().code(), absl::StatusCode::kUnavailable) << retry.status();
  // Its frame did not come: abandoned, and the retry in the request takes its place.
  job->AbandonChunk(on_stream, /*malformed=*/false);
  EXPECT_EQ(Rejected(job.get(), "malformed"), 0);
  retry = SendChunk(job.get(), Chunk(*job, 1, 2, 0, 20), gradient);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->outcome(), PushResponse::RECEIVED);
  // The other chunk on a stream, in: its retry is RECEIVED; the push is applied once.
  PushRequestHeader second = Chunk(*job, 1, 2, 20, 20);
  second.set_bulk_stream(7);
  second.set_bulk_frame(2);
  awaited = job->PushChunkBuffer(second);
  ASSERT_TRUE(awaited.ok()) << awaited.status();
  std::copy(gradient.begin() + 20, gradient.end(), awaited->destination.begin());
  absl::StatusOr<PushResponse> done = job->PushChunkDone(second, true);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->outcome(), PushResponse::APPLIED);
  EXPECT_EQ(AllValues(job.get()), SgdStep(before, gradient));
}

TEST(ShardJobChunksTest, BadChunksAreRejectedAndChangeNothing) {
  std::unique_ptr<ShardJob> job = CreateJob();
  ASSERT_NE(job, nullptr);
  const std::vector<float> before = AllValues(job.get());
  const std::vector<float> gradient = Gradient(3);
  ASSERT_TRUE(SendChunk(job.get(), Chunk(*job, 1, 2, 0, 20), gradient).ok());

  struct Case {
    const char* name;
    PushRequestHeader header;
    absl::StatusCode code;
    const char* message;
  };
  PushRequestHeader other_version = Chunk(*job, 1, 2, 20, 20);
  other_version.set_read_version(1);
  PushRequestHeader bad_slices = Chunk(*job, 1, 2, 20, 20);
  bad_slices.mutable_slices(0)->set_row_count(5);
  const std::vector<Case> cases = {
      {"overlap", Chunk(*job, 1, 2, 10, 30), absl::StatusCode::kInvalidArgument, "overlaps"},
      {"same offset, other size", Chunk(*job, 1, 2, 0, 30), absl::StatusCode::kInvalidArgument,
       "overlaps"},
      {"past the end", Chunk(*job, 1, 2, 20, 21), absl::StatusCode::kInvalidArgument,
       "does not fit"},
      {"empty", Chunk(*job, 1, 2, 20, 0), absl::StatusCode::kInvalidArgument, "does not fit"},
      {"negative offset", Chunk(*job, 1, 2, -1, 5), absl::StatusCode::kInvalidArgument,
       "does not fit"},
      // Counts from the wire are bounded by the shard before anything is allocated, and their
      // sum (offset + size, in the message) does not overflow.
      {"more chunks than floats", Chunk(*job, 1, kFloats + 1, 20, 20),
       absl::StatusCode::kInvalidArgument, "(one of 41) does not fit the shard's gradient of 40"},
      {"beyond 64 bits",
       Chunk(*job, 1, 2, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max()),
       absl::StatusCode::kInvalidArgument,
       "chunk [9223372036854775807, 9223372036854775807 + 9223372036854775807) of push 1"},
      {"other header", other_version, absl::StatusCode::kInvalidArgument, "disagree"},
      {"other total", Chunk(*job, 1, 3, 20, 20), absl::StatusCode::kInvalidArgument, "disagree"},
      {"wrong slices", bad_slices, absl::StatusCode::kInvalidArgument, "placement"},
      {"worker", Chunk(*job, 1, 2, 20, 20, 1), absl::StatusCode::kInvalidArgument,
       "out of range"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<PushResponse> response = SendChunk(job.get(), c.header, gradient);
    EXPECT_EQ(response.status().code(), c.code) << c.name << ": " << response.status();
    EXPECT_THAT(response.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_EQ(AllValues(job.get()), before) << c.name;
  }
  EXPECT_EQ(Rejected(job.get(), "chunk"), 9);
  EXPECT_EQ(Rejected(job.get(), "shape"), 1);
  EXPECT_EQ(Rejected(job.get(), "worker"), 1);
  // The push still completes with its good second chunk.
  absl::StatusOr<PushResponse> response = SendChunk(job.get(), Chunk(*job, 1, 2, 20, 20), gradient);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  EXPECT_EQ(AllValues(job.get()), SgdStep(before, gradient));
}

TEST(ShardJobChunksTest, ChunksThatDoNotAddUpToTotalChunksAreNotApplied) {
  std::unique_ptr<ShardJob> job = CreateJob();
  ASSERT_NE(job, nullptr);
  const std::vector<float> before = AllValues(job.get());
  const std::vector<float> gradient = Gradient(4);
  ASSERT_TRUE(SendChunk(job.get(), Chunk(*job, 1, 3, 0, 20), gradient).ok());
  absl::StatusOr<PushResponse> response = SendChunk(job.get(), Chunk(*job, 1, 3, 20, 20), gradient);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("total_chunks is 3"));
  EXPECT_EQ(AllValues(job.get()), before);
  EXPECT_EQ(job->Stats().version(), 0);
}

TEST(ShardJobChunksTest, NonFiniteValueInAnyChunkRejectsTheWholePush) {
  std::unique_ptr<ShardJob> job = CreateJob();
  ASSERT_NE(job, nullptr);
  const std::vector<float> before = AllValues(job.get());
  std::vector<float> gradient = Gradient(5);
  gradient[3] = std::numeric_limits<float>::quiet_NaN();  // In the first chunk, sent first.
  ASSERT_TRUE(SendChunk(job.get(), Chunk(*job, 1, 2, 0, 20), gradient).ok());
  absl::StatusOr<PushResponse> response = SendChunk(job.get(), Chunk(*job, 1, 2, 20, 20), gradient);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("NaN in variable \"a\" at row 0, column 3"));
  EXPECT_EQ(AllValues(job.get()), before);
  EXPECT_EQ(Rejected(job.get(), "non_finite"), 1);
}

TEST(ShardJobChunksTest, ANewerPushAbandonsAnIncompleteOne) {
  std::unique_ptr<ShardJob> job = CreateJob();
  ASSERT_NE(job, nullptr);
  const std::vector<float> before = AllValues(job.get());
  const std::vector<float> first = Gradient(6);
  const std::vector<float> second = Gradient(7);
  ASSERT_TRUE(SendChunk(job.get(), Chunk(*job, 1, 2, 0, 20), first).ok());
  ASSERT_TRUE(SendChunk(job.get(), Chunk(*job, 2, 2, 0, 20), second).ok());
  absl::StatusOr<PushResponse> late = SendChunk(job.get(), Chunk(*job, 1, 2, 20, 20), first);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kAborted) << late.status();
  EXPECT_THAT(late.status().message(), HasSubstr("started push 2"));
  absl::StatusOr<PushResponse> response = SendChunk(job.get(), Chunk(*job, 2, 2, 20, 20), second);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  EXPECT_EQ(AllValues(job.get()), SgdStep(before, second));
}

// A push a worker will never finish (it left, or its lease ran out) gives its buffer back to the
// ps's byte budget at once, not at that worker's next push.
TEST(ShardJobChunksTest, AnUnfinishedPushOfAWorkerThatLeavesOrIsLostGivesItsBufferBack) {
  DeadlineTimer timer;
  IoThread thread;
  std::shared_ptr<ByteBudget> budget = ByteBudget::Create(
      int64_t{64} << 20, "ps:0", &timer,
      [&thread](std::function<void()> work) { thread.Schedule(std::move(work)); });
  std::unique_ptr<ShardJob> job = CreateJob(/*num_workers=*/3);
  job->UseByteBudget(budget);
  const std::vector<float> gradient = Gradient(1);
  for (int worker : {0, 1, 2}) {
    ASSERT_TRUE(SendChunk(job.get(), Chunk(*job, 1, 2, 0, 20, worker), gradient).ok());
  }
  EXPECT_EQ(budget->GetStats().buffer_bytes, 3 * kFloats * 4);
  ASSERT_TRUE(job->Leave(1, "").ok());
  EXPECT_EQ(budget->GetStats().buffer_bytes, 2 * kFloats * 4);
  job->LoseWorkers({2});
  EXPECT_EQ(budget->GetStats().buffer_bytes, 1 * kFloats * 4);
  // The others' pushes go on: worker 0 finishes its own.
  ASSERT_TRUE(SendChunk(job.get(), Chunk(*job, 1, 2, 20, 20, 0), gradient).ok());
  EXPECT_EQ(budget->GetStats().buffer_bytes, 0);
}

TEST(ShardJobChunksTest, AnAbandonedChunkCanBeSentAgain) {
  std::unique_ptr<ShardJob> job = CreateJob();
  ASSERT_NE(job, nullptr);
  const std::vector<float> before = AllValues(job.get());
  const std::vector<float> gradient = Gradient(8);
  const PushRequestHeader header = Chunk(*job, 1, 2, 0, 20);
  absl::StatusOr<ShardJob::ChunkTarget> target = job->PushChunkBuffer(header);
  ASSERT_TRUE(target.ok()) << target.status();
  job->AbandonChunk(header);  // Its bytes were malformed.
  EXPECT_EQ(Rejected(job.get(), "malformed"), 1);
  ASSERT_TRUE(SendChunk(job.get(), header, gradient).ok());
  absl::StatusOr<PushResponse> response = SendChunk(job.get(), Chunk(*job, 1, 2, 20, 20), gradient);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outcome(), PushResponse::APPLIED);
  EXPECT_EQ(AllValues(job.get()), SgdStep(before, gradient));
}

}  // namespace
}  // namespace ps
