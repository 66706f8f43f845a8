#include "common/worker_session.h"

#include <memory>
#include <vector>

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

}  // namespace
}  // namespace ps
