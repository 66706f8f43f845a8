// Jobs whose data is handed out (DataSpec.sharding DYNAMIC): every epoch's every batch trained
// on once, whoever computes it, in every mode that pushes gradients to the shards.
#include <numeric>
#include <thread>
#include <string>
#include <vector>

#include "worker/trainer_testing.h"

namespace ps {
namespace {

using trainer_testing::TrainerTest;
using trainer_testing::WorkerRun;

constexpr int kEpochs = 2;
// SoftmaxJob's 400 examples, less the 40 held out for the test, in batches of 16.
constexpr int64_t kBatchesPerEpoch = (360 + 15) / 16;

class HandoutTest : public TrainerTest {
 protected:
  static JobSpec HandoutJob(const std::string& id, ConsistencyConfig::Mode mode) {
    JobSpec spec = SoftmaxJob(id, mode);
    spec.mutable_data()->set_sharding(DataSpec::DYNAMIC);
    spec.clear_steps();
    spec.set_epochs(kEpochs);
    return spec;
  }
};

// The steps the workers reported in all: one per batch they trained on.
int64_t TotalSteps(const std::vector<WorkerRun>& runs) {
  int64_t steps = 0;
  for (const WorkerRun& run : runs) steps += static_cast<int64_t>(run.StepsReported());
  return steps;
}

class TrainerHandoutTest : public HandoutTest,
                           public ::testing::WithParamInterface<ConsistencyConfig::Mode> {};

TEST_P(TrainerHandoutTest, TrainsOnEveryBatchOfEveryEpochOnce) {
  StartServers(2);
  const std::string id = "handout-" + ConsistencyConfig::Mode_Name(GetParam());
  JobSpec spec = HandoutJob(id, GetParam());
  spec.mutable_consistency()->set_softsync_n(3);  // SOFTSYNC: an update of every gradient.
  std::vector<WorkerRun> runs = RunWorkers(spec, 3);
  for (const WorkerRun& run : runs) ASSERT_TRUE(run.status.ok()) << run.status;
  const std::vector<JobStats> stats = Stats(id);
  ASSERT_EQ(stats.size(), 2u);
  const DataHandoutStats& handout = stats[0].handout();
  EXPECT_EQ(handout.batches_per_epoch(), kBatchesPerEpoch);
  EXPECT_EQ(handout.epochs_completed(), kEpochs);
  EXPECT_EQ(handout.batches_trained(), kEpochs * kBatchesPerEpoch);
  EXPECT_EQ(handout.batches_held(), 0);
  EXPECT_FALSE(stats[1].has_handout());  // Only the first shard hands out.
  // Every batch a step of one worker, each gradient in exactly one update on each shard.
  EXPECT_EQ(TotalSteps(runs), kEpochs * kBatchesPerEpoch);
  for (const JobStats& shard : stats) {
    EXPECT_EQ(shard.applied_gradients(), kEpochs * kBatchesPerEpoch) << shard.ps_index();
  }
  EXPECT_EQ(runs[0].last().epoch(), kEpochs);
  EXPECT_GE(runs[0].last().eval().accuracy(), 0.75) << runs[0].last().eval().DebugString();
}

INSTANTIATE_TEST_SUITE_P(PushingModes, TrainerHandoutTest,
                         ::testing::Values(ConsistencyConfig::SYNC, ConsistencyConfig::ASYNC,
                                           ConsistencyConfig::SSP, ConsistencyConfig::SOFTSYNC),
                         [](const auto& info) { return ConsistencyConfig::Mode_Name(info.param); });

// ASYNC with Downpour's n_push and with overlapped communication: a push carries the batches of
// every step it sums, and the background push the batch of the step it hid.
TEST_F(HandoutTest, DownpourPushesCarryTheBatchesTheySum) {
  StartServers(1);
  for (const bool overlap : {false, true}) {
    const std::string id = overlap ? "handout-overlap" : "handout-npush";
    JobSpec spec = HandoutJob(id, ConsistencyConfig::ASYNC);
    if (overlap) {
      spec.mutable_downpour()->set_overlap_communication(true);
    } else {
      spec.mutable_downpour()->set_n_push(3);
    }
    std::vector<WorkerRun> runs = RunWorkers(spec, 2);
    for (const WorkerRun& run : runs) ASSERT_TRUE(run.status.ok()) << run.status;
    const DataHandoutStats handout = Stats(id)[0].handout();
    EXPECT_EQ(handout.epochs_completed(), kEpochs) << id;
    EXPECT_EQ(handout.batches_trained(), kEpochs * kBatchesPerEpoch) << id;
    EXPECT_EQ(TotalSteps(runs), kEpochs * kBatchesPerEpoch) << id;
  }
}

// Worker 1's first process took four batches and died with them; its next start (incarnation 1)
// gives them back, and the job still trains on each batch once.
TEST_F(HandoutTest, ARestartedWorkersBatchesAreTrainedOnOnce) {
  StartServers(1);
  const std::string id = "handout-restart";
  auto died_with_batches = [&](TrainerContext* context) {
    if (context->worker != 1) return;
    std::unique_ptr<PsClient> client = NewClient();
    ASSERT_NE(client, nullptr);
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (!client->GetJobStats(id).ok()) {  // Until worker 0 (the chief) has made the job.
      ASSERT_LT(absl::Now(), deadline) << "the chief never created the job";
      absl::SleepFor(absl::Milliseconds(5));
    }
    NextBatchesRequest request;
    request.set_job_id(id);
    request.set_worker(1);
    request.set_incarnation(0);
    request.set_request_id(1);
    request.set_count(4);
    absl::StatusOr<NextBatchesResponse> taken = client->NextBatches(request);
    ASSERT_TRUE(taken.ok()) << taken.status();
    ASSERT_EQ(taken->batches_size(), 4);
    context->incarnation = 1;
  };
  std::vector<WorkerRun> runs =
      RunWorkers(HandoutJob(id, ConsistencyConfig::ASYNC), 2, nullptr, nullptr, died_with_batches);
  for (const WorkerRun& run : runs) ASSERT_TRUE(run.status.ok()) << run.status;
  const DataHandoutStats handout = Stats(id)[0].handout();
  EXPECT_EQ(handout.batches_trained(), kEpochs * kBatchesPerEpoch);
  EXPECT_GE(handout.batches_given_back(), 4);
  EXPECT_EQ(TotalSteps(runs), kEpochs * kBatchesPerEpoch);
}

// Elastic workers (JobSpec.min_workers) in every pushing mode: worker 2 is not there at the
// start (its lease runs out and it is lost: SYNC's steps aggregate the others) and joins later as
// a new incarnation, as psctl starts it (SSP: at the slowest clock in the job); worker 1 stops
// half-way and leaves. Every batch is still trained on once.
constexpr int kElasticEpochs = 25;  // Long enough (about a second) for worker 2 to join.

TEST_P(TrainerHandoutTest, WorkersJoinAndLeaveAndEveryBatchIsTrainedOnce) {
  StartServers(1);
  const ConsistencyConfig::Mode mode = GetParam();
  const std::string id = "elastic-" + ConsistencyConfig::Mode_Name(mode);
  JobSpec spec = HandoutJob(id, mode);
  spec.set_epochs(kElasticEpochs);
  spec.mutable_consistency()->set_softsync_n(3);
  spec.mutable_consistency()->set_ssp_bound(2);
  spec.set_min_workers(1);
  spec.set_worker_lease_s(0.3);
  spec.mutable_stragglers()->set_distribution(StragglerSpec::UNIFORM);  // Steps of 3 ms or so.
  spec.mutable_stragglers()->set_mean_delay_ms(3);
  std::atomic<bool> leave{false};
  auto elastic = [&](TrainerContext* context) {
    if (context->worker == 1) context->stop = &leave;
    if (context->worker != 2) return;
    std::unique_ptr<PsClient> client = NewClient();
    ASSERT_NE(client, nullptr);
    // Until the others have trained a while without it, and its lease has run out.
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (true) {
      absl::StatusOr<std::vector<JobStats>> stats = client->GetJobStats(id);
      if (stats.ok() && (*stats)[0].workers(2).lost() && (*stats)[0].version() >= 20) {
        if (mode == ConsistencyConfig::SSP) context->first_step = (*stats)[0].checkpoint_clock();
        break;
      }
      ASSERT_LT(absl::Now(), deadline) << "worker 2 was never lost";
      absl::SleepFor(absl::Milliseconds(10));
    }
    context->incarnation = 1;
  };
  auto on_report = [&leave](const JobProgress& progress) {
    if (progress.worker() == 1 && progress.step() >= 30) leave = true;
  };
  std::vector<WorkerRun> runs = RunWorkers(spec, 3, nullptr, on_report, elastic);
  ASSERT_TRUE(runs[0].status.ok()) << runs[0].status;
  EXPECT_TRUE(absl::IsCancelled(runs[1].status)) << runs[1].status;
  ASSERT_TRUE(runs[2].status.ok()) << runs[2].status;
  EXPECT_GT(runs[2].StepsReported(), 0u);
  const std::vector<JobStats> stats = Stats(id);
  const DataHandoutStats& handout = stats[0].handout();
  EXPECT_EQ(handout.epochs_completed(), kElasticEpochs);
  EXPECT_EQ(handout.batches_trained(), kElasticEpochs * kBatchesPerEpoch);
  EXPECT_EQ(TotalSteps(runs), kElasticEpochs * kBatchesPerEpoch);
  EXPECT_EQ(stats[0].applied_gradients(), kElasticEpochs * kBatchesPerEpoch);
}

// A replicated job (replicas 2) whose first shard, which hands the batches out, loses its ps
// mid-run: its backup on ps:1 takes the shard over with the handout as it was (who holds what,
// each worker's last request), and every batch is still trained on once.
TEST_F(HandoutTest, TheHandoutSurvivesTheLossOfItsPs) {
  StartServers(3);
  const std::string id = "handout-replicated";
  JobSpec spec = HandoutJob(id, ConsistencyConfig::ASYNC);
  spec.set_replicas(2);
  spec.set_epochs(10);
  spec.mutable_stragglers()->set_distribution(StragglerSpec::UNIFORM);  // Steps of 2 ms or so.
  spec.mutable_stragglers()->set_mean_delay_ms(2);
  std::thread killer([&] {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      std::shared_ptr<ShardJob> first = servers_->server(0).service().JobForTesting(id);
      if (first != nullptr && first->Stats().handout().batches_trained() >= 60) {
        // The backup of the first shard is on ps:1, and has had every input with the outcome
        // the primary had: the same batches handed out, the same pushes admitted.
        std::shared_ptr<ShardJob> backup = servers_->server(1).service().BackupForTesting(id, 0);
        ASSERT_NE(backup, nullptr);
        std::unique_ptr<PsClient> client = NewClient();
        absl::StatusOr<std::vector<JobStats>> before = client->GetJobStats(id, true);
        ASSERT_TRUE(before.ok()) << before.status();
        EXPECT_GT((*before)[0].replication().inputs_replicated(), 60);
        EXPECT_EQ((*before)[0].replication().divergences(), 0);
        servers_->server(0).Shutdown(absl::ZeroDuration());
        return;
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    ADD_FAILURE() << "the job never trained 60 batches";
  });
  std::vector<WorkerRun> runs = RunWorkers(spec, 3);
  killer.join();
  for (const WorkerRun& run : runs) ASSERT_TRUE(run.status.ok()) << run.status;
  std::shared_ptr<ShardJob> promoted = servers_->server(1).service().BackupForTesting(id, 0);
  ASSERT_NE(promoted, nullptr);
  const JobStats stats = promoted->Stats();
  EXPECT_EQ(stats.handout().epochs_completed(), 10);
  EXPECT_EQ(stats.handout().batches_trained(), 10 * kBatchesPerEpoch);
  EXPECT_EQ(stats.handout().batches_held(), 0);
  EXPECT_EQ(stats.applied_gradients(), 10 * kBatchesPerEpoch);
  EXPECT_EQ(TotalSteps(runs), 10 * kBatchesPerEpoch);
  // ps:1's copy took the shard over (the loss came mid-run, not after it).
  std::unique_ptr<PsClient> client = NewClient();
  absl::StatusOr<std::vector<JobStats>> shards = client->GetJobStats(id, /*replicated=*/true);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_TRUE((*shards)[0].replication().took_over()) << (*shards)[0].replication().DebugString();
}

}  // namespace
}  // namespace ps
