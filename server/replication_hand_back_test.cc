// A replicated shard taken over by its backup's ps goes back to its own ps once that is back
// (the hand-back), against an own ps made by hand that holds back its answers: an install that
// overtakes the hand-back's answer waits for it, a copy that went back leaves the shard to an own
// ps that holds it (or its copy), serves again when the own ps is started again at once, and is
// dropped when it is started again too late; a refused hand-back is made again.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/process/subprocess.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/ps_server.h"
#include "server/shard_job.h"

namespace ps {
namespace {

// The job whose shard 0 ps:1 takes over: ASYNC, one worker, a backup of each shard.
ParameterSpec OvertakenJob() {
  ParameterSpec spec;
  spec.set_job_id("overtaken");
  spec.set_run_id("run-1");
  spec.set_num_workers(1);
  spec.set_replicas(2);
  VariableDef* w = spec.add_variables();
  w->set_name("w");
  w->add_shape(16);
  w->add_shape(4);
  spec.mutable_learning_rate()->set_base(0.1f);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  return spec;
}

// A shard's own ps, by hand: acknowledges every input; refuses a hand-back while told to, and
// answers one only once told. Its ListJobs says whether it holds job "overtaken" (as it does
// once it took the shard back) and how long it has run (since `started`).
class HoldingHome final : public ParameterServer::Service {
 public:
  grpc::Status ListJobs(grpc::ServerContext* /*context*/, const ListJobsRequest* /*request*/,
                        ListJobsResponse* response) override {
    absl::MutexLock lock(&mu);
    if (holds_shard) response->add_job_ids("overtaken");
    if (holds_copy) {
      ListJobsResponse::ShardCopy* copy = response->add_copies();
      copy->set_job_id("overtaken");
      copy->set_shard(0);
    }
    // At least 1 ms, as a real ps answers only once it listens (0 means a ps that does not say).
    response->set_uptime_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(absl::Now() - started)));
    ++listings;
    return grpc::Status::OK;
  }

  // As it would be started again, empty, now.
  void StartedAgain() {
    absl::MutexLock lock(&mu);
    holds_shard = false;
    started = absl::Now();
  }

  grpc::Status Replicate(grpc::ServerContext* /*context*/,
                         grpc::ServerReaderWriter<ReplicaAck, ReplicaInput>* stream) override {
    ReplicaInput input;
    while (stream->Read(&input)) {
      ReplicaAck ack;
      ack.set_seq(input.seq());
      if (input.has_hand_back()) {
        ++hand_backs;
        if (refusals > 0) {
          --refusals;
          ack.set_code(static_cast<int>(absl::StatusCode::kFailedPrecondition));
          ack.set_message("not now");
        } else {
          if (!handed_back.HasBeenNotified()) handed_back.Notify();
          answer.WaitForNotification();
        }
      }
      if (!stream->Write(ack)) break;
    }
    return grpc::Status::OK;
  }

  std::atomic<int> refusals{0};    // Hand-backs to refuse first.
  std::atomic<int> hand_backs{0};  // Received.
  absl::Notification handed_back;  // One came that is not refused.
  absl::Notification answer;       // Acknowledge it.
  absl::Mutex mu;
  bool holds_shard ABSL_GUARDED_BY(mu) = true;
  bool holds_copy ABSL_GUARDED_BY(mu) = false;  // The one ps:1's install made.
  absl::Time started ABSL_GUARDED_BY(mu) = absl::Now();
  int listings ABSL_GUARDED_BY(mu) = 0;  // ListJobs calls answered.
};

// ps:1 of 2 serving ps:0's shard 0 (taken over on a worker's call, ps:0 gone), with ps:0 a
// HoldingHome: ps:1 replicates the shard there and hands it back.
class HandBackTest : public ::testing::Test {
 protected:
  // ps:1's replica_unreachable_after: a copy that went back takes the shard again within half
  // of it, room for a loaded machine between the hand-back and the test's next call.
  static constexpr absl::Duration kUnreachableAfter = absl::Seconds(4);

  void SetUp() override {
    grpc::ServerBuilder builder;
    int home_port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &home_port);
    builder.RegisterService(&home_);
    home_server_ = builder.BuildAndStart();
    ASSERT_NE(home_server_, nullptr);
    absl::StatusOr<int> port = PickUnusedPort();
    ASSERT_TRUE(port.ok());
    const std::string address = absl::StrCat("127.0.0.1:", *port);
    PsServerOptions options;
    options.listen_address = address;
    options.service.ps_index = 1;
    options.service.num_ps = 2;
    options.service.ps_addresses = {absl::StrCat("127.0.0.1:", home_port), address};
    options.service.replica_unreachable_after = kUnreachableAfter;
    absl::StatusOr<std::unique_ptr<PsServer>> ps1 = PsServer::Start(options);
    ASSERT_TRUE(ps1.ok()) << ps1.status();
    ps1_ = *std::move(ps1);
    stub_ = ParameterServer::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));

    // ps:0's backup of shard 0 on ps:1; ps:0's stream ends (it is gone) and a worker's call
    // makes ps:1 take the shard over.
    const ParameterSpec spec = OvertakenJob();
    absl::StatusOr<std::unique_ptr<ShardJob>> shard0 = ShardJob::Create(spec, 2, 0);
    ASSERT_TRUE(shard0.ok()) << shard0.status();
    *install_.mutable_install() = (*shard0)->ReplicaSnapshot();
    ASSERT_EQ(InstallCode(), grpc::StatusCode::OK);
    pull_.set_job_id(spec.job_id());
    pull_.set_run_id(spec.run_id());
    pull_.set_incarnation(OBSERVER_INCARNATION);
    pull_.set_shard(0);
    for (const SliceRef& ref : (*shard0)->SliceRefs()) *pull_.add_slices() = ref;
    // Taken over once ps:1 has seen the install's stream end (UNAVAILABLE until then).
    grpc::Status pulled;
    for (const absl::Time deadline = absl::Now() + absl::Seconds(10);;) {
      pulled = Pull();
      if (pulled.error_code() != grpc::StatusCode::UNAVAILABLE || absl::Now() > deadline) break;
      absl::SleepFor(absl::Milliseconds(5));
    }
    ASSERT_TRUE(pulled.ok()) << pulled.error_message();
  }

  // A pull of shard 0 from ps:1, as a worker's call that may take the shard over.
  grpc::Status Pull() {
    grpc::ClientContext context;
    PullResponse response;
    return stub_->Pull(&context, pull_, &response);
  }

  // Answers the hand-back (after `before`, when given) and pulls until ps:1 says the shard went
  // back: true then.
  bool AnswerAndSeeItGoBack(const std::function<void()>& before = nullptr) {
    if (!home_.handed_back.WaitForNotificationWithTimeout(absl::Seconds(20))) return false;
    if (before) before();
    home_.answer.Notify();
    for (const absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;) {
      const grpc::Status pulled = Pull();
      if (pulled.error_code() == grpc::StatusCode::UNAVAILABLE &&
          absl::StrContains(pulled.error_message(), "went back")) {
        return true;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }

  void TearDown() override {
    if (!home_.answer.HasBeenNotified()) home_.answer.Notify();
    if (ps1_ != nullptr) ps1_->Shutdown(absl::ZeroDuration());
    if (home_server_ != nullptr) home_server_->Shutdown(std::chrono::system_clock::now());
  }

  // The code of an install of shard 0 on ps:1, as ps:0's after it took the shard back.
  grpc::StatusCode InstallCode() {
    grpc::ClientContext context;
    auto stream = stub_->Replicate(&context);
    ReplicaAck ack;
    if (!stream->Write(install_) || !stream->Read(&ack)) return stream->Finish().error_code();
    context.TryCancel();
    stream->Finish();
    return static_cast<grpc::StatusCode>(ack.code());
  }

  HoldingHome home_;
  std::unique_ptr<grpc::Server> home_server_;
  std::unique_ptr<PsServer> ps1_;
  std::unique_ptr<ParameterServer::Stub> stub_;
  ReplicaInput install_;
  PullRequest pull_;
};

// The own ps installs its backup on the copy handing the shard back before that copy has the
// hand-back's answer (the own ps makes its replicator as it takes the shard, and its install may
// overtake its answer): the install waits (UNAVAILABLE, tried again), where fencing it off
// (ABORTED) would leave both copies refusing the shard.
TEST_F(HandBackTest, AnInstallOvertakingTheHandBacksAnswerWaitsForIt) {
  ASSERT_TRUE(home_.handed_back.WaitForNotificationWithTimeout(absl::Seconds(20)))
      << "ps:1 did not hand shard 0 back";
  EXPECT_EQ(InstallCode(), grpc::StatusCode::UNAVAILABLE);
  home_.answer.Notify();
  grpc::StatusCode code = grpc::StatusCode::UNAVAILABLE;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while ((code = InstallCode()) == grpc::StatusCode::UNAVAILABLE && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(code, grpc::StatusCode::OK) << "the own ps's install after the answer";
}

// A copy that went back, asked by a worker's call while its own ps holds the shard, leaves the
// shard there: the call hears where the shard went.
TEST_F(HandBackTest, ACopyThatWentBackLeavesTheShardToAnOwnPsHoldingIt) {
  ASSERT_TRUE(AnswerAndSeeItGoBack()) << "ps:1 did not hand shard 0 back";
  for (int i = 0; i < 5; ++i) {
    const grpc::Status pulled = Pull();
    EXPECT_EQ(pulled.error_code(), grpc::StatusCode::UNAVAILABLE) << pulled.error_message();
    EXPECT_THAT(pulled.error_message(), ::testing::HasSubstr("went back to its own ps"));
  }
  EXPECT_EQ(home_.hand_backs, 1);
  absl::MutexLock lock(&home_.mu);
  EXPECT_GE(home_.listings, 1) << "ps:1 never asked its own ps whether it holds the shard";
}

// Nor to one that never read the hand-back (the stream broke first) and holds the copy that
// ps:1's install made: a worker's call there takes that copy over.
TEST_F(HandBackTest, ACopyThatWentBackLeavesTheShardToAnOwnPsHoldingItsCopy) {
  ASSERT_TRUE(AnswerAndSeeItGoBack([this] {
    absl::MutexLock lock(&home_.mu);
    home_.holds_shard = false;
    home_.holds_copy = true;
  })) << "ps:1 did not hand shard 0 back";
  for (int i = 0; i < 5; ++i) {
    const grpc::Status pulled = Pull();
    EXPECT_EQ(pulled.error_code(), grpc::StatusCode::UNAVAILABLE) << pulled.error_message();
    EXPECT_THAT(pulled.error_message(), ::testing::HasSubstr("went back to its own ps"));
  }
  EXPECT_EQ(home_.hand_backs, 1);
}

// The own ps started again, empty, right after it took the shard back (a supervisor's restart:
// it accepts connections, so only asking it tells): the copy that went back takes the shard
// over again on a worker's call, and hands it back again.
TEST_F(HandBackTest, ACopyThatWentBackServesAgainWhenItsOwnPsIsStartedAgainAtOnce) {
  ASSERT_TRUE(home_.handed_back.WaitForNotificationWithTimeout(absl::Seconds(20)))
      << "ps:1 did not hand shard 0 back";
  home_.StartedAgain();
  home_.answer.Notify();
  grpc::Status pulled;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10);
       home_.hand_backs < 2 && absl::Now() < deadline;) {
    pulled = Pull();
    absl::SleepFor(absl::Milliseconds(5));
  }
  // At least: a pull after the second hand-back may take it over again (the home by hand never
  // holds it).
  EXPECT_GE(home_.hand_backs, 2) << "ps:1 did not take shard 0 over again and hand it back; "
                                 << "last pull: " << pulled.error_message();
}

// The own ps started again, empty, later than half of replica_unreachable_after after it took
// the shard back: it may have applied updates alone before it stopped, so the copy that went
// back may be out of date. It is dropped, never served: the call hears DATA_LOSS saying so,
// ps:1 lists no copy of the shard (psctl then recovers the job from a checkpoint).
TEST_F(HandBackTest, ACopyThatWentBackIsDroppedWhenItsOwnPsIsStartedAgainTooLate) {
  ASSERT_TRUE(AnswerAndSeeItGoBack()) << "ps:1 did not hand shard 0 back";
  absl::SleepFor(kUnreachableAfter / 2 + absl::Milliseconds(100));
  home_.StartedAgain();
  const grpc::Status pulled = Pull();
  EXPECT_EQ(pulled.error_code(), grpc::StatusCode::DATA_LOSS) << pulled.error_message();
  EXPECT_THAT(pulled.error_message(), ::testing::HasSubstr("shard 0 lost both its copies"));
  const grpc::Status again = Pull();
  EXPECT_EQ(again.error_code(), grpc::StatusCode::UNAVAILABLE) << again.error_message();
  EXPECT_THAT(again.error_message(), ::testing::HasSubstr("holds no copy of shard 0"));
  EXPECT_EQ(home_.hand_backs, 1);
  grpc::ClientContext context;
  ListJobsResponse listed;
  ASSERT_TRUE(stub_->ListJobs(&context, ListJobsRequest(), &listed).ok());
  EXPECT_EQ(listed.copies_size(), 0) << listed.DebugString();
}

// The same with an own ps that refuses the first hand-back (set before the takeover).
class RefusingHomeTest : public HandBackTest {
 protected:
  void SetUp() override {
    home_.refusals = 1;
    HandBackTest::SetUp();
  }
};

// A hand-back the own ps refuses leaves the shard served where it is, and is made again after a
// new install there.
TEST_F(RefusingHomeTest, ARefusedHandBackIsMadeAgain) {
  ASSERT_TRUE(home_.handed_back.WaitForNotificationWithTimeout(absl::Seconds(20)))
      << "ps:1 did not hand shard 0 back again after a refusal";
  EXPECT_EQ(home_.hand_backs, 2);
}

}  // namespace
}  // namespace ps
