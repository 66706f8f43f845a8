// Live moves of a shard without replicas to another ps (MoveShard; docs/replication.md "A live
// move to another ps") against in-process ps: under SYNC training, to a ps that is down, onward
// from the ps it moved to and back to its own ps.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "common/net/grpc_status.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/testing/in_process_ps_cluster.h"
#include "server/testing/replication_testing.h"

namespace ps {
namespace {

using replication_testing::kColumns;
using replication_testing::kRows;
using replication_testing::ReplicationTest;
using replication_testing::Spec;

class MoveShardTest : public ReplicationTest {
 protected:
  // What ps `ps` answers a Replicate stream of `install` alone: its refusal ("" if none).
  std::string InstallRefusal(int ps, const ReplicaInput& install) {
    std::unique_ptr<ParameterServer::Stub> stub = ParameterServer::NewStub(
        grpc::CreateChannel(cluster_->addresses()[ps], grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<ReplicaInput, ReplicaAck>> stream =
        stub->Replicate(&context);
    EXPECT_TRUE(stream->Write(install));
    stream->WritesDone();
    ReplicaAck ack;
    std::string refusal;
    if (stream->Read(&ack)) refusal = ack.message();
    const grpc::Status finished = stream->Finish();
    if (refusal.empty()) refusal = finished.error_message();
    return refusal;
  }
};

// A live move of a shard without replicas (MoveShard): SYNC training on 3 ps, shard 1 moves to
// ps:2 a third of the way through, with chunked pushes and pulls parked at the barrier in
// flight. The workers go on without an error, every step is applied once where the shard is,
// the model ends as an undisturbed run's, and ps:1 answers with where the shard went.
TEST_F(MoveShardTest, AShardWithoutReplicasMovesToAnotherPsWhileItsWorkersTrain) {
  constexpr int kPs = 3;
  constexpr int kWorkers = 3;
  constexpr int kSteps = 40;
  ParameterSpec spec = Spec("move", ConsistencyConfig::SYNC, kWorkers);
  spec.set_replicas(0);
  const std::vector<float> undisturbed = UndisturbedThenAnew(spec, kPs, kSteps);
  if (HasFatalFailure()) return;
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->CreateJob(spec).ok());
  std::shared_ptr<ShardJob> before = cluster_->server(1).service().JobForTesting(spec.job_id());
  ASSERT_NE(before, nullptr);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] { Train(spec, w, kSteps, absl::Milliseconds(2)); });
  }
  while (before->Stats().version() < kSteps / 3) absl::SleepFor(absl::Milliseconds(1));
  MoveShardResponse moved;
  const grpc::Status status = MoveShard(1, spec.job_id(), 1, 2, &moved);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GE(moved.version(), kSteps / 3);
  EXPECT_LT(moved.version(), kSteps);  // Under training.
  for (std::thread& t : workers) t.join();
  if (HasFatalFailure()) return;

  std::shared_ptr<ShardJob> after = cluster_->server(2).service().BackupForTesting(spec.job_id(), 1);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->ps_index(), 1);
  EXPECT_EQ(after->Stats().version(), kSteps);   // Every step once, where the shard is now.
  EXPECT_EQ(before->Stats().version(), moved.version());  // Nothing after the hand-over.
  ExpectUndisturbed(spec, undisturbed);
  // The shard is not on ps:1 any more: a second move there hears where it went.
  const grpc::Status again = MoveShard(1, spec.job_id(), 1, 2, &moved);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::UNAVAILABLE) << again.error_message();
  EXPECT_EQ(ShardMovedTo(again), 2) << again.error_message();

  // A client that learned where job "move"'s shard 1 went sends another job's shard 1 home.
  ParameterSpec other = Spec("other", ConsistencyConfig::ASYNC, 1);
  other.set_replicas(0);
  ASSERT_TRUE((*client)->CreateJob(other).ok());
  absl::StatusOr<std::unique_ptr<WorkerSession>> observer =
      WorkerSession::Create(client->get(), spec, 0, OBSERVER_INCARNATION);
  ASSERT_TRUE(observer.ok()) << observer.status();
  absl::StatusOr<std::unique_ptr<WorkerSession>> session =
      WorkerSession::Create(client->get(), other, 0, /*incarnation=*/1);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<float> w(kRows * kColumns), b(kColumns);
  const MutableVariables out = {{"w", absl::MakeSpan(w)}, {"b", absl::MakeSpan(b)}};
  ASSERT_TRUE((*observer)->Pull(WorkerSession::PullOptions(), out).ok());
  ASSERT_TRUE((*session)->Pull(WorkerSession::PullOptions(), out).ok());
  WorkerSession::PushOptions push;
  absl::StatusOr<std::vector<PushResponse>> pushed = (*session)->Push(
      push, {{"w", absl::MakeConstSpan(w)}, {"b", absl::MakeConstSpan(b)}});
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(cluster_->server(1).service().JobForTesting("other")->Stats().version(), 1);
}

// A move to a ps that is not running leaves the shard where it was, serving on.
TEST_F(MoveShardTest, AMoveToAPsThatIsDownLeavesTheShardWhereItWas) {
  StartCluster(3);
  ParameterSpec spec = Spec("stay", ConsistencyConfig::ASYNC, 1);
  spec.set_replicas(0);
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->CreateJob(spec).ok());
  cluster_->server(2).Shutdown(absl::ZeroDuration());
  MoveShardResponse moved;
  const grpc::Status status = MoveShard(1, spec.job_id(), 1, 2, &moved);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("stays on this ps"));
  // The shard takes pushes as before (the move's replicator is gone), ps:2 started again and
  // its shard made anew.
  ASSERT_TRUE(cluster_->Restart(2).ok());
  ASSERT_TRUE((*client)->CreateJob(spec).ok());
  std::shared_ptr<ShardJob> job = cluster_->server(1).service().JobForTesting(spec.job_id());
  ASSERT_NE(job, nullptr);
  absl::StatusOr<std::unique_ptr<WorkerSession>> session =
      WorkerSession::Create(client->get(), spec, 0, /*incarnation=*/1);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<float> w(kRows * kColumns, 0.5f), b(kColumns, 0.5f);
  const ConstVariables gradients = {{"w", absl::MakeConstSpan(w)}, {"b", absl::MakeConstSpan(b)}};
  ASSERT_TRUE((*session)
                  ->Pull(WorkerSession::PullOptions(),
                         {{"w", absl::MakeSpan(w)}, {"b", absl::MakeSpan(b)}})
                  .ok());
  const int64_t version = job->Stats().version();
  absl::StatusOr<std::vector<PushResponse>> pushed =
      (*session)->Push(WorkerSession::PushOptions(), gradients);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(job->Stats().version(), version + 1);
  // The failed move is forgotten (its replicator taken out): the shard moves once ps:2 is up.
  grpc::Status retried;
  for (int i = 0; i < 50; ++i) {
    retried = MoveShard(1, spec.job_id(), 1, 2, &moved);
    if (retried.ok() || !absl::StrContains(retried.error_message(), "moving or moved")) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(retried.ok()) << retried.error_message();
  EXPECT_EQ(moved.version(), version + 1);
  EXPECT_EQ(cluster_->server(2).service().BackupForTesting(spec.job_id(), 1)->Stats().version(),
            version + 1);
  // A ps moves only its own shard.
  EXPECT_EQ(MoveShard(1, spec.job_id(), 0, 2, &moved).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

// A moved shard moves on and comes home: SYNC training on 3 ps, shard 1 moves from ps:1 to ps:2,
// from there on to ps:0 (asked of ps:2, which serves it), and from there back to ps:1, each under
// training. The workers follow it without an error; every step is applied once; ps:1 serves it
// as its own shard again (not a moved-in copy: checkpoints resume), so it moves away again; the
// ps it left list it as moved, with where it went; and the model is the undisturbed run's.
TEST_F(MoveShardTest, AMovedShardMovesOnAndBackToItsOwnPs) {
  constexpr int kPs = 3;
  constexpr int kWorkers = 3;
  constexpr int kSteps = 60;
  ParameterSpec spec = Spec("round-trip", ConsistencyConfig::SYNC, kWorkers);
  spec.set_replicas(0);
  spec.set_worker_lease_ms(5000);  // Each copy that serves it watches the workers' leases.
  const std::vector<float> undisturbed = UndisturbedThenAnew(spec, kPs, kSteps);
  if (HasFatalFailure()) return;
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->CreateJob(spec).ok());
  std::shared_ptr<ShardJob> home = cluster_->server(1).service().JobForTesting(spec.job_id());
  ASSERT_NE(home, nullptr);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] { Train(spec, w, kSteps, absl::Milliseconds(4)); });
  }
  // Each move once the copy serving the shard (null: none, the move before failed) has taken
  // `at` steps (or 30 s passed); the version it moved at.
  auto move = [&](const std::shared_ptr<ShardJob>& serving, int64_t at, int ask, int to) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (serving != nullptr && serving->Stats().version() < at && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    MoveShardResponse moved;
    const grpc::Status status = MoveShard(ask, spec.job_id(), 1, to, &moved);
    EXPECT_TRUE(status.ok()) << "to ps:" << to << ": " << status.error_message();
    EXPECT_GE(moved.version(), at);
    return moved.version();
  };
  const int64_t first = move(home, kSteps / 4, /*ask=*/1, /*to=*/2);
  std::shared_ptr<ShardJob> away = cluster_->server(2).service().BackupForTesting(spec.job_id(), 1);
  const int64_t second = move(away, kSteps / 2, /*ask=*/2, /*to=*/0);
  std::shared_ptr<ShardJob> further =
      cluster_->server(0).service().BackupForTesting(spec.job_id(), 1);
  const int64_t third = move(further, 3 * kSteps / 4, /*ask=*/0, /*to=*/1);
  for (std::thread& t : workers) t.join();
  if (HasFatalFailure()) return;
  ASSERT_NE(away, nullptr);
  ASSERT_NE(further, nullptr);

  std::shared_ptr<ShardJob> back = cluster_->server(1).service().JobForTesting(spec.job_id());
  ASSERT_NE(back, nullptr);
  EXPECT_NE(back, home);  // The copy that came home, serving as ps:1's own shard.
  EXPECT_EQ(back->Stats().version(), kSteps);  // Every step once.
  EXPECT_EQ(home->Stats().version(), first);   // Nothing after each hand-over where it left.
  EXPECT_EQ(away->Stats().version(), second);
  EXPECT_EQ(further->Stats().version(), third);
  ExpectUndisturbed(spec, undisturbed);
  absl::StatusOr<std::vector<JobStats>> stats = (*client)->GetJobStats(spec.job_id());
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_FALSE((*stats)[1].moved_in());  // Its own ps's: checkpoints go on.
  EXPECT_EQ((*stats)[1].version(), kSteps);
  // Where it was, a record of where it went; at home none.
  auto moved_records = [&](int ps) {
    std::unique_ptr<ParameterServer::Stub> stub = ParameterServer::NewStub(
        grpc::CreateChannel(cluster_->addresses()[ps], grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    ListJobsResponse listed;
    EXPECT_TRUE(stub->ListJobs(&context, ListJobsRequest(), &listed).ok());
    std::vector<std::string> records;
    for (const ListJobsResponse::MovedShard& moved : listed.moved()) {
      records.push_back(absl::StrCat(moved.job_id(), "/", moved.shard(), "->", moved.to_ps(),
                                     "@", moved.version()));
    }
    return records;
  };
  EXPECT_THAT(moved_records(1), ::testing::IsEmpty());
  EXPECT_THAT(moved_records(2),
              ::testing::ElementsAre(absl::StrCat("round-trip/1->0@", second)));
  EXPECT_THAT(moved_records(0), ::testing::ElementsAre(absl::StrCat("round-trip/1->1@", third)));
  // At home it is ps:1's to move again; ps:0 no longer serves it, nor moves it.
  MoveShardResponse moved;
  EXPECT_EQ(MoveShard(0, spec.job_id(), 1, 2, &moved).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  const grpc::Status again = MoveShard(1, spec.job_id(), 1, 2, &moved);
  EXPECT_TRUE(again.ok()) << again.error_message();
  EXPECT_EQ(moved.version(), kSteps);
}

// The own ps of a moved shard is started again (empty) while the shard is away: a worker that
// starts afresh does not make the shard anew there (CreateJob finds the ps that serves it), and
// its pushes reach the moved copy.
TEST_F(MoveShardTest, AWorkerThatStartsAfreshFindsAShardMovedAwayFromAPsStartedAgain) {
  StartCluster(3);
  ParameterSpec spec = Spec("afresh", ConsistencyConfig::ASYNC, 1);
  spec.set_replicas(0);
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->CreateJob(spec).ok());
  MoveShardResponse moved;
  const grpc::Status status = MoveShard(1, spec.job_id(), 1, 2, &moved);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(cluster_->Restart(1).ok());

  absl::StatusOr<std::unique_ptr<PsClient>> fresh = cluster_->NewClient();
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->CreateJob(spec).ok());
  EXPECT_EQ(cluster_->server(1).service().JobForTesting(spec.job_id()), nullptr);
  std::shared_ptr<ShardJob> copy = cluster_->server(2).service().BackupForTesting(spec.job_id(), 1);
  ASSERT_NE(copy, nullptr);
  const int64_t version = copy->Stats().version();
  absl::StatusOr<std::unique_ptr<WorkerSession>> session =
      WorkerSession::Create(fresh->get(), spec, 0, /*incarnation=*/2);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<float> w(kRows * kColumns), b(kColumns);
  ASSERT_TRUE((*session)
                  ->Pull(WorkerSession::PullOptions(),
                         {{"w", absl::MakeSpan(w)}, {"b", absl::MakeSpan(b)}})
                  .ok());
  absl::StatusOr<std::vector<PushResponse>> pushed = (*session)->Push(
      WorkerSession::PushOptions(), {{"w", absl::MakeConstSpan(w)}, {"b", absl::MakeConstSpan(b)}});
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(copy->Stats().version(), version + 1);
  EXPECT_EQ(cluster_->server(1).service().JobForTesting(spec.job_id()), nullptr);
}

// A shard comes home to its own ps started again empty while it was away (a host replaced
// after `psctl drain-ps`): asked of the ps serving it, the move lands on the empty ps, which
// serves it as its own (not moved in: checkpoints resume) at the version it had, and takes the
// workers' pushes; the ps it left answers with where it went. A copy of the shard from a ps
// that does not serve it is not adopted.
TEST_F(MoveShardTest, APsStartedAgainEmptyTakesItsShardBackAsItsOwn) {
  StartCluster(3);
  ParameterSpec spec = Spec("adopted", ConsistencyConfig::ASYNC, 1);
  spec.set_replicas(0);
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->CreateJob(spec).ok());
  absl::StatusOr<std::unique_ptr<WorkerSession>> session =
      WorkerSession::Create(client->get(), spec, 0, /*incarnation=*/1);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<float> w(kRows * kColumns), b(kColumns);
  const MutableVariables out = {{"w", absl::MakeSpan(w)}, {"b", absl::MakeSpan(b)}};
  const ConstVariables gradients = {{"w", absl::MakeConstSpan(w)}, {"b", absl::MakeConstSpan(b)}};
  auto step = [&] {
    ASSERT_TRUE((*session)->Pull(WorkerSession::PullOptions(), out).ok());
    absl::StatusOr<std::vector<PushResponse>> pushed =
        (*session)->Push(WorkerSession::PushOptions(), gradients);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
  };
  for (int i = 0; i < 3; ++i) step();
  MoveShardResponse moved;
  ASSERT_TRUE(MoveShard(1, spec.job_id(), 1, 2, &moved).ok());
  step();
  ASSERT_TRUE(cluster_->Restart(1).ok());
  ASSERT_EQ(cluster_->server(1).service().JobForTesting(spec.job_id()), nullptr);
  std::shared_ptr<ShardJob> away = cluster_->server(2).service().BackupForTesting(spec.job_id(), 1);
  ASSERT_NE(away, nullptr);
  const int64_t version = away->Stats().version();
  EXPECT_EQ(version, 4);

  // Planted: ps:0 serves no copy of shard 1, so ps:1 adopts nothing it sends.
  ReplicaInput install;
  *install.mutable_install() = away->ReplicaSnapshot();
  install.mutable_install()->set_moving_from(0);
  const std::string refusal = InstallRefusal(1, install);
  EXPECT_THAT(refusal, ::testing::HasSubstr("does not serve it")) << refusal;
  EXPECT_EQ(cluster_->server(1).service().JobForTesting(spec.job_id()), nullptr);

  // Home, asked of the ps that serves it.
  const grpc::Status home = MoveShard(2, spec.job_id(), 1, 1, &moved);
  ASSERT_TRUE(home.ok()) << home.error_message();
  EXPECT_EQ(moved.version(), version);
  std::shared_ptr<ShardJob> back = cluster_->server(1).service().JobForTesting(spec.job_id());
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->Stats().version(), version);
  absl::StatusOr<std::vector<JobStats>> stats = (*client)->GetJobStats(spec.job_id());
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_FALSE((*stats)[1].moved_in());
  EXPECT_FALSE((*stats)[1].replication().took_over());
  step();  // Follows it home (ps:2 says where it went).
  EXPECT_EQ(back->Stats().version(), version + 1);
  EXPECT_EQ(away->Stats().version(), version);
  // A second job's creation by a worker started afresh finds it there: made, not anew.
  absl::StatusOr<std::unique_ptr<PsClient>> fresh = cluster_->NewClient();
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->CreateJob(spec).ok());
  EXPECT_EQ(cluster_->server(1).service().JobForTesting(spec.job_id()), back);
}

// A job deleted while its shard comes home to a ps started again empty: the copy moving in
// goes with the job there (DeleteJob answers OK, not NOT_FOUND), and its hand-back finds
// nothing to adopt.
TEST_F(MoveShardTest, AJobDeletedWhileItsShardComesHomeIsNotAdopted) {
  StartCluster(3);
  ParameterSpec spec = Spec("deleted-home", ConsistencyConfig::ASYNC, 1);
  spec.set_replicas(0);
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->CreateJob(spec).ok());
  MoveShardResponse moved;
  ASSERT_TRUE(MoveShard(1, spec.job_id(), 1, 2, &moved).ok());
  ASSERT_TRUE(cluster_->Restart(1).ok());
  std::shared_ptr<ShardJob> away = cluster_->server(2).service().BackupForTesting(spec.job_id(), 1);
  ASSERT_NE(away, nullptr);
  // The install as ps:2 would send it (ps:2 vouches for it), its hand-back held back.
  ReplicaInput install;
  install.set_seq(1);
  *install.mutable_install() = away->ReplicaSnapshot();
  install.mutable_install()->set_moving_from(2);
  std::unique_ptr<ParameterServer::Stub> ps1 = ParameterServer::NewStub(
      grpc::CreateChannel(cluster_->addresses()[1], grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<ReplicaInput, ReplicaAck>> stream =
      ps1->Replicate(&context);
  ASSERT_TRUE(stream->Write(install));
  ReplicaAck ack;
  ASSERT_TRUE(stream->Read(&ack));
  ASSERT_TRUE(ack.message().empty()) << ack.message();
  auto listed_copies = [&] {
    grpc::ClientContext list_context;
    ListJobsResponse listed;
    EXPECT_TRUE(ps1->ListJobs(&list_context, ListJobsRequest(), &listed).ok());
    return listed.copies_size();
  };
  EXPECT_EQ(listed_copies(), 1);  // Moving in.
  grpc::ClientContext delete_context;
  DeleteJobRequest remove;
  remove.set_job_id(spec.job_id());
  DeleteJobResponse removed;
  const grpc::Status deleted = ps1->DeleteJob(&delete_context, remove, &removed);
  EXPECT_TRUE(deleted.ok()) << deleted.error_message();
  EXPECT_EQ(listed_copies(), 0);
  ReplicaInput hand_back;
  hand_back.set_seq(2);
  hand_back.mutable_hand_back();
  stream->Write(hand_back);
  stream->WritesDone();
  while (stream->Read(&ack)) {
  }
  stream->Finish();
  EXPECT_EQ(cluster_->server(1).service().JobForTesting(spec.job_id()), nullptr);
}

// A ps that does not serve a shard cannot move it anywhere: an install naming another ps than
// the shard's own as where it moves from is taken only once that ps says it serves the shard.
TEST_F(MoveShardTest, ACopyFromAPsThatDoesNotServeTheShardIsRefused) {
  StartCluster(3);
  ParameterSpec spec = Spec("planted", ConsistencyConfig::ASYNC, 1);
  spec.set_replicas(0);
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient();
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->CreateJob(spec).ok());
  std::shared_ptr<ShardJob> shard = cluster_->server(1).service().JobForTesting(spec.job_id());
  ASSERT_NE(shard, nullptr);
  ReplicaInput install;
  *install.mutable_install() = shard->ReplicaSnapshot();
  install.mutable_install()->set_moving_from(2);  // ps:2 serves its own shard, not shard 1.
  const std::string refusal = InstallRefusal(0, install);
  EXPECT_THAT(refusal, ::testing::HasSubstr("ps:2 (")) << refusal;
  EXPECT_THAT(refusal, ::testing::HasSubstr("does not serve it")) << refusal;
  EXPECT_EQ(cluster_->server(0).service().BackupForTesting(spec.job_id(), 1), nullptr);
  // The shard's own ps answers for it still.
  std::unique_ptr<ParameterServer::Stub> ps0 = ParameterServer::NewStub(
      grpc::CreateChannel(cluster_->addresses()[0], grpc::InsecureChannelCredentials()));
  JobStatsRequest request;
  request.set_job_id(spec.job_id());
  request.set_shard(1);
  request.set_unreplicated(true);
  grpc::ClientContext stats_context;
  JobStats stats;
  EXPECT_EQ(ps0->GetJobStats(&stats_context, request, &stats).error_code(),
            grpc::StatusCode::UNAVAILABLE);  // ps:0 holds no moved copy: ps:1 serves it.
}

}  // namespace
}  // namespace ps
