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

namespace ps {
namespace {

constexpr int kRows = 64;
constexpr int kColumns = 100;

ParameterSpec Spec(const std::string& job_id, ConsistencyConfig::Mode mode, int workers) {
  ParameterSpec spec;
  spec.set_job_id(job_id);
  spec.set_run_id("run-1");
  spec.set_num_workers(workers);
  spec.set_replicas(2);
  spec.set_min_slice_bytes(8 * kColumns * sizeof(float));  // Several slices per shard.
  VariableDef* w = spec.add_variables();
  w->set_name("w");
  w->add_shape(kRows);
  w->add_shape(kColumns);
  w->mutable_initializer()->set_kind(InitializerConfig::NORMAL);
  w->mutable_initializer()->set_scale(0.1f);
  VariableDef* b = spec.add_variables();
  b->set_name("b");
  b->add_shape(kColumns);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  spec.mutable_learning_rate()->set_base(0.01f);
  spec.mutable_consistency()->set_mode(mode);
  if (mode == ConsistencyConfig::SSP) spec.mutable_consistency()->set_ssp_bound(1);
  if (mode == ConsistencyConfig::SOFTSYNC) spec.mutable_consistency()->set_softsync_n(1);
  return spec;
}

// A gradient that depends on the values read, the worker and the step.
void Gradient(const std::vector<float>& values, int worker, int step, std::vector<float>* out) {
  out->resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    (*out)[i] = 0.5f * values[i] + std::sin(0.01f * static_cast<float>(i * (worker + 1) + step));
  }
}

// Everything a shard holds, as its checkpoint's bytes and the per-worker state an install adds.
// A socket on loopback that listens and never accepts: a connection's handshake there never
// ends. Its descriptor (-1 on failure; close it), and its "host:port" in `*address`.
int SilentListener(std::string* address) {
  const int silent = socket(AF_INET, SOCK_STREAM, 0);
  if (silent < 0) return -1;
  sockaddr_in bound{};
  bound.sin_family = AF_INET;
  bound.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(bound);
  if (bind(silent, reinterpret_cast<sockaddr*>(&bound), sizeof(bound)) != 0 ||
      listen(silent, 16) != 0 ||
      getsockname(silent, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    close(silent);
    return -1;
  }
  *address = absl::StrCat("127.0.0.1:", ntohs(bound.sin_port));
  return silent;
}

std::string StateOf(ShardJob& job) {
  ReplicaInstall snapshot = job.ReplicaSnapshot();
  snapshot.clear_shard();  // The same on both copies anyway.
  return snapshot.SerializeAsString();
}

class ReplicationTest : public ::testing::TestWithParam<ConsistencyConfig::Mode> {
 protected:
  void StartCluster(int num_ps, absl::Duration unreachable_after = absl::Milliseconds(300)) {
    InProcessPsClusterOptions options;
    options.num_ps = num_ps;
    options.server.service.replica_unreachable_after = unreachable_after;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }

  // Worker `worker` trains `steps` steps: pull, gradient, push, each at least `pace` long. Even
  // workers push in chunks of 4 KiB, odd ones whole with PushPull.
  void Train(const ParameterSpec& spec, int worker, int steps,
             absl::Duration pace = absl::ZeroDuration()) {
    PsClientOptions options;
    if (worker % 2 == 0) options.chunk_bytes = 4 << 10;
    absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient(options);
    ASSERT_TRUE(client.ok()) << client.status();
    absl::StatusOr<std::unique_ptr<WorkerSession>> session =
        WorkerSession::Create(client->get(), spec, worker, /*incarnation=*/1);
    ASSERT_TRUE(session.ok()) << session.status();
    std::vector<float> w(kRows * kColumns), b(kColumns), gw, gb;
    const bool ssp = spec.consistency().mode() == ConsistencyConfig::SSP;
    const bool sync = spec.consistency().mode() == ConsistencyConfig::SYNC;
    WorkerSession::PullOptions pull;
    absl::StatusOr<WorkerSession::PullResult> pulled =
        (*session)->Pull(pull, {{"w", absl::MakeSpan(w)}, {"b", absl::MakeSpan(b)}});
    ASSERT_TRUE(pulled.ok()) << pulled.status();
    for (int step = 0; step < steps; ++step) {
      absl::SleepFor(pace);
      Gradient(w, worker, step, &gw);
      Gradient(b, worker, step, &gb);
      WorkerSession::PushOptions push;
      push.step = sync ? step : 0;
      push.clock = ssp ? step : 0;
      pull.step = sync ? step + 1 : 0;
      pull.clock = ssp ? step + 1 : 0;
      const ConstVariables gradients = {{"w", absl::MakeConstSpan(gw)},
                                        {"b", absl::MakeConstSpan(gb)}};
      const MutableVariables out = {{"w", absl::MakeSpan(w)}, {"b", absl::MakeSpan(b)}};
      absl::StatusOr<WorkerSession::PushPullResult> result =
          (*session)->PushPull(push, gradients, pull, out);
      ASSERT_TRUE(result.ok()) << "worker " << worker << " step " << step << ": "
                               << result.status();
    }
    absl::Status left =
        (*client)->LeaveJob(spec.job_id(), spec.run_id(), worker, spec.replicas() > 1);
    ASSERT_TRUE(left.ok()) << left;
  }

  // Creates `spec`'s job and trains its workers, each `steps` steps, concurrently.
  void TrainAll(const ParameterSpec& spec, int steps) {
    absl::StatusOr<std::unique_ptr<PsClient>> client = cluster_->NewClient();
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE((*client)->CreateJob(spec).ok());
    std::vector<std::thread> workers;
    for (int w = 0; w < spec.num_workers(); ++w) {
      workers.emplace_back([&, w] { Train(spec, w, steps); });
    }
    for (std::thread& t : workers) t.join();
  }

  // The values of `spec` after `steps` undisturbed steps of every worker on a new cluster of
  // `num_ps`; then a new cluster, without the job, in cluster_.
  std::vector<float> UndisturbedThenAnew(const ParameterSpec& spec, int num_ps, int steps);
  // Checks that cluster_ holds `spec`'s values as `undisturbed` (UndisturbedThenAnew's).
  void ExpectUndisturbed(const ParameterSpec& spec, const std::vector<float>& undisturbed);
  // Asks ps `ask` to move shard `shard` of job `job_id` to ps `to` (MoveShard); `moved` gets
  // the answer.
  grpc::Status MoveShard(int ask, const std::string& job_id, int shard, int to,
                         MoveShardResponse* moved) {
    std::unique_ptr<ParameterServer::Stub> ps = ParameterServer::NewStub(
        grpc::CreateChannel(cluster_->addresses()[ask], grpc::InsecureChannelCredentials()));
    MoveShardRequest move;
    move.set_job_id(job_id);
    move.set_shard(shard);
    move.set_to_ps(to);
    grpc::ClientContext context;
    return ps->MoveShard(&context, move, moved);
  }
  // The two retakes of a shard by a copy that went back (the tests that call it).
  void RetakeAfterTheOwnPsStopsAgain(bool started_again_at_once);

  std::unique_ptr<InProcessPsCluster> cluster_;
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

// The values of every variable of `spec`, pulled by an observer (through failovers).
std::vector<float> Values(InProcessPsCluster& cluster, const ParameterSpec& spec) {
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster.NewClient();
  EXPECT_TRUE(client.ok());
  std::vector<float> values(kRows * kColumns + kColumns);
  absl::Status pulled = PullCurrentValues(
      client->get(), spec,
      {{"w", absl::MakeSpan(values).first(kRows * kColumns)},
       {"b", absl::MakeSpan(values).last(kColumns)}});
  EXPECT_TRUE(pulled.ok()) << pulled;
  return values;
}

void ReplicationTest::ExpectUndisturbed(const ParameterSpec& spec,
                                        const std::vector<float>& undisturbed) {
  const std::vector<float> values = Values(*cluster_, spec);
  ASSERT_EQ(values.size(), undisturbed.size());
  for (size_t i = 0; i < values.size(); ++i) {
    // SYNC: the same steps of the same gradients; only the order of a step's sum may differ.
    ASSERT_NEAR(values[i], undisturbed[i], 1e-4f) << "parameter " << i;
  }
}

std::vector<float> ReplicationTest::UndisturbedThenAnew(const ParameterSpec& spec, int num_ps,
                                                        int steps) {
  StartCluster(num_ps);
  TrainAll(spec, steps);
  std::vector<float> values;
  if (!HasFatalFailure()) values = Values(*cluster_, spec);
  cluster_.reset();
  StartCluster(num_ps);
  return values;
}

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

// A live move of a shard without replicas (MoveShard): SYNC training on 3 ps, shard 1 moves to
// ps:2 a third of the way through, with chunked pushes and pulls parked at the barrier in
// flight. The workers go on without an error, every step is applied once where the shard is,
// the model ends as an undisturbed run's, and ps:1 answers with where the shard went.
TEST_F(ReplicationTest, AShardWithoutReplicasMovesToAnotherPsWhileItsWorkersTrain) {
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
TEST_F(ReplicationTest, AMoveToAPsThatIsDownLeavesTheShardWhereItWas) {
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
