// RunTrainer in the ring modes (worker/trainer_testing.h): ALLREDUCE and LOCAL_SGD against SYNC,
// LOCAL_SGD's averaging, and the bytes a worker counts per step.
#include "worker/trainer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/job/job_schema.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"
#include "proto/worker_service.pb.h"
#include "server/testing/in_process_ps_cluster.h"
#include "worker/allreduce/local_ring.h"
#include "worker/compute/compute_backend.h"
#include "worker/compute/cpu_threads.h"
#include "worker/host_variables.h"
#include "worker/trainer_testing.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using trainer_testing::TrainerTest;
using trainer_testing::WorkerRun;

// A PS worker moves about twice the model each step: its gradient out, the weights back in (plus
// each message's header). Softmax regression on 16 features and 4 classes: 68 floats, 272 bytes.
TEST_F(TrainerTest, AWorkerCountsTheBytesOfItsStepsAsTheModelSizeSays) {
  StartServers(1);
  JobSpec spec = SoftmaxJob("bytes", ConsistencyConfig::SYNC);
  spec.set_steps(30);
  std::vector<WorkerRun> runs = RunWorkers(spec, 2);
  ExpectTrainedFor(runs, 30);
  constexpr int64_t kModelBytes = 68 * 4;
  constexpr int64_t kHeaderBytes = 400;  // At most, per message.
  for (const WorkerRun& run : runs) {
    const JobProgress& last = run.last();
    // 30 gradients out; 31 weight pulls in (the first before step 0).
    EXPECT_GE(last.bytes_sent(), 30 * kModelBytes) << last.DebugString();
    EXPECT_LE(last.bytes_sent(), 30 * (kModelBytes + kHeaderBytes)) << last.DebugString();
    EXPECT_GE(last.bytes_received(), 30 * kModelBytes) << last.DebugString();
    EXPECT_LE(last.bytes_received(), 31 * (kModelBytes + kHeaderBytes)) << last.DebugString();
  }
}

// The largest difference between two models of the same shape.
float MaxDifference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float largest = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    largest = std::max(largest, std::abs(a[i] - b[i]));
  }
  return largest;
}

// ALLREDUCE averages the gradients among the workers and applies the optimizer on each: with
// the same seed it ends where SYNC (every worker's gradient a step) ends, to float rounding;
// the chief's published model is the shards'. With momentum, so that the workers' optimizer
// state matters too.
TEST_F(TrainerTest, AllReduceEqualsSync) {
  StartServers(2);
  JobSpec sync = SoftmaxJob("equal_sync", ConsistencyConfig::SYNC);
  sync.mutable_optimizer()->set_kind(OptimizerConfig::MOMENTUM);
  sync.mutable_learning_rate()->set_base(0.05f);
  JobSpec allreduce = sync;
  allreduce.set_job_id("equal_allreduce");
  allreduce.mutable_consistency()->set_mode(ConsistencyConfig::ALLREDUCE);
  ExpectTrainedFor(RunWorkers(sync, 3), 30);
  std::vector<WorkerRun> runs = RunWorkers(allreduce, 3);
  ExpectTrainedFor(runs, 30);
  const std::vector<float> expected = ShardValues("equal_sync");
  const std::vector<float> actual = ShardValues("equal_allreduce");
  ASSERT_FALSE(expected.empty());
  EXPECT_LT(MaxDifference(expected, actual), 1e-6f);
  // Each worker moved 2 (N - 1) / N of the gradients a step through the ring, plus its one pull.
  const int64_t model_bytes = 68 * 4;
  for (const WorkerRun& run : runs) {
    EXPECT_GE(run.last().bytes_sent(), 30 * 2 * 2 * model_bytes / 3 - 30 * 8);
    EXPECT_LE(run.last().bytes_sent(), 30 * 2 * 2 * model_bytes / 3 + 30 * 8 + 4 * model_bytes);
  }
}

// Local SGD with one local step and plain SGD averages w - lr g_i, which is w - lr mean(g_i):
// SYNC's update.
TEST_F(TrainerTest, LocalSgdWithOneStepEqualsSync) {
  StartServers(1);
  JobSpec sync = SoftmaxJob("local1_sync", ConsistencyConfig::SYNC);
  JobSpec local = sync;
  local.set_job_id("local1");
  local.mutable_consistency()->set_mode(ConsistencyConfig::LOCAL_SGD);
  local.mutable_consistency()->set_local_steps(1);
  ExpectTrainedFor(RunWorkers(sync, 2), 30);
  ExpectTrainedFor(RunWorkers(local, 2), 30);
  EXPECT_LT(MaxDifference(ShardValues("local1_sync"), ShardValues("local1")), 1e-6f);
}

// With more local steps the copies drift apart between averagings and are averaged after the
// last step, so the published model is every worker's, and it has trained.
TEST_F(TrainerTest, LocalSgdAveragesEveryKStepsAndAtTheEnd) {
  StartServers(1);
  JobSpec local = SoftmaxJob("local4", ConsistencyConfig::LOCAL_SGD);
  local.mutable_consistency()->set_local_steps(4);
  local.set_steps(30);  // Averaged at 4, 8, ..., 28, and after 30.
  std::vector<WorkerRun> runs = RunWorkers(local, 2);
  ExpectTrainedFor(runs, 30);
  // 7 averagings of the model through the ring by the last step's report, each
  // 2 (N - 1) / N = 1 model for N = 2 (the 8th, after it, is in the job's final progress).
  for (const WorkerRun& run : runs) {
    EXPECT_GE(run.last().bytes_sent(), 7 * 68 * 4) << run.last().DebugString();
    EXPECT_LE(run.last().bytes_sent(), 7 * 68 * 4 + 400) << run.last().DebugString();
  }
}

}  // namespace
}  // namespace ps
