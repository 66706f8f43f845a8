// A job whose variables start at its chief's values (ParameterSpec.chief_initializes): the
// chief's create carries them, every shard holds its slices of them, the other workers' creates
// wait for the chief's, a second create (a chief that rejoins) changes nothing, and bad values
// are refused before any shard has the job.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/time/time.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "common/job/partitioner.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/testing/in_process_ps_cluster.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// w (16 x 4) split over both shards, and b (4).
ParameterSpec ChiefSpec() {
  ParameterSpec spec;
  spec.set_job_id("chief_init");
  spec.set_num_workers(2);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  spec.mutable_learning_rate()->set_base(0.5f);
  spec.set_min_slice_bytes(16);
  spec.set_chief_initializes(true);
  VariableDef* w = spec.add_variables();
  w->set_name("w");
  w->add_shape(16);
  w->add_shape(4);
  VariableDef* b = spec.add_variables();
  b->set_name("b");
  b->add_shape(4);
  return spec;
}

class ChiefInitializesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InProcessPsClusterOptions options;
    options.num_ps = 2;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    PsClientOptions client;
    client.wait_timeout = absl::Seconds(20);
    absl::StatusOr<std::unique_ptr<PsClient>> created = cluster_->NewClient(client);
    ASSERT_TRUE(created.ok()) << created.status();
    client_ = *std::move(created);
    w_.resize(64);
    std::iota(w_.begin(), w_.end(), 1.0f);
    b_ = {-1.0f, -2.0f, -3.0f, -4.0f};
  }

  PsClient::InitialValues Values() const {
    return {{"w", absl::MakeConstSpan(w_)}, {"b", absl::MakeConstSpan(b_)}};
  }

  // What worker `worker` pulls first.
  void ExpectPulled(int worker, const std::vector<float>& w, const std::vector<float>& b) {
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(client_.get(), ChiefSpec(), worker);
    ASSERT_TRUE(session.ok()) << session.status();
    std::vector<float> pulled_w(64), pulled_b(4);
    MutableVariables out{{"w", absl::MakeSpan(pulled_w)}, {"b", absl::MakeSpan(pulled_b)}};
    absl::StatusOr<WorkerSession::PullResult> pulled = (*session)->Pull({}, out);
    ASSERT_TRUE(pulled.ok()) << pulled.status();
    EXPECT_EQ(pulled_w, w);
    EXPECT_EQ(pulled_b, b);
  }

  void ExpectNoShardHasTheJob() {
    absl::StatusOr<std::vector<JobStats>> stats = client_->GetJobStats("chief_init");
    EXPECT_EQ(stats.status().code(), absl::StatusCode::kNotFound) << stats.status();
  }

  std::unique_ptr<InProcessPsCluster> cluster_;
  std::unique_ptr<PsClient> client_;
  std::vector<float> w_, b_;
};

TEST_F(ChiefInitializesTest, AnotherWorkersCreateWaitsForTheChiefsAndPullsItsValues) {
  absl::Status other;
  std::thread worker1([&] { other = client_->CreateJob(ChiefSpec()).status(); });
  absl::SleepFor(absl::Milliseconds(300));  // Worker 1 is waiting: the job is nowhere yet.
  ExpectNoShardHasTheJob();
  const PsClient::InitialValues values = Values();
  absl::StatusOr<Placement> placement = client_->CreateJob(ChiefSpec(), nullptr, &values);
  ASSERT_TRUE(placement.ok()) << placement.status();
  ASSERT_FALSE(placement->SlicesOn(0).empty());
  ASSERT_FALSE(placement->SlicesOn(1).empty());
  worker1.join();
  EXPECT_TRUE(other.ok()) << other;
  ExpectPulled(1, w_, b_);
}

TEST_F(ChiefInitializesTest, ARejoiningChiefsValuesChangeNothing) {
  const PsClient::InitialValues values = Values();
  ASSERT_TRUE(client_->CreateJob(ChiefSpec(), nullptr, &values).ok());
  const std::vector<float> other_w(64, 7.0f), other_b(4, 7.0f);
  const PsClient::InitialValues again{{"w", absl::MakeConstSpan(other_w)},
                                      {"b", absl::MakeConstSpan(other_b)}};
  absl::StatusOr<Placement> rejoined = client_->CreateJob(ChiefSpec(), nullptr, &again);
  EXPECT_TRUE(rejoined.ok()) << rejoined.status();
  ExpectPulled(0, w_, b_);
}

TEST_F(ChiefInitializesTest, WithoutTheChiefAWorkerSaysWhatItWaitedFor) {
  PsClientOptions options;
  options.wait_timeout = absl::Milliseconds(400);
  absl::StatusOr<std::unique_ptr<PsClient>> impatient = cluster_->NewClient(options);
  ASSERT_TRUE(impatient.ok()) << impatient.status();
  absl::Status status = (*impatient)->CreateJob(ChiefSpec()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(status.message(), HasSubstr("chief (worker 0)"));
  ExpectNoShardHasTheJob();
}

TEST_F(ChiefInitializesTest, BadValuesAreRefusedBeforeAnyShardHasTheJob) {
  std::vector<float> nan_w = w_;
  nan_w[60] = std::numeric_limits<float>::quiet_NaN();  // In ps:1's slice.
  const PsClient::InitialValues with_nan{{"w", absl::MakeConstSpan(nan_w)},
                                         {"b", absl::MakeConstSpan(b_)}};
  absl::Status status = client_->CreateJob(ChiefSpec(), nullptr, &with_nan).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("element 60"));

  const std::vector<float> short_w(63, 1.0f);
  const PsClient::InitialValues too_short{{"w", absl::MakeConstSpan(short_w)},
                                          {"b", absl::MakeConstSpan(b_)}};
  status = client_->CreateJob(ChiefSpec(), nullptr, &too_short).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("63 floats, not 64"));

  const PsClient::InitialValues missing{{"w", absl::MakeConstSpan(w_)}};
  status = client_->CreateJob(ChiefSpec(), nullptr, &missing).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("variable b"));

  ParameterSpec initialized = ChiefSpec();
  initialized.set_chief_initializes(false);
  const PsClient::InitialValues values = Values();
  status = client_->CreateJob(initialized, nullptr, &values).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  ExpectNoShardHasTheJob();
}

// What another client could send a shard directly: a create without the values, with a slice
// the shard does not hold, or with a slice missing.
TEST_F(ChiefInitializesTest, AShardRefusesACreateWithoutEveryOneOfItsSlices) {
  std::unique_ptr<ParameterServer::Stub> stub = ParameterServer::NewStub(
      grpc::CreateChannel(cluster_->addresses()[1], grpc::InsecureChannelCredentials()));
  auto create = [&](const CreateJobRequest& request) {
    grpc::ClientContext context;
    CreateJobResponse response;
    return stub->CreateJob(&context, request, &response);
  };
  CreateJobRequest request;
  *request.mutable_spec() = ChiefSpec();
  request.set_num_ps(2);
  request.set_ps_index(1);
  grpc::Status status = create(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("chief (worker 0)"));

  request.set_from_chief(true);
  SliceValues* foreign = request.add_initial_values();
  foreign->mutable_slice()->set_variable("w");
  foreign->mutable_slice()->set_row_begin(0);
  foreign->mutable_slice()->set_row_count(1);
  foreign->add_values(1.0f);
  status = create(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("not one of ps:1's"));

  absl::StatusOr<Placement> placement = PlaceVariables(ChiefSpec(), 2);
  ASSERT_TRUE(placement.ok());
  request.clear_initial_values();
  const SlicePlacement& first = placement->slices[placement->SlicesOn(1).front()];
  SliceValues* one = request.add_initial_values();
  one->mutable_slice()->set_variable(first.variable);
  one->mutable_slice()->set_row_begin(first.row_begin);
  one->mutable_slice()->set_row_count(first.row_count);
  for (int64_t i = 0; i < first.num_elements(); ++i) one->add_values(1.0f);
  if (placement->SlicesOn(1).size() > 1) {
    status = create(request);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("no values for slice"));
  }
  *request.add_initial_values() = *one;  // The same slice twice.
  status = create(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("given twice"));
  request.set_replaying(true);  // A replay has no record of the chief's values.
  status = create(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("cannot be replayed"));
  ExpectNoShardHasTheJob();
}

// A shard that holds no dense slice of the job (3 shards, 2 slices) is created by the chief's
// request all the same: it carries from_chief and no values.
TEST(ChiefInitializesShardsTest, AShardWithoutSlicesIsCreatedByTheChief) {
  InProcessPsClusterOptions options;
  options.num_ps = 3;
  absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster = InProcessPsCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<std::unique_ptr<PsClient>> client = (*cluster)->NewClient();
  ASSERT_TRUE(client.ok()) << client.status();
  ParameterSpec spec = ChiefSpec();
  spec.set_min_slice_bytes(0);  // 256 KiB: w and b in one slice each.
  const std::vector<float> w(64, 1.0f), b(4, 2.0f);
  const PsClient::InitialValues values{{"w", absl::MakeConstSpan(w)}, {"b", absl::MakeConstSpan(b)}};
  absl::StatusOr<Placement> placement = (*client)->CreateJob(spec, nullptr, &values);
  ASSERT_TRUE(placement.ok()) << placement.status();
  int empty = 0;
  for (int ps = 0; ps < 3; ++ps) empty += placement->SlicesOn(ps).empty() ? 1 : 0;
  EXPECT_GE(empty, 1);
  absl::StatusOr<std::vector<JobStats>> stats = (*client)->GetJobStats("chief_init");
  EXPECT_TRUE(stats.ok()) << stats.status();
}

}  // namespace
}  // namespace ps
