// The fixture of the tests of replicated shards and live moves against in-process ps
// (server/replication_test.cc, server/ps_service_move_test.cc): a job of two variables whose
// workers train by hand with gradients that depend on what they read, on a cluster of ps tasks
// started in the test, and the checks that a disturbed run ends as an undisturbed one.
#ifndef PS_SERVER_TESTING_REPLICATION_TESTING_H_
#define PS_SERVER_TESTING_REPLICATION_TESTING_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/shard_job.h"
#include "server/testing/in_process_ps_cluster.h"

namespace ps {
namespace replication_testing {

constexpr int kRows = 64;
constexpr int kColumns = 100;

inline ParameterSpec Spec(const std::string& job_id, ConsistencyConfig::Mode mode, int workers) {
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
inline void Gradient(const std::vector<float>& values, int worker, int step, std::vector<float>* out) {
  out->resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    (*out)[i] = 0.5f * values[i] + std::sin(0.01f * static_cast<float>(i * (worker + 1) + step));
  }
}

// Everything a shard holds, as its checkpoint's bytes and the per-worker state an install adds.
// A socket on loopback that listens and never accepts: a connection's handshake there never
// ends. Its descriptor (-1 on failure; close it), and its "host:port" in `*address`.
inline int SilentListener(std::string* address) {
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

inline std::string StateOf(ShardJob& job) {
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

  std::unique_ptr<InProcessPsCluster> cluster_;
};


// The values of every variable of `spec`, pulled by an observer (through failovers).
inline std::vector<float> Values(InProcessPsCluster& cluster, const ParameterSpec& spec) {
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

inline void ReplicationTest::ExpectUndisturbed(const ParameterSpec& spec,
                                        const std::vector<float>& undisturbed) {
  const std::vector<float> values = Values(*cluster_, spec);
  ASSERT_EQ(values.size(), undisturbed.size());
  for (size_t i = 0; i < values.size(); ++i) {
    // SYNC: the same steps of the same gradients; only the order of a step's sum may differ.
    ASSERT_NEAR(values[i], undisturbed[i], 1e-4f) << "parameter " << i;
  }
}

inline std::vector<float> ReplicationTest::UndisturbedThenAnew(const ParameterSpec& spec, int num_ps,
                                                        int steps) {
  StartCluster(num_ps);
  TrainAll(spec, steps);
  std::vector<float> values;
  if (!HasFatalFailure()) values = Values(*cluster_, spec);
  cluster_.reset();
  StartCluster(num_ps);
  return values;
}

}  // namespace replication_testing
}  // namespace ps

#endif  // PS_SERVER_TESTING_REPLICATION_TESTING_H_
