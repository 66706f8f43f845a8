#include "common/client/worker_session.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/net/proto_byte_buffer.h"
#include "common/tensor/tensor_coding.h"
#include "common/net/testing/generic_test_server.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

// Checks that fail before any call is made: no ps has to listen at the addresses.
class WorkerSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PsClientOptions options;
    options.ps_addresses = {"127.0.0.1:1", "127.0.0.1:2"};
    client_ = *PsClient::Create(options);
    spec_.set_job_id("j");
    spec_.set_num_workers(2);
    VariableDef* variable = spec_.add_variables();
    variable->set_name("w");
    variable->add_shape(8);
    variable->add_shape(2);
  }

  std::unique_ptr<PsClient> client_;
  ParameterSpec spec_;
};

TEST_F(WorkerSessionTest, RefusesAWorkerOutsideTheJob) {
  absl::Status status = WorkerSession::Create(client_.get(), spec_, 2).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "worker 2 is out of range: job \"j\" has 2 workers");
}

TEST_F(WorkerSessionTest, PlacesTheJobAsThePartitionerDoes) {
  absl::StatusOr<std::unique_ptr<WorkerSession>> session =
      WorkerSession::Create(client_.get(), spec_, 1);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<Placement> expected = PlaceVariables(spec_, 2);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ((*session)->placement().slices.size(), expected->slices.size());
}

TEST_F(WorkerSessionTest, PullNamesAMissingOrMisshapedVariable) {
  std::unique_ptr<WorkerSession> session = *WorkerSession::Create(client_.get(), spec_, 0);
  absl::Status missing = session->Pull({}, MutableVariables()).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.message(), "variable \"w\" of job \"j\" is missing");

  std::vector<float> values(15);
  absl::Status misshaped = session->Pull({}, {{"w", absl::MakeSpan(values)}}).status();
  EXPECT_EQ(misshaped.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(misshaped.message(), "variable \"w\" has 15 values; its shape has 16");
}

TEST_F(WorkerSessionTest, PushRefusesReadVersionsForADifferentNumberOfShards) {
  std::unique_ptr<WorkerSession> session = *WorkerSession::Create(client_.get(), spec_, 0);
  std::vector<float> gradient(16);
  WorkerSession::PushOptions options;
  options.read_versions = {1, 2, 3};
  absl::Status status = session->Push(options, {{"w", absl::MakeConstSpan(gradient)}}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "PushOptions.read_versions has 3 versions but the job is on 2 ps shards: give one per "
            "shard, or none for the last pull's");
}

// A shard that answers Pull with every element's value equal to its flat index in the variable
// (row * row_size + column), at version `version`, 5 ms after it arrives; counts the pulls, the
// rows they asked for, and the most it answered at once.
class FakePullShard {
 public:
  FakePullShard(int64_t version, int64_t row_size)
      : version_(version),
        row_size_(row_size),
        server_([this](const std::string& method, const grpc::ByteBuffer& request,
                       grpc::ByteBuffer* response) {
          if (method != "/ps.ParameterServer/Pull") {
            return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, method);
          }
          return Pull(request, response);
        }) {}

  std::string address() const { return server_.address(); }
  int pulls() {
    absl::MutexLock lock(&mu_);
    return pulls_;
  }
  int64_t rows() {
    absl::MutexLock lock(&mu_);
    return rows_;
  }
  int most_at_once() {
    absl::MutexLock lock(&mu_);
    return most_at_once_;
  }

 private:
  grpc::Status Pull(const grpc::ByteBuffer& bytes, grpc::ByteBuffer* response) {
    {
      absl::MutexLock lock(&mu_);
      most_at_once_ = std::max(most_at_once_, ++at_once_);
    }
    absl::SleepFor(absl::Milliseconds(5));
    {
      absl::MutexLock lock(&mu_);
      --at_once_;
    }
    PullRequest request;
    if (!ParseFromByteBuffer(bytes, &request).ok()) return grpc::Status::CANCELLED;
    PullResponseHeader header;
    header.set_version(version_);
    auto values = std::make_shared<std::vector<float>>();
    for (const SliceRef& ref : request.slices()) {
      *header.add_slices() = ref;
      for (int64_t i = ref.row_begin() * row_size_;
           i < (ref.row_begin() + ref.row_count()) * row_size_; ++i) {
        values->push_back(static_cast<float>(i));
      }
    }
    {
      absl::MutexLock lock(&mu_);
      ++pulls_;
      rows_ += static_cast<int64_t>(values->size()) / row_size_;
    }
    std::vector<absl::Span<const float>> tensors = {absl::MakeConstSpan(*values)};
    *response = EncodeTensorMessage(header, tensors, values);
    return grpc::Status::OK;
  }

  const int64_t version_;
  const int64_t row_size_;
  absl::Mutex mu_;
  int pulls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rows_ ABSL_GUARDED_BY(mu_) = 0;
  int at_once_ ABSL_GUARDED_BY(mu_) = 0;
  int most_at_once_ ABSL_GUARDED_BY(mu_) = 0;
  GenericTestServer server_;
};

// Pull chunks of 10 rows of 4 floats, from a job of one 95 x 4 variable "w" on `shard`.
PsClientOptions TenRowChunksFrom(const FakePullShard& shard) {
  PsClientOptions options;
  options.ps_addresses = {shard.address()};
  options.chunk_bytes = 10 * 4 * sizeof(float);
  return options;
}

std::unique_ptr<WorkerSession> SessionOf95x4(PsClient* client) {
  ParameterSpec spec;
  spec.set_job_id("j");
  spec.set_num_workers(1);
  VariableDef* variable = spec.add_variables();
  variable->set_name("w");
  variable->add_shape(95);
  variable->add_shape(4);
  return *WorkerSession::Create(client, spec, 0);
}

TEST(WorkerSessionPullTest, SplitsALargeShardIntoChunksAndFillsEveryRow) {
  FakePullShard shard(/*version=*/7, /*row_size=*/4);
  std::unique_ptr<PsClient> client = *PsClient::Create(TenRowChunksFrom(shard));
  std::unique_ptr<WorkerSession> session = SessionOf95x4(client.get());

  std::vector<float> values(95 * 4, -1);
  absl::StatusOr<WorkerSession::PullResult> pulled =
      session->Pull({}, {{"w", absl::MakeSpan(values)}});
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->versions, std::vector<int64_t>{7});
  EXPECT_EQ(shard.pulls(), 10);
  EXPECT_EQ(shard.rows(), 95);
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], static_cast<float>(i)) << i;
}

// A pull's request is small: its chunks count the values they bring back against the window.
TEST(WorkerSessionPullTest, PullChunksCountTheirValuesAgainstTheWindow) {
  FakePullShard shard(/*version=*/7, /*row_size=*/4);
  PsClientOptions options = TenRowChunksFrom(shard);
  options.max_bytes_in_flight_per_ps = options.chunk_bytes;  // One chunk at a time.
  std::unique_ptr<PsClient> client = *PsClient::Create(options);
  std::unique_ptr<WorkerSession> session = SessionOf95x4(client.get());

  std::vector<float> values(95 * 4, -1);
  ASSERT_TRUE(session->Pull({}, {{"w", absl::MakeSpan(values)}}).ok());
  EXPECT_EQ(shard.pulls(), 10);
  EXPECT_EQ(shard.most_at_once(), 1);
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], static_cast<float>(i)) << i;
}

}  // namespace
}  // namespace ps
