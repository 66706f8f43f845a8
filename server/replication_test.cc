// Replicated shards (ParameterSpec.replicas 2) against in-process ps: after workers train
// concurrently in every mode that keeps its model on the shards (whole and chunked pushes,
// PushPull, leaves), each shard's backup on the next ps holds exactly its primary's state; a
// backup ps that stops leaves its primary going on alone, and one that comes back is rebuilt; a
// stream that is not its primary's changes nothing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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
#include "common/checkpoint/checkpoint_file.h"
#include "common/client/ps_client.h"
#include "common/client/ps_connections.h"
#include "common/net/grpc_status.h"
#include "common/net/proto_byte_buffer.h"
#include "common/client/worker_session.h"
#include "common/process/subprocess.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/ps_server.h"
#include "server/replica_input.h"
#include "server/shard_replicator.h"
#include "server/testing/in_process_ps_cluster.h"
#include "server/testing/replication_testing.h"

namespace ps {
namespace {

using replication_testing::kColumns;
using replication_testing::kRows;
using replication_testing::SilentListener;
using replication_testing::Spec;
using replication_testing::StateOf;

class ReplicationTest : public replication_testing::ReplicationTest {
 protected:
  // The two retakes of a shard by a copy that went back (the tests that call it).
  void RetakeAfterTheOwnPsStopsAgain(bool started_again_at_once);
};

TEST_P(ReplicationTest, EveryBackupHoldsItsPrimarysStateAfterConcurrentTraining) {
  constexpr int kPs = 3;
  constexpr int kWorkers = 3;
  constexpr int kSteps = 25;
  StartCluster(kPs);
  const ParameterSpec spec = Spec("replicated", GetParam(), kWorkers);
  TrainAll(spec, kSteps);
  if (HasFatalFailure()) return;
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient();
  ASSERT_TRUE(client.ok());

  absl::StatusOr<std::vector<JobStats>> stats = (*client)->GetJobStats(spec.job_id());
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (int ps = 0; ps < kPs; ++ps) {
    SCOPED_TRACE(absl::StrCat("shard ", ps));
    const ReplicationStats& replication = (*stats)[ps].replication();
    EXPECT_EQ(replication.state(), ReplicationStats::REPLICATING);
    EXPECT_EQ(replication.divergences(), 0);
    EXPECT_EQ(replication.inputs_unreplicated(), 0);
    // Every push (whole, however it was sent) and every leave went through the backup.
    EXPECT_GE(replication.inputs_replicated(), kWorkers * kSteps + kWorkers);
    EXPECT_GT((*stats)[ps].version(), 0);
    std::shared_ptr<ShardJob> primary = cluster_->server(ps).service().JobForTesting(spec.job_id());
    std::shared_ptr<ShardJob> backup =
        cluster_->server((ps + 1) % kPs).service().BackupForTesting(spec.job_id(), ps);
    ASSERT_NE(primary, nullptr);
    ASSERT_NE(backup, nullptr);
    EXPECT_EQ(backup->ps_index(), ps);
    EXPECT_EQ(backup->Stats().version(), primary->Stats().version());
    EXPECT_TRUE(StateOf(*primary) == StateOf(*backup))
        << "the backup's values, optimizer slots, clocks or counters differ from the primary's";
  }
  // Deleting the job deletes its backups too.
  ASSERT_TRUE((*client)->DeleteJob(spec.job_id()).ok());
  for (int ps = 0; ps < kPs; ++ps) {
    EXPECT_EQ(cluster_->server(ps).service().BackupForTesting(spec.job_id(), (ps + kPs - 1) % kPs),
              nullptr);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ReplicationTest,
                         ::testing::Values(ConsistencyConfig::SYNC, ConsistencyConfig::ASYNC,
                                           ConsistencyConfig::SSP, ConsistencyConfig::SOFTSYNC),
                         [](const ::testing::TestParamInfo<ConsistencyConfig::Mode>& info) {
                           return ConsistencyConfig::Mode_Name(info.param);
                         });

// SYNC training loses a ps halfway: its shard's backup takes over, the workers move to it
// without an error or a step done twice, and the model ends as an undisturbed run's.
TEST_F(ReplicationTest, APsLostMidRunIsReplacedByItsBackupWithNoStepRedone) {
  constexpr int kPs = 3;
  constexpr int kWorkers = 3;
  constexpr int kSteps = 30;
  const ParameterSpec spec = Spec("failover", ConsistencyConfig::SYNC, kWorkers);
  const std::vector<float> undisturbed = UndisturbedThenAnew(spec, kPs, kSteps);
  if (HasFatalFailure()) return;
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->CreateJob(spec).ok());
  std::shared_ptr<ShardJob> lost = cluster_->server(1).service().JobForTesting(spec.job_id());
  ASSERT_NE(lost, nullptr);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) workers.emplace_back([&, w] { Train(spec, w, kSteps); });
  while (lost->Stats().version() < kSteps / 2) absl::SleepFor(absl::Milliseconds(1));
  cluster_->server(1).Shutdown(absl::ZeroDuration());  // Mid-step, with pulls parked.
  lost.reset();
  for (std::thread& t : workers) t.join();
  if (HasFatalFailure()) return;

  // Shard 1 lives on ps:2 now, every step applied once; shard 0 lost its backup.
  std::shared_ptr<ShardJob> promoted =
      cluster_->server(2).service().BackupForTesting(spec.job_id(), 1);
  ASSERT_NE(promoted, nullptr);
  EXPECT_EQ(promoted->ps_index(), 1);
  EXPECT_EQ(promoted->Stats().version(), kSteps);
  EXPECT_EQ(cluster_->server(0).service().JobForTesting(spec.job_id())->Stats().version(), kSteps);
  EXPECT_EQ(cluster_->server(2).service().JobForTesting(spec.job_id())->Stats().version(), kSteps);
  absl::StatusOr<std::vector<JobStats>> stats =
      (*client)->GetJobStats(spec.job_id(), /*replicated=*/true);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ((*stats)[0].replication().state(), ReplicationStats::DEGRADED);
  EXPECT_FALSE((*stats)[0].replication().took_over());
  // Shard 1, served by ps:2, rebuilds its backup on ps:1 once that is back.
  EXPECT_EQ((*stats)[1].replication().state(), ReplicationStats::DEGRADED);
  EXPECT_TRUE((*stats)[1].replication().took_over());
  EXPECT_EQ((*stats)[2].replication().state(), ReplicationStats::REPLICATING);
  ExpectUndisturbed(spec, undisturbed);
}

// The live move home: ps:1 is lost mid-run and its shard taken over by ps:2; ps:1, started
// again empty, gets the shard's backup from ps:2 and then the shard itself (copy, catch up,
// switch), while the workers train on without an error; every copy ends where it began, in
// step with its backup, and the model ends as an undisturbed run's.
TEST_F(ReplicationTest, ATakenOverShardGoesBackToItsOwnPsOnceThatIsBack) {
  constexpr int kPs = 3;
  constexpr int kWorkers = 3;
  constexpr int kSteps = 90;
  const absl::Duration kPace = absl::Milliseconds(15);
  const ParameterSpec spec = Spec("home", ConsistencyConfig::SYNC, kWorkers);
  const std::vector<float> undisturbed = UndisturbedThenAnew(spec, kPs, kSteps);
  if (HasFatalFailure()) return;
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->CreateJob(spec).ok());
  std::shared_ptr<ShardJob> own = cluster_->server(1).service().JobForTesting(spec.job_id());
  ASSERT_NE(own, nullptr);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] { Train(spec, w, kSteps, kPace); });
  }
  while (own->Stats().version() < 10) absl::SleepFor(absl::Milliseconds(1));
  cluster_->server(1).Shutdown(absl::ZeroDuration());
  own.reset();
  // Taken over by ps:2 on the workers' next step.
  std::shared_ptr<ShardJob> away;
  while ((away = cluster_->server(2).service().BackupForTesting(spec.job_id(), 1)) == nullptr ||
         away->Stats().version() < 20) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(cluster_->Restart(1).ok());
  std::shared_ptr<ShardJob> home;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while ((home = cluster_->server(1).service().JobForTesting(spec.job_id())) == nullptr &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_NE(home, nullptr) << "ps:1 did not take its shard back within 20 s";
  const int64_t back_at = home->Stats().version();
  for (std::thread& t : workers) t.join();
  if (HasFatalFailure()) return;
  EXPECT_LT(back_at, kSteps) << "the shard went back only once training had ended";

  // Shard 1 is ps:1's own again, served there to the last step and replicated to ps:2, whose
  // copy is a backup again in step with it; ps:1 holds shard 0's backup again too.
  EXPECT_EQ(home->Stats().version(), kSteps);
  std::shared_ptr<ShardJob> backup =
      cluster_->server(2).service().BackupForTesting(spec.job_id(), 1);
  ASSERT_NE(backup, nullptr);
  EXPECT_NE(backup, away) << "ps:2's promoted copy was not replaced by a backup of ps:1's";
  EXPECT_TRUE(StateOf(*home) == StateOf(*backup)) << "the copies of shard 1 differ";
  absl::StatusOr<std::vector<JobStats>> stats =
      (*client)->GetJobStats(spec.job_id(), /*replicated=*/true);
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (int shard = 0; shard < kPs; ++shard) {
    SCOPED_TRACE(absl::StrCat("shard ", shard));
    EXPECT_EQ((*stats)[shard].replication().state(), ReplicationStats::REPLICATING);
    EXPECT_FALSE((*stats)[shard].replication().took_over());
    EXPECT_EQ((*stats)[shard].replication().divergences(), 0);
  }
  EXPECT_NE(cluster_->server(1).service().BackupForTesting(spec.job_id(), 0), nullptr);
  std::unique_ptr<ParameterServer::Stub> ps2 = ParameterServer::NewStub(
      grpc::CreateChannel(cluster_->addresses()[2], grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  ListJobsResponse listed;
  ASSERT_TRUE(ps2->ListJobs(&context, ListJobsRequest(), &listed).ok());
  EXPECT_EQ(listed.copies_size(), 1);  // Shard 1's backup.
  for (const ListJobsResponse::ShardCopy& copy : listed.copies()) {
    EXPECT_FALSE(copy.serving()) << "ps:2 still serves shard " << copy.shard();
  }
  ExpectUndisturbed(spec, undisturbed);
}


// ps:1 takes its shard back from ps:2 and stops before it replicated the shard anywhere (told a
// silent address for ps:2, it waits for an answer and applies nothing meanwhile): ps:2's copy,
// which went back, serves the shard again on the workers' next step; once ps:1 is started again
// for good, the shard goes home again. No step is lost or done twice.
// ps:1, serving shard 1, stops; ps:2 takes the shard over; ps:1 is started again, told a
// silent address for ps:2 (its install there never lands), and takes the shard back. Then
// ps:1 stops again before replicating anything: for good (`started_again_at_once` false: the
// workers train on ps:2's copy, which takes the shard over again, until ps:1 is started
// again), or to be started again at once, empty and reachable (a supervisor's restart: ps:2's
// copy takes the shard over again on learning that ps:1 runs anew without it). Either way the
// shard goes home, no step is lost or done twice, and the model is the undisturbed run's.
void ReplicationTest::RetakeAfterTheOwnPsStopsAgain(bool started_again_at_once) {
  constexpr int kPs = 3;
  constexpr int kWorkers = 3;
  constexpr int kSteps = 90;
  const absl::Duration kPace = absl::Milliseconds(15);
  const ParameterSpec spec = Spec("retake", ConsistencyConfig::SYNC, kWorkers);
  const std::vector<float> undisturbed = UndisturbedThenAnew(spec, kPs, kSteps);
  if (HasFatalFailure()) return;
  // A copy retakes its shard within half of replica_unreachable_after of going back: room for a
  // test's kill on a busy machine.
  cluster_.reset();
  StartCluster(kPs, /*unreachable_after=*/absl::Seconds(4));
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->CreateJob(spec).ok());
  std::shared_ptr<ShardJob> own = cluster_->server(1).service().JobForTesting(spec.job_id());
  ASSERT_NE(own, nullptr);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] { Train(spec, w, kSteps, kPace); });
  }
  // Waits up to 20 s for `done`; false (a test failure, naming `what`) if it never came.
  auto wait_for = [](const std::function<bool()>& done, const std::string& what) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (!done() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    EXPECT_TRUE(done()) << what << " did not happen within 20 s";
    return done();
  };
  while (own->Stats().version() < 10) absl::SleepFor(absl::Milliseconds(1));
  cluster_->server(1).Shutdown(absl::ZeroDuration());
  own.reset();
  std::shared_ptr<ShardJob> away;
  bool ok = wait_for(
      [&] {
        away = cluster_->server(2).service().BackupForTesting(spec.job_id(), 1);
        return away != nullptr && away->Stats().version() >= 20;
      },
      "ps:2's takeover of shard 1");

  std::string silent_address;
  const int silent = SilentListener(&silent_address);
  ASSERT_GE(silent, 0);
  std::vector<std::string> addresses = cluster_->addresses();
  addresses[2] = silent_address;
  ok = ok && cluster_->Restart(1, addresses).ok();
  std::shared_ptr<ShardJob> taken_back;
  ok = ok && wait_for(
                 [&] {
                   taken_back = cluster_->server(1).service().JobForTesting(spec.job_id());
                   return taken_back != nullptr;
                 },
                 "the move of shard 1 back to ps:1");
  // ps:2 applies the inputs before the hand-back as their acknowledgements come, which may be
  // after ps:1 took the shard: only then is its copy where the shard went back.
  const int64_t went_back_at = ok ? taken_back->Stats().version() : 0;
  taken_back.reset();
  ok = ok && wait_for([&] { return away->Stats().version() == went_back_at; },
                      "ps:2's copy at the version shard 1 went back with");
  cluster_->server(1).Shutdown(absl::ZeroDuration());
  if (started_again_at_once) {
    ok = ok && cluster_->Restart(1).ok();
  } else {
    ok = ok && wait_for([&] { return away->Stats().version() > went_back_at; },
                        "a step on ps:2's copy after ps:1 stopped again");
    // ps:1 for good: the shard goes home again.
    ok = ok && cluster_->Restart(1).ok();
  }
  std::shared_ptr<ShardJob> home;
  ok = ok && wait_for(
                 [&] {
                   home = cluster_->server(1).service().JobForTesting(spec.job_id());
                   return home != nullptr;
                 },
                 "the second move of shard 1 back to ps:1");
  for (std::thread& t : workers) t.join();
  close(silent);
  if (HasFatalFailure() || !ok) return;

  EXPECT_EQ(home->Stats().version(), kSteps);
  std::shared_ptr<ShardJob> backup;
  ASSERT_TRUE(wait_for(
      [&] {
        backup = cluster_->server(2).service().BackupForTesting(spec.job_id(), 1);
        return backup != nullptr && backup != away;
      },
      "ps:1's install of its backup on ps:2"));
  EXPECT_TRUE(StateOf(*home) == StateOf(*backup)) << "the copies of shard 1 differ";
  ExpectUndisturbed(spec, undisturbed);
}

TEST_F(ReplicationTest, ACopyThatWentBackServesAgainWhenItsOwnPsStopsBeforeReplicatingIt) {
  RetakeAfterTheOwnPsStopsAgain(/*started_again_at_once=*/false);
}

TEST_F(ReplicationTest, ACopyThatWentBackServesAgainWhenItsOwnPsIsStartedAgainAtOnce) {
  RetakeAfterTheOwnPsStopsAgain(/*started_again_at_once=*/true);
}

TEST(ReplicationRefusals, AJobWithReplicasNeedsTwoPsAndKnownAddresses) {
  InProcessPsClusterOptions options;
  options.num_ps = 1;
  absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster = InProcessPsCluster::Start(options);
  ASSERT_TRUE(cluster.ok());
  absl::StatusOr<std::unique_ptr<PsClient>> client = (*cluster)->NewClient();
  ASSERT_TRUE(client.ok());
  absl::StatusOr<Placement> created =
      (*client)->CreateJob(Spec("one_ps", ConsistencyConfig::ASYNC, 1));
  EXPECT_EQ(created.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(created.status().message().find("add one, or set replicas to 0"), std::string::npos)
      << created.status();
  ParameterSpec three = Spec("three", ConsistencyConfig::ASYNC, 1);
  three.set_replicas(3);
  EXPECT_EQ((*client)->CreateJob(three).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*cluster)->server(0).service().JobForTesting("one_ps"), nullptr);
}

// A primary shard made by hand, replicated to ps:1 of 2 (which backs up shard 0).
class ReplicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<int> port = PickUnusedPort();
    ASSERT_TRUE(port.ok());
    address_ = absl::StrCat("127.0.0.1:", *port);
    StartBackup();
    spec_ = Spec("by_hand", ConsistencyConfig::ASYNC, 1);
    absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec_, 2, 0);
    ASSERT_TRUE(job.ok()) << job.status();
    job_ = *std::move(job);
    StartReplicator();
  }

  // The primary's replicator of job_ to the backup ps (again, as after its ps came back), at
  // `address` (address_ when empty).
  void StartReplicator(absl::Duration unreachable_after = absl::Milliseconds(300),
                       std::string address = "", bool backup_found_gone = false) {
    replicator_.reset();
    ShardReplicatorOptions options;
    options.backup_found_gone = backup_found_gone;
    options.backup_name = "ps:1";
    options.channel = grpc::CreateChannel(address.empty() ? address_ : address,
                                          grpc::InsecureChannelCredentials());
    options.unreachable_after = unreachable_after;
    options.retry_interval = absl::Milliseconds(100);
    replicator_ = std::make_unique<ShardReplicator>(job_, options);
  }

  void StartBackup() {
    PsServerOptions options;
    options.listen_address = address_;
    options.service.ps_index = 1;
    options.service.num_ps = 2;
    options.service.ps_addresses = {"127.0.0.1:1", address_};
    absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    backup_ = *std::move(server);
  }

  // Submits push `id` of worker 0 and waits for its answer.
  absl::StatusOr<PushResponse> PushAndWait(int64_t id) {
    ShardJob::ReadyPush push;
    push.header.set_job_id(spec_.job_id());
    push.header.set_run_id(spec_.run_id());
    push.header.set_worker(0);
    push.header.set_push_id(id);
    push.header.set_incarnation(1);
    push.header.set_read_version(job_->Stats().version());
    for (const SliceRef& ref : job_->SliceRefs()) *push.header.add_slices() = ref;
    push.buffer = std::make_shared<std::vector<float>>(job_->num_parameters(), 0.25f);
    absl::Notification done;
    absl::StatusOr<PushResponse> result;
    replicator_->Submit(
        PushInput(push),
        [&](absl::StatusOr<ReplicaOutcome> answer) {
          result = answer.ok() ? absl::StatusOr<PushResponse>(answer->push()) : answer.status();
          done.Notify();
        },
        push);
    done.WaitForNotification();
    return result;
  }

  bool WaitForState(ReplicationStats::State state) {
    for (int i = 0; i < 200; ++i) {
      if (replicator_->Stats().state() == state) return true;
      absl::SleepFor(absl::Milliseconds(25));
    }
    return false;
  }

  std::string address_;
  ParameterSpec spec_;
  std::unique_ptr<PsServer> backup_;
  std::shared_ptr<ShardJob> job_;
  std::unique_ptr<ShardReplicator> replicator_;
};

// While the primary streams to it, the backup refuses a worker's call for the shard, saying how
// long that stream has been open: a worker that took the primary for hung before it opened knows
// it is back (PsConnections::RecentlyHung).
TEST_F(ReplicatorTest, ABackupRefusesAWorkersCallWithItsPrimarysStreamAge) {
  const absl::Time before = absl::Now();
  ASSERT_TRUE(PushAndWait(1).ok());  // Installed and streaming.
  absl::SleepFor(absl::Milliseconds(200));
  PullRequest pull;
  pull.set_job_id(spec_.job_id());
  pull.set_run_id(spec_.run_id());
  pull.set_worker(0);
  pull.set_incarnation(1);
  pull.set_shard(0);
  for (const SliceRef& ref : job_->SliceRefs()) *pull.add_slices() = ref;
  std::unique_ptr<ParameterServer::Stub> stub = ParameterServer::NewStub(
      grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  PullResponse response;
  const grpc::Status refused = stub->Pull(&context, pull, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_THAT(refused.error_message(), ::testing::HasSubstr("still replicates shard 0"));
  const std::optional<absl::Duration> age = PrimaryStreamAge(refused);
  ASSERT_TRUE(age.has_value()) << "the refusal does not say how old the primary's stream is";
  EXPECT_GE(*age, absl::Milliseconds(200));
  EXPECT_LE(*age, absl::Now() - before);
}

// A job that grows (psctl add-worker, GrowJob) grows on both copies: the growth is an input the
// backup applies in its place among the others.
TEST_F(ReplicatorTest, AGrowthReachesTheBackupInItsOrder) {
  replicator_.reset();
  spec_.set_lost_workers_leave(true);
  spec_.mutable_data_handout()->set_batches_per_epoch(10);
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec_, 2, 0);
  ASSERT_TRUE(job.ok()) << job.status();
  job_ = *std::move(job);
  StartReplicator();
  ReplicaInput grow;
  grow.mutable_grow()->set_job_id(spec_.job_id());
  grow.mutable_grow()->set_run_id(spec_.run_id());
  ClusterJob* workers = grow.mutable_grow()->mutable_cluster()->add_jobs();
  workers->set_name("worker");
  workers->add_tasks("127.0.0.1:7");
  workers->add_tasks("127.0.0.1:8");
  absl::Notification grown;
  absl::Status status;
  replicator_->Submit(grow, [&](absl::StatusOr<ReplicaOutcome> answer) {
    status = answer.status();
    grown.Notify();
  });
  grown.WaitForNotification();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(job_->spec().num_workers(), 2);
  std::shared_ptr<ShardJob> backup = backup_->service().BackupForTesting(spec_.job_id(), 0);
  ASSERT_NE(backup, nullptr);
  EXPECT_EQ(backup->spec().num_workers(), 2);
  EXPECT_EQ(backup->spec().worker_addresses_size(), 2);
  const JobStats copy = backup->Stats();
  ASSERT_EQ(copy.workers_size(), 2);
  EXPECT_TRUE(copy.workers(1).left());  // Out of the job until it joins.
  EXPECT_EQ(StateOf(*backup), StateOf(*job_));
}

TEST_F(ReplicatorTest, GoesOnAloneWhileTheBackupIsDownAndRebuildsItWhenItIsBack) {
  for (int id = 1; id <= 5; ++id) {
    absl::StatusOr<PushResponse> pushed = PushAndWait(id);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    EXPECT_EQ(pushed->outcome(), PushResponse::APPLIED);
  }
  EXPECT_EQ(replicator_->Stats().inputs_replicated(), 5);
  std::shared_ptr<ShardJob> copy = backup_->service().BackupForTesting(spec_.job_id(), 0);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(StateOf(*copy), StateOf(*job_));

  // The backup ps stops: pushes wait, then go on alone.
  backup_->Shutdown(absl::ZeroDuration());
  backup_.reset();
  for (int id = 6; id <= 8; ++id) {
    absl::StatusOr<PushResponse> pushed = PushAndWait(id);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    EXPECT_EQ(pushed->outcome(), PushResponse::APPLIED);
  }
  ReplicationStats stats = replicator_->Stats();
  EXPECT_EQ(stats.state(), ReplicationStats::DEGRADED);
  EXPECT_EQ(stats.inputs_unreplicated(), 3);
  EXPECT_FALSE(stats.last_error().empty());
  EXPECT_EQ(job_->Stats().version(), 8);

  // Back, empty: the next stream installs the shard as it is now, and replication goes on.
  StartBackup();
  ASSERT_TRUE(WaitForState(ReplicationStats::REPLICATING));
  absl::StatusOr<PushResponse> pushed = PushAndWait(9);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  stats = replicator_->Stats();
  EXPECT_EQ(stats.installs(), 2);
  EXPECT_EQ(stats.divergences(), 0);
  copy = backup_->service().BackupForTesting(spec_.job_id(), 0);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->Stats().version(), 9);
  EXPECT_EQ(StateOf(*copy), StateOf(*job_));
  // A duplicate is a duplicate on both copies.
  pushed = PushAndWait(9);
  ASSERT_TRUE(pushed.ok());
  EXPECT_EQ(pushed->outcome(), PushResponse::DUPLICATE);
  EXPECT_EQ(replicator_->Stats().divergences(), 0);
}

// A backup whose address refuses connections is not running: the shard goes on alone at once,
// however long `unreachable_after`. One whose address accepts and never answers may be a moment
// away: inputs wait `unreachable_after` for it, unless it was found gone already.
TEST_F(ReplicatorTest, GoesOnAloneAtOnceWhenNothingListensButWaitsForASilentBackup) {
  // Push `id`: applied, leaving the shard alone (DEGRADED); how long it took.
  auto applied_alone = [this](int id) -> absl::Duration {
    const absl::Time start = absl::Now();
    absl::StatusOr<PushResponse> pushed = PushAndWait(id);
    EXPECT_TRUE(pushed.ok()) << pushed.status();
    if (pushed.ok()) {
      EXPECT_EQ(pushed->outcome(), PushResponse::APPLIED);
    }
    EXPECT_EQ(replicator_->Stats().state(), ReplicationStats::DEGRADED);
    return absl::Now() - start;
  };
  backup_->Shutdown(absl::ZeroDuration());
  backup_.reset();
  StartReplicator(/*unreachable_after=*/absl::Seconds(60));
  EXPECT_LT(applied_alone(1), absl::Seconds(10));
  EXPECT_EQ(replicator_->Stats().inputs_unreplicated(), 1);

  std::string silent_address;
  const int silent = SilentListener(&silent_address);
  ASSERT_GE(silent, 0);
  StartReplicator(/*unreachable_after=*/absl::Seconds(2), silent_address);
  EXPECT_GE(applied_alone(2), absl::Seconds(2));

  // Unless this copy took the shard over from that backup, found gone (a ps that hangs): its
  // workers waited for keepalive already, and the shard goes on alone at once.
  StartReplicator(/*unreachable_after=*/absl::Seconds(60), silent_address,
                  /*backup_found_gone=*/true);
  EXPECT_LT(applied_alone(3), absl::Seconds(10));
  replicator_.reset();
  close(silent);
}

// The primary stops streaming (its ps taken for gone); a worker's request for the shard moves
// to the backup, which takes the shard over; the old primary, back, is fenced off.
TEST_F(ReplicatorTest, AnOldPrimaryIsFencedOffOnceItsBackupTookOver) {
  ASSERT_TRUE(PushAndWait(1).ok());
  ASSERT_TRUE(PushAndWait(2).ok());
  PsClientOptions client;
  client.ps_addresses = {"127.0.0.1:1", address_};  // ps:0 is gone.
  client.initial_backoff = absl::Milliseconds(10);
  absl::StatusOr<std::unique_ptr<PsConnections>> connections = PsConnections::Create(client);
  ASSERT_TRUE(connections.ok());
  auto pull_shard_0 = [&] {
    PullRequest request;
    request.set_job_id(spec_.job_id());
    request.set_run_id(spec_.run_id());
    request.set_worker(0);
    request.set_incarnation(OBSERVER_INCARNATION);
    request.set_shard(0);
    PsConnections::Call call{0, "Pull", [request] { return SerializeToByteBuffer(request); },
                             [](const grpc::ByteBuffer&) { return absl::OkStatus(); },
                             absl::Seconds(10)};
    call.replicated = true;
    return (*connections)->RunCalls({call});
  };
  // While the primary streams to its backup, the backup keeps out of the way ("ps:0 still
  // replicates shard 0 to ps:1"): the call fails, and the primary goes on.
  absl::Status refused = pull_shard_0();
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  ASSERT_TRUE(PushAndWait(3).ok());
  EXPECT_EQ(replicator_->Stats().state(), ReplicationStats::REPLICATING);

  replicator_.reset();  // The primary's stream ends, as when its ps dies.
  // A reader's call (statistics) does not take the shard over: the primary, back, goes on.
  JobStatsRequest stats;
  stats.set_job_id(spec_.job_id());
  stats.set_shard(0);
  PsConnections::Call read{1, "GetJobStats", [stats] { return SerializeToByteBuffer(stats); },
                           [](const grpc::ByteBuffer&) { return absl::OkStatus(); },
                           absl::Seconds(10)};
  absl::Status read_status = (*connections)->RunCalls({read});
  EXPECT_TRUE(absl::IsUnavailable(read_status)) << read_status;
  StartReplicator();
  ASSERT_TRUE(WaitForState(ReplicationStats::REPLICATING));
  ASSERT_TRUE(PushAndWait(4).ok());
  replicator_.reset();
  absl::Status pulled;
  for (int i = 0; i < 100; ++i) {
    pulled = pull_shard_0();
    if (pulled.ok()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(pulled.ok()) << pulled;
  EXPECT_EQ((*connections)->Route(0), 1);
  std::shared_ptr<ShardJob> promoted = backup_->service().BackupForTesting(spec_.job_id(), 0);
  ASSERT_NE(promoted, nullptr);
  EXPECT_EQ(promoted->Stats().version(), 4);

  // The old primary comes back with its copy: the backup refuses it, and it refuses updates.
  StartReplicator();
  ASSERT_TRUE(WaitForState(ReplicationStats::FENCED));
  absl::StatusOr<PushResponse> pushed = PushAndWait(5);
  EXPECT_TRUE(absl::IsUnavailable(pushed.status())) << pushed.status();
  EXPECT_NE(pushed.status().message().find("moved to ps:1"), std::string::npos) << pushed.status();
  EXPECT_EQ(job_->Stats().version(), 4);
  EXPECT_EQ(promoted->Stats().version(), 4);
}

// The move home by hand: shard 1, served by ps:0 (which took it over), is handed back to ps:1,
// its own ps, as soon as its backup is installed there; ps:1 then serves it and ps:0's copy
// sends workers there. A second copy of ps:0 that never heard the hand-back was acknowledged
// (its stream broke first) is fenced off by ps:1's refusal, and changes nothing.
TEST_F(ReplicatorTest, AShardAwayFromItsOwnPsGoesBackAndACopyThatMissedItIsFencedOff) {
  absl::StatusOr<std::unique_ptr<ShardJob>> made = ShardJob::Create(spec_, 2, 1);
  ASSERT_TRUE(made.ok()) << made.status();
  std::shared_ptr<ShardJob> away = *std::move(made);
  auto replicate_home = [&](std::shared_ptr<ShardJob> job) {
    ShardReplicatorOptions options;
    options.backup_name = "ps:1";
    options.channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    options.retry_interval = absl::Milliseconds(100);
    options.hand_back = true;
    return std::make_unique<ShardReplicator>(std::move(job), options);
  };
  auto ready_push = [&](ShardJob& job, int64_t id) {
    ShardJob::ReadyPush ready;
    ready.header.set_job_id(spec_.job_id());
    ready.header.set_run_id(spec_.run_id());
    ready.header.set_worker(0);
    ready.header.set_push_id(id);
    ready.header.set_incarnation(1);
    ready.header.set_read_version(job.Stats().version());
    for (const SliceRef& ref : job.SliceRefs()) *ready.header.add_slices() = ref;
    ready.buffer = std::make_shared<std::vector<float>>(job.num_parameters(), 0.5f);
    return ready;
  };
  auto push = [&](ShardReplicator& replicator, int64_t id) {
    ShardJob::ReadyPush ready = ready_push(*replicator.job(), id);
    absl::Notification done;
    absl::Status result;
    replicator.Submit(
        PushInput(ready),
        [&](absl::StatusOr<ReplicaOutcome> answer) {
          result = answer.status();
          done.Notify();
        },
        ready);
    done.WaitForNotification();
    return result;
  };
  auto wait_for = [](ShardReplicator& replicator, ReplicationStats::State state) {
    for (int i = 0; i < 200 && replicator.Stats().state() != state; ++i) {
      absl::SleepFor(absl::Milliseconds(25));
    }
    return replicator.Stats().state() == state;
  };

  for (int id = 1; id <= 3; ++id) {  // While ps:1 was away.
    ShardJob::ReadyPush ready = ready_push(*away, id);
    ASSERT_TRUE(ApplyReplicaInput(*away, PushInput(ready), &ready).ok());
  }
  std::unique_ptr<ShardReplicator> going = replicate_home(away);
  ASSERT_TRUE(wait_for(*going, ReplicationStats::HANDED_BACK)) << going->Stats().DebugString();
  std::shared_ptr<ShardJob> home = backup_->service().JobForTesting(spec_.job_id());
  ASSERT_NE(home, nullptr) << "ps:1 did not take shard 1 back";
  EXPECT_EQ(home->ps_index(), 1);
  EXPECT_EQ(home->Stats().version(), 3);
  EXPECT_TRUE(StateOf(*home) == StateOf(*away));
  absl::Status refused = push(*going, 4);
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_NE(refused.message().find("went back to its own ps, ps:1"), std::string::npos) << refused;
  EXPECT_TRUE(going->Superseded());

  // ps:0 again, with its copy as of before: ps:1 (which cannot reach ps:0's address to install
  // its own backup there) refuses it, fencing it off.
  made = ShardJob::Create(spec_, 2, 1);
  ASSERT_TRUE(made.ok());
  std::unique_ptr<ShardReplicator> missed = replicate_home(*std::move(made));
  ASSERT_TRUE(wait_for(*missed, ReplicationStats::FENCED)) << missed->Stats().DebugString();
  EXPECT_NE(missed->Stats().last_error().find("took its shard 1 back"), std::string::npos)
      << missed->Stats().last_error();
  EXPECT_TRUE(absl::IsUnavailable(push(*missed, 4)));
  EXPECT_EQ(backup_->service().JobForTesting(spec_.job_id()), home);
  EXPECT_EQ(home->Stats().version(), 3);

  // A hand-back of a shard that is not the receiving ps's own is refused, and moves nothing.
  std::unique_ptr<ParameterServer::Stub> stub = ParameterServer::NewStub(
      grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->Replicate(&context);
  ReplicaInput install;
  *install.mutable_install() = job_->ReplicaSnapshot();
  ReplicaAck ack;
  ASSERT_TRUE(stream->Write(install) && stream->Read(&ack));
  ASSERT_EQ(ack.code(), 0) << ack.message();
  ReplicaInput hand_back;
  hand_back.set_seq(install.seq() + 1);
  hand_back.mutable_hand_back();
  ASSERT_TRUE(stream->Write(hand_back) && stream->Read(&ack));
  EXPECT_EQ(ack.code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_NE(ack.message().find("goes back only to its own ps, ps:0"), std::string::npos)
      << ack.message();
  EXPECT_NE(backup_->service().BackupForTesting(spec_.job_id(), 0), nullptr);
  EXPECT_EQ(backup_->service().JobForTesting(spec_.job_id()), home);
  context.TryCancel();
}

// A Replicate stream from someone who is not the shard's primary, or out of order.
TEST_F(ReplicatorTest, StreamsThatAreNotThePrimarysChangeNothing) {
  ASSERT_TRUE(PushAndWait(1).ok());
  std::shared_ptr<ShardJob> copy = backup_->service().BackupForTesting(spec_.job_id(), 0);
  ASSERT_NE(copy, nullptr);
  const std::string before = StateOf(*copy);
  std::unique_ptr<ParameterServer::Stub> stub = ParameterServer::NewStub(
      grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  auto run = [&](const std::vector<ReplicaInput>& inputs) {
    grpc::ClientContext context;
    auto stream = stub->Replicate(&context);
    ReplicaAck ack;
    for (const ReplicaInput& input : inputs) {
      if (!stream->Write(input) || !stream->Read(&ack)) break;
    }
    stream->WritesDone();
    while (stream->Read(&ack)) {
    }
    return stream->Finish();
  };
  // No install first.
  ReplicaInput push = PushInput(ShardJob::ReadyPush{
      PushRequestHeader(), std::make_shared<std::vector<float>>(4, 1.0f), true});
  push.set_seq(2);
  grpc::Status status = run({push});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("starts with an install"), std::string::npos);
  // An install of another cluster's shard.
  ReplicaInput install;
  *install.mutable_install() = job_->ReplicaSnapshot();
  install.mutable_install()->set_num_ps(3);
  status = run({install});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("backs up shard 0"), std::string::npos);
  // A corrupt snapshot.
  install.mutable_install()->set_num_ps(2);
  install.mutable_install()->set_checkpoint("not a checkpoint");
  status = run({install});
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(StateOf(*backup_->service().BackupForTesting(spec_.job_id(), 0)), before);
  // The primary's own stream goes on.
  absl::StatusOr<PushResponse> pushed = PushAndWait(2);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(replicator_->Stats().divergences(), 0);
}

}  // namespace
}  // namespace ps
