// move_shard_bench: what a live move of a shard (MoveShard, docs/replication.md "A live move to
// another ps") costs the workers training on it. Two in-process ps hold an ASYNC job of one
// variable of --size_mb MiB (half on each shard); --workers workers push and pull the whole
// model in a loop. After --warmup_s, shard 0 moves to ps:1 (a new cluster and job each round).
// Per round it prints one JSON line: the move's time (the
// MoveShard call), the longest step of any worker while it ran, and the workers' steps per
// second in the second before the move and the second after it.
//
//   bazel run -c opt //bench:move_shard_bench -- --size_mb=16,64 --rounds=3
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "common/process/daemon.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/testing/in_process_ps_cluster.h"

DEFINE_string(size_mb, "16,64", "the model's sizes, MiB, comma-separated");
DEFINE_int32(workers, 2, "workers pushing and pulling the whole model in a loop");
DEFINE_int32(rounds, 3, "moves per size");
DEFINE_double(warmup_s, 1.0, "training before each move, seconds");

namespace ps {
namespace {

// When each step of every worker ended, and how long it took.
struct Steps {
  absl::Mutex mu;
  std::vector<std::pair<absl::Time, absl::Duration>> ended ABSL_GUARDED_BY(mu);
};

void Train(InProcessPsCluster* cluster, const ParameterSpec& spec, int worker,
           std::atomic<bool>* stop, Steps* steps) {
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster->NewClient();
  CHECK(client.ok()) << client.status();
  absl::StatusOr<std::unique_ptr<WorkerSession>> session =
      WorkerSession::Create(client->get(), spec, worker, /*incarnation=*/1);
  CHECK(session.ok()) << session.status();
  const int64_t size = spec.variables(0).shape(0);
  std::vector<float> values(size), gradient(size, 1e-6f);
  const MutableVariables out = {{"w", absl::MakeSpan(values)}};
  const ConstVariables in = {{"w", absl::MakeConstSpan(gradient)}};
  CHECK((*session)->Pull(WorkerSession::PullOptions(), out).ok());
  while (!stop->load()) {
    const absl::Time start = absl::Now();
    absl::StatusOr<WorkerSession::PushPullResult> stepped = (*session)->PushPull(
        WorkerSession::PushOptions(), in, WorkerSession::PullOptions(), out);
    CHECK(stepped.ok()) << "worker " << worker << ": " << stepped.status();
    const absl::Time end = absl::Now();
    absl::MutexLock lock(&steps->mu);
    steps->ended.emplace_back(end, end - start);
  }
}

void Round(int64_t size_mb, int round) {
  InProcessPsClusterOptions options;
  options.num_ps = 2;
  absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
      InProcessPsCluster::Start(options);
  CHECK(cluster.ok()) << cluster.status();
  ParameterSpec spec;
  spec.set_job_id(absl::StrCat("move", round));
  spec.set_num_workers(FLAGS_workers);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  spec.mutable_learning_rate()->set_base(1e-6f);
  VariableDef* w = spec.add_variables();
  w->set_name("w");
  w->add_shape(size_mb << 18);  // Floats.
  absl::StatusOr<std::unique_ptr<PsClient>> client = (*cluster)->NewClient();
  CHECK(client.ok());
  CHECK((*client)->CreateJob(spec).ok());
  std::atomic<bool> stop{false};
  Steps steps;
  std::vector<std::thread> workers;
  for (int i = 0; i < FLAGS_workers; ++i) {
    workers.emplace_back(Train, cluster->get(), spec, i, &stop, &steps);
  }
  absl::SleepFor(absl::Seconds(FLAGS_warmup_s));
  std::unique_ptr<ParameterServer::Stub> ps0 = ParameterServer::NewStub(
      grpc::CreateChannel((*cluster)->addresses()[0], grpc::InsecureChannelCredentials()));
  MoveShardRequest move;
  move.set_job_id(spec.job_id());
  move.set_shard(0);
  move.set_to_ps(1);
  MoveShardResponse moved;
  grpc::ClientContext context;
  const absl::Time started = absl::Now();
  const grpc::Status status = ps0->MoveShard(&context, move, &moved);
  const absl::Time ended = absl::Now();
  CHECK(status.ok()) << status.error_message();
  absl::SleepFor(absl::Seconds(1));
  stop = true;
  for (std::thread& t : workers) t.join();
  absl::Duration longest;
  int before = 0, after = 0;
  {
    absl::MutexLock lock(&steps.mu);
    for (const auto& [end, took] : steps.ended) {
      if (end >= started && end - took <= ended) longest = std::max(longest, took);
      if (end < started && end >= started - absl::Seconds(1)) ++before;
      if (end > ended && end <= ended + absl::Seconds(1)) ++after;
    }
  }
  std::printf(
      "{\"size_mb\": %lld, \"round\": %d, \"move_ms\": %.1f, \"longest_step_during_ms\": %.1f, "
      "\"steps_per_s_before\": %d, \"steps_per_s_after\": %d, \"version_at_move\": %lld}\n",
      static_cast<long long>(size_mb), round, absl::ToDoubleMilliseconds(ended - started),
      absl::ToDoubleMilliseconds(longest), before, after,
      static_cast<long long>(moved.version()));
  std::fflush(stdout);
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ps::TuneForTensorTraffic();  // As the daemons do.
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  for (absl::string_view size : absl::StrSplit(FLAGS_size_mb, ',', absl::SkipEmpty())) {
    int64_t mb = 0;
    CHECK(absl::SimpleAtoi(size, &mb) && mb > 0) << "--size_mb: " << size;
    for (int round = 0; round < FLAGS_rounds; ++round) ps::Round(mb, round);
  }
  return 0;
}
