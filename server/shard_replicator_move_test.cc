// A move's replicator (ShardReplicatorOptions.on_move_end) against a new ps made by hand: one
// whose stream ends before the hand-over leaves the shard serving here, every update applied
// once, and says so; one that takes the hand-over ends the move, and this copy then refuses
// calls with where the shard went; pushes during the copy are applied and answered at once.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/net/grpc_status.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/replica_input.h"
#include "server/shard_job.h"
#include "server/shard_replicator.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// A move's new ps, by hand: acknowledges the install; then acknowledges every input, or, when
// `ends_early`, ends the stream at the first input after the install, unacknowledged (as a ps
// stopping mid-catch-up). Its ListJobs lists nothing (its copy went with the stream).
class NewPs final : public ParameterServer::Service {
 public:
  explicit NewPs(bool ends_early) : ends_early_(ends_early) {}

  // The install is acknowledged only once Release is called (as a big shard's copy takes its
  // time): HoldInstall before the move starts.
  void HoldInstall() { hold_ = true; }
  void Release() { released_.Notify(); }
  // Returns once the install arrived (the snapshot taken: what comes next follows it).
  void AwaitInstall() { installed_.WaitForNotification(); }
  // The version of its copy after the last input it acknowledged (-1 before the install).
  int64_t CopyVersion() {
    absl::MutexLock lock(&mu_);
    return copy_version_;
  }

  grpc::Status ListJobs(grpc::ServerContext* /*context*/, const ListJobsRequest* /*request*/,
                        ListJobsResponse* /*response*/) override {
    return grpc::Status::OK;
  }

  grpc::Status Replicate(grpc::ServerContext* /*context*/,
                         grpc::ServerReaderWriter<ReplicaAck, ReplicaInput>* stream) override {
    ReplicaInput input;
    std::unique_ptr<ShardJob> copy;  // Applies the inputs as a ps does: the same outcomes.
    while (stream->Read(&input)) {
      if (!input.has_install() && ends_early_) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "stopping");
      }
      ReplicaAck ack;
      if (input.has_install()) {
        absl::StatusOr<std::unique_ptr<ShardJob>> made =
            ShardJob::FromReplicaSnapshot(input.install(), Clock::Real());
        if (!made.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "bad install");
        copy = *std::move(made);
        if (!installed_.HasBeenNotified()) installed_.Notify();
        if (hold_) released_.WaitForNotification();
        ack = AckFor(input.seq(), ReplicaOutcome());
      } else if (input.has_hand_back()) {
        ack = AckFor(input.seq(), ReplicaOutcome());
      } else {
        ack = AckFor(input.seq(), ApplyReplicaInput(*copy, input));
      }
      {
        absl::MutexLock lock(&mu_);
        copy_version_ = copy->Stats().version();
      }
      if (!stream->Write(ack)) break;
    }
    return grpc::Status::OK;
  }

 private:
  const bool ends_early_;
  bool hold_ = false;
  absl::Notification released_;
  absl::Notification installed_;
  absl::Mutex mu_;
  int64_t copy_version_ ABSL_GUARDED_BY(mu_) = -1;
};

class MoveTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&new_ps_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    spec_.set_job_id("moving");
    spec_.set_run_id("run-1");
    spec_.set_num_workers(1);
    VariableDef* w = spec_.add_variables();
    w->set_name("w");
    w->add_shape(64);
    spec_.mutable_learning_rate()->set_base(0.1f);
    spec_.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
    absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec_, 2, 0);
    ASSERT_TRUE(job.ok()) << job.status();
    job_ = *std::move(job);
    ShardReplicatorOptions options;
    options.backup_name = "ps:1";
    options.channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                          grpc::InsecureChannelCredentials());
    options.hand_back = true;
    options.move_from = 0;
    options.move_to = 1;
    options.on_move_end = [this](const absl::Status& outcome) {
      absl::MutexLock lock(&mu_);
      ended_ = outcome;
    };
    options_ = options;
  }

  void StartMove() { replicator_ = std::make_unique<ShardReplicator>(job_, options_); }

  void TearDown() override {
    replicator_.reset();
    if (server_ != nullptr) server_->Shutdown();
  }

  // Submits push `id` of worker 0; `answers` gets its answer when it comes.
  void Push(int64_t id, std::vector<absl::Status>* answers, absl::Mutex* mu) {
    ShardJob::ReadyPush push;
    push.header.set_job_id(spec_.job_id());
    push.header.set_run_id(spec_.run_id());
    push.header.set_worker(0);
    push.header.set_push_id(id);
    push.header.set_incarnation(1);
    for (const SliceRef& ref : job_->SliceRefs()) *push.header.add_slices() = ref;
    push.buffer = std::make_shared<std::vector<float>>(job_->num_parameters(), 0.25f);
    auto answered = [answers, mu](absl::StatusOr<ReplicaOutcome> answer) {
      absl::MutexLock lock(mu);
      answers->push_back(answer.status());
    };
    // A move's copy applies it at once (answered here), or refuses it.
    if (auto now = replicator_->Submit(PushInput(push), answered, push)) answered(*now);
  }

  // The move's outcome, once it ended (up to 20 s).
  std::optional<absl::Status> Ended() {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](std::optional<absl::Status>* ended) { return ended->has_value(); },
                             &ended_),
                         absl::Seconds(20));
    return ended_;
  }

  NewPs new_ps_{GetParam()};
  std::unique_ptr<grpc::Server> server_;
  ParameterSpec spec_;
  std::shared_ptr<ShardJob> job_;
  ShardReplicatorOptions options_;
  std::unique_ptr<ShardReplicator> replicator_;
  absl::Mutex mu_;
  std::optional<absl::Status> ended_ ABSL_GUARDED_BY(mu_);
};

TEST_P(MoveTest, EndsOnceWithTheShardWhereTheNewPsLeftIt) {
  const bool ends_early = GetParam();
  // Pushes while the move begins: before the install, and during the catch-up.
  StartMove();
  absl::Mutex mu;
  std::vector<absl::Status> answers;
  for (int64_t id = 1; id <= 3; ++id) Push(id, &answers, &mu);
  const std::optional<absl::Status> ended = Ended();
  ASSERT_TRUE(ended.has_value()) << "the move never ended";
  {
    absl::MutexLock lock(&mu);
    auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return answers.size() == 3; };
    mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(20));
    ASSERT_EQ(answers.size(), 3u);
    for (const absl::Status& answer : answers) EXPECT_TRUE(answer.ok()) << answer;
  }
  EXPECT_EQ(job_->Stats().version(), 3);  // Each once, here (and there, had it gone).
  if (ends_early) {
    // Before the hand-back was queued (UNAVAILABLE), or with it sent and unanswered, the new
    // ps then listing no copy (FAILED_PRECONDITION).
    EXPECT_FALSE(ended->ok());
    EXPECT_THAT(ended->message(), HasSubstr("stays on this ps")) << *ended;
    EXPECT_FALSE(replicator_->HandedBack());
    EXPECT_TRUE(replicator_->Fenced().ok()) << replicator_->Fenced();
    // It goes on taking updates, applied here.
    Push(4, &answers, &mu);
    absl::MutexLock lock(&mu);
    auto four = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return answers.size() == 4; };
    mu.AwaitWithTimeout(absl::Condition(&four), absl::Seconds(20));
    ASSERT_EQ(answers.size(), 4u);
    EXPECT_TRUE(answers[3].ok()) << answers[3];
    EXPECT_EQ(job_->Stats().version(), 4);
  } else {
    EXPECT_TRUE(ended->ok()) << *ended;
    EXPECT_TRUE(replicator_->HandedBack());
    const absl::Status refused = replicator_->Fenced();
    EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(ShardMovedTo(ToGrpcStatus(refused)), 1) << refused;
  }
}

// While the new ps takes its time over the install, the workers go on: their pushes are applied
// here and answered at once. They follow the install there, and the shard moves with each.
TEST_P(MoveTest, PushesAreAnsweredWhileTheCopyIsOnItsWay) {
  if (GetParam()) GTEST_SKIP() << "the new ps that takes the hand-over";
  new_ps_.HoldInstall();
  StartMove();
  new_ps_.AwaitInstall();  // The pushes follow the install: the catch-up.
  absl::Mutex mu;
  std::vector<absl::Status> answers;
  for (int64_t id = 1; id <= 5; ++id) Push(id, &answers, &mu);
  {
    absl::MutexLock lock(&mu);
    ASSERT_EQ(answers.size(), 5u);  // Answered in Submit: nothing waited for the install.
    for (const absl::Status& answer : answers) EXPECT_TRUE(answer.ok()) << answer;
  }
  EXPECT_EQ(job_->Stats().version(), 5);
  EXPECT_FALSE(replicator_->HandedBack());
  new_ps_.Release();
  const std::optional<absl::Status> ended = Ended();
  ASSERT_TRUE(ended.has_value()) << "the move never ended";
  EXPECT_TRUE(ended->ok()) << *ended;
  EXPECT_EQ(new_ps_.CopyVersion(), 5);  // Every push, after the install.
  EXPECT_EQ(replicator_->Stats().divergences(), 0);
}

// Ahead of the new ps only so far (move_ahead_bytes): past that, pushes wait for it, as a
// replica's do, and are applied here once it holds them, in their order.
TEST_P(MoveTest, PushesFarAheadOfTheNewPsWaitForIt) {
  if (GetParam()) GTEST_SKIP() << "the new ps that takes the hand-over";
  new_ps_.HoldInstall();
  options_.move_ahead_bytes = 1;  // One push ahead.
  StartMove();
  new_ps_.AwaitInstall();  // The pushes follow the install.
  absl::Mutex mu;
  std::vector<absl::Status> answers;
  for (int64_t id = 1; id <= 3; ++id) Push(id, &answers, &mu);
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(answers.size(), 1u);  // The first, applied ahead; the others wait.
  }
  EXPECT_EQ(job_->Stats().version(), 1);
  new_ps_.Release();
  {
    absl::MutexLock lock(&mu);
    auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return answers.size() == 3; };
    mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(20));
    ASSERT_EQ(answers.size(), 3u);
    for (const absl::Status& answer : answers) EXPECT_TRUE(answer.ok()) << answer;
  }
  const std::optional<absl::Status> ended = Ended();
  ASSERT_TRUE(ended.has_value()) << "the move never ended";
  EXPECT_TRUE(ended->ok()) << *ended;
  EXPECT_EQ(job_->Stats().version(), 3);
  EXPECT_EQ(new_ps_.CopyVersion(), 3);
  EXPECT_EQ(replicator_->Stats().divergences(), 0);
}

// What a move whose hand-back answer was lost makes of the new ps's ListJobs: shard 1 of job
// "j", handed over at version 10.
TEST(MoveLanding, IsJudgedByTheNewPsCopiesAndRecords) {
  auto listed = [](std::vector<std::string> jobs, std::vector<std::pair<bool, bool>> copies,
                   std::vector<int64_t> records) {
    ListJobsResponse response;
    for (const std::string& job : jobs) response.add_job_ids(job);
    for (const auto& [serving, incoming] : copies) {
      ListJobsResponse::ShardCopy* copy = response.add_copies();
      copy->set_job_id("j");
      copy->set_shard(1);
      copy->set_serving(serving);
      copy->set_incoming(incoming);
    }
    for (int64_t version : records) {
      ListJobsResponse::MovedShard* moved = response.add_moved();
      moved->set_job_id("j");
      moved->set_shard(1);
      moved->set_to_ps(3);
      moved->set_version(version);
    }
    return response;
  };
  auto landed = [](const ListJobsResponse& response, bool home) {
    return ShardReplicator::Landed(response, "j", 1, 10, home);
  };
  const std::optional<bool> yes = true, no = false, unknown = std::nullopt;
  // Away: a serving copy; one still arriving; none; one that left there (its record at a later
  // version: it landed and moved on; at this version: cannot tell; before: an earlier visit).
  EXPECT_EQ(landed(listed({"j"}, {{true, false}}, {}), false), yes);
  EXPECT_EQ(landed(listed({"j"}, {{false, true}}, {}), false), unknown);
  EXPECT_EQ(landed(listed({"j"}, {}, {}), false), no);
  EXPECT_EQ(landed(listed({"j"}, {{false, false}}, {12}), false), yes);
  EXPECT_EQ(landed(listed({"j"}, {{false, false}}, {10}), false), unknown);
  EXPECT_EQ(landed(listed({"j"}, {{false, false}}, {7}), false), no);
  // The incoming copy and the one that left, both listed: still arriving.
  EXPECT_EQ(landed(listed({"j"}, {{false, false}, {false, true}}, {7}), false), unknown);
  // Home: its own again; its record of the move away (earlier: not landed); moved on since.
  EXPECT_EQ(landed(listed({"j"}, {}, {}), true), yes);
  EXPECT_EQ(landed(listed({"j"}, {}, {7}), true), no);
  EXPECT_EQ(landed(listed({"j"}, {}, {12}), true), yes);
  EXPECT_EQ(landed(listed({"j"}, {{false, true}}, {7}), true), unknown);
  EXPECT_EQ(landed(listed({}, {}, {}), true), no);  // The job is gone there.
}

INSTANTIATE_TEST_SUITE_P(NewPs, MoveTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "EndsItsStreamEarly" : "TakesTheHandOver";
                         });

}  // namespace
}  // namespace ps
