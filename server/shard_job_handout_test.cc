// A job whose data is handed out (ParameterSpec.data_handout): the first shard hands batches
// to the workers that ask and takes each as trained on when it admits a push carrying it.
#include <map>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/shard_job.h"
#include "server/shard_job_testing.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kBatchesPerEpoch = 7;
constexpr int kEpochs = 3;
constexpr float kConstantLearningRate = 0.1f;  // Where a test sets a CONSTANT schedule.

ParameterSpec HandoutSpec(ConsistencyConfig::Mode mode) {
  ParameterSpec spec = CheckpointTestSpec(mode, OptimizerConfig::SGD);
  spec.mutable_data_handout()->set_batches_per_epoch(kBatchesPerEpoch);
  spec.mutable_data_handout()->set_epochs(kEpochs);
  return spec;
}

std::unique_ptr<ShardJob> MakeJob(const ParameterSpec& spec, int num_ps = 1, int ps_index = 0) {
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, num_ps, ps_index);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *std::move(job) : nullptr;
}

// One worker process: numbers its NextBatches requests and its pushes, and pushes a gradient of
// ones for each batch it was given.
class HandoutWorker {
 public:
  HandoutWorker(ShardJob* job, int worker) : job_(job), worker_(worker) {}

  absl::StatusOr<std::vector<int64_t>> Take(int count) {
    NextBatchesRequest request;
    request.set_job_id(job_->spec().job_id());
    request.set_run_id(job_->spec().run_id());
    request.set_worker(worker_);
    request.set_count(count);
    request.set_request_id(++requests_);
    absl::StatusOr<NextBatchesResponse> response = job_->NextBatches(request);
    if (!response.ok()) return response.status();
    EXPECT_EQ(response->batches_per_epoch(), kBatchesPerEpoch);
    return std::vector<int64_t>(response->batches().begin(), response->batches().end());
  }

  // Pushes the gradient of `batches` as the step after its last, at `step` (SYNC).
  absl::StatusOr<PushResponse> Push(const std::vector<int64_t>& batches, int64_t step) {
    PushRequestHeader header = StepPushHeader(*job_, worker_, pushes_);
    header.set_step(step);
    header.set_read_version(job_->Stats().version());
    header.mutable_batches()->Add(batches.begin(), batches.end());
    absl::StatusOr<PushResponse> response = job_->Push(
        header, std::vector<float>(static_cast<size_t>(job_->num_parameters()), 1.0f));
    if (response.ok()) ++pushes_;
    return response;
  }

 private:
  ShardJob* const job_;
  const int worker_;
  int64_t requests_ = 0;
  int64_t pushes_ = 0;
};

class HandoutModeTest : public ::testing::TestWithParam<ConsistencyConfig::Mode> {};

// Workers take batches a few at a time and push them one by one; worker 2 goes away holding
// some (SYNC: it leaves, and they go back at once; the other modes: its lease runs out, and they
// go to the others before the next epoch begins). Its late push is then refused and changes
// nothing, and the others train on what it held: every batch of every epoch once.
TEST_P(HandoutModeTest, EveryBatchIsTrainedOnceWhenAWorkerGoesAway) {
  const ConsistencyConfig::Mode mode = GetParam();
  ParameterSpec spec = HandoutSpec(mode);
  spec.set_num_workers(3);
  std::unique_ptr<ShardJob> job = MakeJob(spec);
  ASSERT_NE(job, nullptr);
  std::vector<HandoutWorker> workers;
  for (int w = 0; w < 3; ++w) workers.emplace_back(job.get(), w);

  std::map<int64_t, int> trained;
  auto push = [&](int w, int64_t batch) {
    absl::StatusOr<PushResponse> pushed = workers[w].Push({batch}, job->Stats().step());
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    ASSERT_NE(pushed->outcome(), PushResponse::DROPPED);
    ++trained[batch];
  };
  // Worker 2 takes 3 batches and trains on one.
  absl::StatusOr<std::vector<int64_t>> lost = workers[2].Take(3);
  ASSERT_TRUE(lost.ok()) << lost.status();
  ASSERT_THAT(*lost, ElementsAre(0, 1, 2));
  push(2, 0);
  if (mode == ConsistencyConfig::SYNC) {
    // Workers 0 and 1 complete step 0, which worker 2's gradient opened.
    std::vector<int64_t> first = *workers[0].Take(1);
    std::vector<int64_t> second = *workers[1].Take(1);
    push(0, first[0]);
    push(1, second[0]);
    ASSERT_TRUE(job->Leave(2, spec.run_id()).ok());
  } else {
    job->LoseWorkers({2});
  }
  auto expect_late_push_refused = [&] {
    const int64_t version = job->Stats().version();
    absl::StatusOr<PushResponse> late = workers[2].Push({1}, job->Stats().step());
    EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition) << late.status();
    EXPECT_THAT(late.status().message(), HasSubstr("batch 1 is not worker 2's"));
    EXPECT_EQ(job->Stats().version(), version);
  };
  if (mode == ConsistencyConfig::SYNC) {
    EXPECT_EQ(job->Stats().handout().batches_waiting(), 2);
    expect_late_push_refused();
  } else {
    EXPECT_EQ(job->Stats().handout().batches_held(), 2);  // Still its own, for now.
  }

  // The others drain the rest, alternating, each taking two at a time, and leave when there is
  // none left for them (as a trainer does: SYNC's steps then no longer wait for them).
  std::vector<std::vector<int64_t>> holding(2);
  std::vector<bool> left(2, false);
  bool more = true;
  while (more) {
    more = false;
    for (int w = 0; w < 2; ++w) {
      if (left[w]) continue;
      if (holding[w].empty()) {
        absl::StatusOr<std::vector<int64_t>> got = workers[w].Take(2);
        ASSERT_TRUE(got.ok()) << got.status();
        holding[w] = *got;
      }
      if (holding[w].empty()) {
        ASSERT_TRUE(job->Leave(w, spec.run_id()).ok());
        left[w] = true;
        continue;
      }
      more = true;
      push(w, holding[w].front());
      holding[w].erase(holding[w].begin());
    }
  }
  if (mode != ConsistencyConfig::SYNC) expect_late_push_refused();
  ASSERT_EQ(trained.size(), static_cast<size_t>(kBatchesPerEpoch * kEpochs));
  for (const auto& [batch, times] : trained) EXPECT_EQ(times, 1) << "batch " << batch;
  const DataHandoutStats stats = job->Stats().handout();
  EXPECT_EQ(stats.epochs_completed(), kEpochs);
  EXPECT_EQ(stats.batches_trained(), kBatchesPerEpoch * kEpochs);
  EXPECT_EQ(stats.batches_given_back(), 2);
}

INSTANTIATE_TEST_SUITE_P(EveryMode, HandoutModeTest, ::testing::ValuesIn(kEveryMode),
                         [](const auto& info) { return ConsistencyConfig::Mode_Name(info.param); });

// A shard other than the first: a worker's push reached it but not the first shard (the worker
// died mid-push), so the first shard handed the batch to another worker, whose push of it comes
// here too. The shard applies the batch once: the second push is dropped (SSP's clock moves on
// as for an applied one), and so it stays in the shard's copy on a backup ps.
class SeenBatchTest : public ::testing::TestWithParam<ConsistencyConfig::Mode> {};

TEST_P(SeenBatchTest, AShardAppliesABatchHandedOutAgainOnce) {
  ParameterSpec spec = HandoutSpec(GetParam());
  spec.set_num_workers(2);
  std::unique_ptr<ShardJob> job = MakeJob(spec, /*num_ps=*/2, /*ps_index=*/1);
  ASSERT_NE(job, nullptr);
  HandoutWorker died(job.get(), 0), other(job.get(), 1);
  absl::StatusOr<PushResponse> first = died.Push({3}, 0);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->outcome(), PushResponse::APPLIED);
  const std::vector<float> values = AllValues(job.get());
  const int64_t version = job->Stats().version();

  absl::StatusOr<PushResponse> again = other.Push({3}, 0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome(), PushResponse::DROPPED);
  EXPECT_EQ(again->drop_reason(), "batch_seen");
  EXPECT_EQ(AllValues(job.get()), values);
  EXPECT_EQ(job->Stats().version(), version);
  absl::StatusOr<PushResponse> next = other.Push({4}, 0);  // SSP: at the clock after.
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->outcome(), PushResponse::APPLIED);

  // A backup's copy (installed from the shard's checkpoint blocks) knows the batches too.
  absl::StatusOr<std::unique_ptr<ShardJob>> copy =
      ShardJob::FromReplicaSnapshot(job->ReplicaSnapshot(), Clock::Real());
  ASSERT_TRUE(copy.ok()) << copy.status();
  PushRequestHeader header = StepPushHeader(**copy, 1, 2);  // Worker 1's third push.
  header.set_read_version((*copy)->Stats().version());
  header.add_batches(4);
  absl::StatusOr<PushResponse> on_backup = (*copy)->Push(
      header, std::vector<float>(static_cast<size_t>((*copy)->num_parameters()), 1.0f));
  ASSERT_TRUE(on_backup.ok()) << on_backup.status();
  EXPECT_EQ(on_backup->drop_reason(), "batch_seen");
}

INSTANTIATE_TEST_SUITE_P(ApplyingModes, SeenBatchTest,
                         ::testing::Values(ConsistencyConfig::ASYNC, ConsistencyConfig::SSP),
                         [](const auto& info) { return ConsistencyConfig::Mode_Name(info.param); });

// Worker `worker`'s push `push_id`, of a gradient of `value`s for `batches`, to `shard` at its
// current step and version.
absl::StatusOr<PushResponse> PushValues(ShardJob* shard, int worker, int64_t push_id,
                                        const std::vector<int64_t>& batches, float value) {
  PushRequestHeader header = StepPushHeader(*shard, worker, push_id - 1);
  header.set_step(shard->Stats().step());
  header.set_read_version(shard->Stats().version());
  header.mutable_batches()->Add(batches.begin(), batches.end());
  return shard->Push(header,
                     std::vector<float>(static_cast<size_t>(shard->num_parameters()), value));
}

PushResponse::Outcome OutcomeOf(const absl::StatusOr<PushResponse>& pushed) {
  EXPECT_TRUE(pushed.ok()) << pushed.status();
  return pushed.ok() ? pushed->outcome() : PushResponse::DROPPED;
}

int64_t BatchSeenDrops(const ShardJob& job) {
  const JobStats stats = job.Stats();
  auto it = stats.dropped().find("batch_seen");
  return it == stats.dropped().end() ? 0 : it->second;
}

// How far every value moved since `before`, under SGD at kConstantLearningRate: by the learning
// rate times the mean applied.
void ExpectMoved(const std::vector<float>& before, const std::vector<float>& after, float mean) {
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    ASSERT_NEAR(before[i] - after[i], kConstantLearningRate * mean, 1e-5) << "value " << i;
  }
}

// A handout job's shard (not the first) under SGD at kConstantLearningRate.
std::unique_ptr<ShardJob> ConstantRateJob(ConsistencyConfig::Mode mode, int num_workers,
                                          int replicas_to_aggregate = 0) {
  ParameterSpec spec = HandoutSpec(mode);
  spec.set_num_workers(num_workers);
  spec.mutable_consistency()->set_replicas_to_aggregate(replicas_to_aggregate);
  spec.mutable_learning_rate()->set_kind(LearningRateSchedule::CONSTANT);
  spec.mutable_learning_rate()->set_base(kConstantLearningRate);
  return MakeJob(spec, /*num_ps=*/2, /*ps_index=*/1);
}

// SYNC, where a step needs every worker's gradient: a push of batches the shard took before
// counts for its step, so that the step does not wait for a gradient that will not come, but
// adds nothing to the step's mean; a step of such pushes only completes and changes no value.
// The mark survives the install of a backup copy mid-step.
TEST(ShardJobHandoutTest, ASyncRepeatCompletesItsStepWithoutJoiningItsMean) {
  std::unique_ptr<ShardJob> job = ConstantRateJob(ConsistencyConfig::SYNC, 2);
  ASSERT_NE(job, nullptr);
  std::vector<float> before = AllValues(job.get());
  ASSERT_EQ(OutcomeOf(PushValues(job.get(), 0, 1, {0}, 1.0f)), PushResponse::ACCUMULATED);
  ASSERT_EQ(OutcomeOf(PushValues(job.get(), 1, 1, {1}, 2.0f)), PushResponse::APPLIED);
  ExpectMoved(before, AllValues(job.get()), 1.5f);

  // Batch 0 again (its first push reached this shard): the step is worker 0's gradient alone.
  before = AllValues(job.get());
  ASSERT_EQ(OutcomeOf(PushValues(job.get(), 0, 2, {2}, 1.0f)), PushResponse::ACCUMULATED);
  ASSERT_EQ(OutcomeOf(PushValues(job.get(), 1, 2, {0}, 2.0f)), PushResponse::APPLIED);
  ExpectMoved(before, AllValues(job.get()), 1.0f);
  EXPECT_EQ(BatchSeenDrops(*job), 1);
  EXPECT_EQ(job->Stats().applied_gradients(), 3);

  // A repeat opens the step; a backup copy installed now knows it for one.
  before = AllValues(job.get());
  ASSERT_EQ(OutcomeOf(PushValues(job.get(), 0, 3, {1}, 1.0f)), PushResponse::ACCUMULATED);
  absl::StatusOr<std::unique_ptr<ShardJob>> copy =
      ShardJob::FromReplicaSnapshot(job->ReplicaSnapshot(), Clock::Real());
  ASSERT_TRUE(copy.ok()) << copy.status();
  ASSERT_EQ(OutcomeOf(PushValues(job.get(), 1, 3, {5}, 4.0f)), PushResponse::APPLIED);
  ASSERT_EQ(OutcomeOf(PushValues(copy->get(), 1, 3, {5}, 4.0f)), PushResponse::APPLIED);
  ExpectMoved(before, AllValues(job.get()), 4.0f);
  EXPECT_EQ(AllValues(copy->get()), AllValues(job.get()));

  // Repeats only: the step completes, the values stay.
  before = AllValues(job.get());
  const JobStats stats = job->Stats();
  ASSERT_EQ(OutcomeOf(PushValues(job.get(), 0, 4, {2}, 1.0f)), PushResponse::ACCUMULATED);
  ASSERT_EQ(OutcomeOf(PushValues(job.get(), 1, 4, {5}, 2.0f)), PushResponse::APPLIED);
  EXPECT_EQ(AllValues(job.get()), before);
  EXPECT_EQ(job->Stats().version(), stats.version() + 1);
  EXPECT_EQ(job->Stats().step(), stats.step() + 1);
  EXPECT_EQ(job->Stats().applied_gradients(), 4);
  EXPECT_EQ(BatchSeenDrops(*job), 4);
}

// Where nothing waits for a particular worker's gradient, a repeat is dropped and takes no real
// gradient's place: SYNC with a backup worker (R = 2 of 3 workers), SOFTSYNC (c = 4 workers /
// softsync_n 2 = 2). The next two gradients make the aggregate.
struct DroppedRepeatCase {
  ConsistencyConfig::Mode mode;
  int num_workers;
  int replicas_to_aggregate;
};

class DroppedRepeatTest : public ::testing::TestWithParam<DroppedRepeatCase> {};

TEST_P(DroppedRepeatTest, ARepeatIsDroppedWhereNothingWaitsForItsWorker) {
  std::unique_ptr<ShardJob> job = ConstantRateJob(GetParam().mode, GetParam().num_workers,
                                                  GetParam().replicas_to_aggregate);
  ASSERT_NE(job, nullptr);
  ASSERT_EQ(OutcomeOf(PushValues(job.get(), 0, 1, {0}, 1.0f)), PushResponse::ACCUMULATED);
  ASSERT_EQ(OutcomeOf(PushValues(job.get(), 1, 1, {1}, 1.0f)), PushResponse::APPLIED);
  const std::vector<float> before = AllValues(job.get());
  absl::StatusOr<PushResponse> repeat = PushValues(job.get(), 2, 1, {0}, 8.0f);
  ASSERT_TRUE(repeat.ok()) << repeat.status();
  EXPECT_EQ(repeat->outcome(), PushResponse::DROPPED);
  EXPECT_EQ(repeat->drop_reason(), "batch_seen");
  ASSERT_EQ(OutcomeOf(PushValues(job.get(), 0, 2, {2}, 2.0f)), PushResponse::ACCUMULATED);
  ASSERT_EQ(OutcomeOf(PushValues(job.get(), 1, 2, {3}, 4.0f)), PushResponse::APPLIED);
  ExpectMoved(before, AllValues(job.get()), 3.0f);
  EXPECT_EQ(job->Stats().applied_gradients(), 4);
}

INSTANTIATE_TEST_SUITE_P(
    NoWaitForAWorker, DroppedRepeatTest,
    ::testing::Values(DroppedRepeatCase{ConsistencyConfig::SYNC, 3, 2},
                      DroppedRepeatCase{ConsistencyConfig::SOFTSYNC, 4, 0}),
    [](const auto& info) { return ConsistencyConfig::Mode_Name(info.param.mode); });

// SYNC with a backup worker: the gradient that comes too late for its step is dropped, and its
// batch is used all the same (another shard may have taken that gradient: handing the batch out
// again could train on it twice there).
TEST(ShardJobHandoutTest, ADroppedPushUsesItsBatch) {
  ParameterSpec spec = HandoutSpec(ConsistencyConfig::SYNC);
  spec.set_num_workers(3);
  spec.mutable_consistency()->set_replicas_to_aggregate(2);
  std::unique_ptr<ShardJob> job = MakeJob(spec);
  ASSERT_NE(job, nullptr);
  std::vector<HandoutWorker> workers;
  for (int w = 0; w < 3; ++w) workers.emplace_back(job.get(), w);
  for (int w = 0; w < 3; ++w) ASSERT_THAT(*workers[w].Take(1), ElementsAre(w));
  ASSERT_EQ(workers[0].Push({0}, 0)->outcome(), PushResponse::ACCUMULATED);
  ASSERT_EQ(workers[1].Push({1}, 0)->outcome(), PushResponse::APPLIED);
  absl::StatusOr<PushResponse> late = workers[2].Push({2}, 0);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->outcome(), PushResponse::DROPPED);
  EXPECT_THAT(*workers[0].Take(2), ElementsAre(3, 4));
  EXPECT_EQ(job->Stats().handout().batches_trained(), 3);
}

// A worker whose lease ran out while it was only slow pushes its batches when it is back.
TEST(ShardJobHandoutTest, ASlowWorkerThatWasLostPushesItsBatches) {
  std::unique_ptr<ShardJob> job = MakeJob(HandoutSpec(ConsistencyConfig::ASYNC));
  ASSERT_NE(job, nullptr);
  HandoutWorker slow(job.get(), 0);
  ASSERT_THAT(*slow.Take(2), ElementsAre(0, 1));
  job->LoseWorkers({0});
  absl::StatusOr<PushResponse> pushed = slow.Push({0}, 0);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->outcome(), PushResponse::APPLIED);
}

TEST(ShardJobHandoutTest, RefusesWhatTheWorkerWasNotGivenAndChangesNothing) {
  std::unique_ptr<ShardJob> job = MakeJob(HandoutSpec(ConsistencyConfig::ASYNC));
  ASSERT_NE(job, nullptr);
  HandoutWorker zero(job.get(), 0), one(job.get(), 1);
  ASSERT_THAT(*zero.Take(2), ElementsAre(0, 1));
  const std::vector<float> before = AllValues(job.get());
  EXPECT_EQ(zero.Push({}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(one.Push({0}, 0).status().message(), HasSubstr("worker 0 holds it"));
  EXPECT_THAT(zero.Push({5}, 0).status().message(), HasSubstr("never handed out"));
  EXPECT_EQ(zero.Push({0, 0}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AllValues(job.get()), before);
  EXPECT_EQ(job->Stats().rejected().at("batches"), 4);

  NextBatchesRequest request;
  request.set_job_id("checkpointed");
  request.set_run_id("another-run");
  request.set_worker(0);
  request.set_count(1);
  request.set_request_id(9);
  EXPECT_EQ(job->NextBatches(request).status().code(), absl::StatusCode::kFailedPrecondition);
  request.set_run_id(job->spec().run_id());
  request.set_worker(kCheckpointTestWorkers);
  EXPECT_EQ(job->NextBatches(request).status().code(), absl::StatusCode::kInvalidArgument);
  request.set_worker(0);
  request.set_count(0);
  EXPECT_EQ(job->NextBatches(request).status().code(), absl::StatusCode::kInvalidArgument);
  request.set_count(DataHandout::kMaxHeld + 1);
  EXPECT_EQ(job->NextBatches(request).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(job->Stats().handout().batches_held(), 2);

  // Only the first shard hands out; a job without a handout has none.
  std::unique_ptr<ShardJob> second = MakeJob(HandoutSpec(ConsistencyConfig::ASYNC), 2, 1);
  request.set_count(1);
  EXPECT_THAT(second->NextBatches(request).status().message(), HasSubstr("first shard"));
  std::unique_ptr<ShardJob> fixed =
      MakeJob(CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::SGD));
  EXPECT_THAT(fixed->NextBatches(request).status().message(), HasSubstr("BY_WORKER"));
}

// A worker that restarts (a newer incarnation) gives back what its old process held; the old
// process can push none of it.
TEST(ShardJobHandoutTest, ARestartedWorkerGivesItsBatchesBack) {
  std::unique_ptr<ShardJob> job = MakeJob(HandoutSpec(ConsistencyConfig::ASYNC));
  ASSERT_NE(job, nullptr);
  HandoutWorker old_process(job.get(), 0);
  ASSERT_THAT(*old_process.Take(2), ElementsAre(0, 1));
  NextBatchesRequest request;
  request.set_job_id(job->spec().job_id());
  request.set_run_id(job->spec().run_id());
  request.set_worker(0);
  request.set_incarnation(1);
  request.set_count(3);
  request.set_request_id(1);
  absl::StatusOr<NextBatchesResponse> again = job->NextBatches(request);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(again->batches(), ElementsAre(0, 1, 2));
  EXPECT_EQ(old_process.Take(1).status().code(), absl::StatusCode::kFailedPrecondition);
}

// A checkpoint keeps what was trained on; what workers held is handed out again after a restore.
TEST(ShardJobHandoutTest, ARestoredCheckpointHandsOutWhatWasHeld) {
  std::unique_ptr<ShardJob> job = MakeJob(HandoutSpec(ConsistencyConfig::ASYNC));
  ASSERT_NE(job, nullptr);
  HandoutWorker worker(job.get(), 0);
  ASSERT_THAT(*worker.Take(4), ElementsAre(0, 1, 2, 3));
  ASSERT_TRUE(worker.Push({1}, 0).ok());
  ASSERT_TRUE(worker.Push({3}, 0).ok());
  absl::StatusOr<std::unique_ptr<ShardJob>> restored =
      ShardJob::Restore(job->Checkpoint(), 1, 0);
  ASSERT_TRUE(restored.ok()) << restored.status();
  const DataHandoutStats stats = (*restored)->Stats().handout();
  EXPECT_EQ(stats.batches_trained(), 2);
  EXPECT_EQ(stats.batches_held(), 0);
  EXPECT_EQ(stats.batches_waiting(), 2);
  HandoutWorker after(restored->get(), 1);
  EXPECT_THAT(*after.Take(3), ElementsAre(0, 2, 4));
}

}  // namespace
}  // namespace ps
