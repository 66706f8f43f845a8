// ShardJob::Grow: an elastic job whose data is handed out gets workers its ClusterSpec did not
// have. Each new worker stays out of the job until its first request joins it; the mode then
// counts it (SYNC's steps wait for its gradient, SSP's bound for its clock).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/simulated_clock.h"
#include "server/shard_job.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kRun[] = "run-1";
const std::vector<std::string> kTwo = {"h1:1", "h1:2"};
const std::vector<std::string> kThree = {"h1:1", "h1:2", "h2:1"};

ParameterSpec GrowableSpec(ConsistencyConfig::Mode mode) {
  ParameterSpec spec;
  spec.set_job_id("growing");
  spec.set_run_id(kRun);
  VariableDef* variable = spec.add_variables();
  variable->set_name("w");
  variable->add_shape(4);
  spec.mutable_learning_rate()->set_base(0.1f);
  spec.mutable_consistency()->set_mode(mode);
  spec.mutable_consistency()->set_ssp_bound(1);
  spec.set_num_workers(2);
  spec.set_lost_workers_leave(true);
  spec.set_worker_lease_ms(60'000);
  spec.mutable_data_handout()->set_batches_per_epoch(100);
  spec.mutable_data_handout()->set_epochs(1);
  return spec;
}

std::unique_ptr<ShardJob> MakeJob(const ParameterSpec& spec, Clock* clock = Clock::Real()) {
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, 1, 0, clock);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *std::move(job) : nullptr;
}

// One worker process: takes a batch for each push and pushes a gradient of ones for it.
class Worker {
 public:
  Worker(ShardJob* job, int worker, int incarnation = 0)
      : job_(job), worker_(worker), incarnation_(incarnation) {}

  // Its pull of `step` (SYNC) and `clock` (SSP): whether it was answered at once.
  bool Pull(int64_t step) {
    PullRequest pull;
    pull.set_job_id(job_->spec().job_id());
    pull.set_run_id(kRun);
    pull.set_worker(worker_);
    pull.set_incarnation(incarnation_);
    pull.set_step(step);
    pull.set_clock(step);
    std::optional<absl::Status> answered;
    job_->Pull(pull, [&answered](absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
      answered = snapshot.status();
    });
    if (answered.has_value()) {
      EXPECT_TRUE(answered->ok()) << *answered;
    }
    return answered.has_value();
  }

  // Takes the next batch handed out (held until pushed).
  absl::StatusOr<NextBatchesResponse> Take() {
    NextBatchesRequest take;
    take.set_job_id(job_->spec().job_id());
    take.set_run_id(kRun);
    take.set_worker(worker_);
    take.set_incarnation(incarnation_);
    take.set_count(1);
    take.set_request_id(++requests_);
    return job_->NextBatches(take);
  }

  absl::Status Push(int64_t step) {
    absl::StatusOr<NextBatchesResponse> batches = Take();
    if (!batches.ok()) return batches.status();
    PushRequestHeader header;
    header.set_job_id(job_->spec().job_id());
    header.set_run_id(kRun);
    header.set_worker(worker_);
    header.set_incarnation(incarnation_);
    header.set_push_id(++pushes_);
    header.set_step(step);
    header.set_clock(step);
    header.set_read_version(job_->Stats().version());
    *header.mutable_batches() = batches->batches();
    for (const SliceRef& ref : job_->SliceRefs()) *header.add_slices() = ref;
    return job_->Push(header, std::vector<float>(4, 1.0f)).status();
  }

 private:
  ShardJob* const job_;
  const int worker_;
  const int incarnation_;
  int64_t requests_ = 0;
  int64_t pushes_ = 0;
};

TEST(ShardJobGrowTest, ASyncJobsNewWorkerIsOutOfItUntilItJoinsThenEachStepWaitsForIt) {
  std::unique_ptr<ShardJob> job = MakeJob(GrowableSpec(ConsistencyConfig::SYNC));
  ASSERT_NE(job, nullptr);
  Worker zero(job.get(), 0), one(job.get(), 1);
  ASSERT_TRUE(zero.Push(0).ok());
  ASSERT_TRUE(one.Push(0).ok());
  ASSERT_EQ(job->Stats().step(), 1);

  const ParameterSpec& before = job->spec();
  ASSERT_TRUE(job->Grow(kRun, kThree).ok());
  EXPECT_EQ(before.num_workers(), 2);  // A reference the job gave stays as it was.
  EXPECT_EQ(job->spec().num_workers(), 3);
  EXPECT_THAT(job->spec().worker_addresses(), ElementsAre("h1:1", "h1:2", "h2:1"));
  JobStats stats = job->Stats();
  ASSERT_EQ(stats.workers_size(), 3);
  EXPECT_TRUE(stats.workers(2).left());
  EXPECT_TRUE(stats.workers(2).lost());

  // Step 1 does not wait for worker 2, which has not joined.
  ASSERT_TRUE(zero.Push(1).ok());
  ASSERT_TRUE(one.Push(1).ok());
  ASSERT_EQ(job->Stats().step(), 2);

  // Its first pull (incarnation 1, as psctl starts it) joins it: step 2 needs its gradient.
  Worker two(job.get(), 2, /*incarnation=*/1);
  ASSERT_TRUE(two.Pull(2));
  ASSERT_TRUE(zero.Push(2).ok());
  ASSERT_TRUE(one.Push(2).ok());
  stats = job->Stats();
  EXPECT_EQ(stats.step(), 2);
  EXPECT_THAT(stats.waiting_for(), ElementsAre(2));
  EXPECT_FALSE(stats.workers(2).left());
  EXPECT_FALSE(stats.workers(2).lost());
  ASSERT_TRUE(two.Push(2).ok());
  EXPECT_EQ(job->Stats().step(), 3);
  EXPECT_EQ(job->Stats().workers(2).applied(), 1);
}

TEST(ShardJobGrowTest, AnSspJobsBoundCountsTheNewWorkerOnlyOnceItJoins) {
  std::unique_ptr<ShardJob> job = MakeJob(GrowableSpec(ConsistencyConfig::SSP));
  ASSERT_NE(job, nullptr);
  ASSERT_TRUE(job->Grow(kRun, kThree).ok());
  Worker zero(job.get(), 0), one(job.get(), 1);
  for (int64_t clock = 0; clock < 3; ++clock) {
    ASSERT_TRUE(zero.Push(clock).ok());
    ASSERT_TRUE(one.Push(clock).ok());
  }
  EXPECT_TRUE(zero.Pull(3));  // Worker 2's clock of 0 does not hold it back.
  // Worker 2 joins at clock 3, the others' (as psctl starts a late SSP worker).
  Worker two(job.get(), 2, /*incarnation=*/1);
  ASSERT_TRUE(two.Pull(3));
  ASSERT_TRUE(zero.Push(3).ok());
  EXPECT_FALSE(zero.Pull(5));  // Two clocks ahead of worker 2's 3, over the bound of 1.
  ASSERT_TRUE(two.Push(3).ok());
}

TEST(ShardJobGrowTest, OnlyAnElasticJobWithItsDataHandedOutGrows) {
  auto refusal = [](const ParameterSpec& spec, const std::vector<std::string>& addresses) {
    std::unique_ptr<ShardJob> job = MakeJob(spec);
    absl::Status status = job->Grow(kRun, addresses);
    EXPECT_EQ(job->spec().num_workers(), spec.num_workers());  // Nothing changed.
    return status;
  };
  ParameterSpec fixed = GrowableSpec(ConsistencyConfig::SYNC);
  fixed.set_lost_workers_leave(false);
  absl::Status status = refusal(fixed, kThree);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("only an elastic job (min_workers) grows"));

  ParameterSpec static_data = GrowableSpec(ConsistencyConfig::ASYNC);
  static_data.clear_data_handout();
  status = refusal(static_data, kThree);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("\"sharding\": \"DYNAMIC\""));

  status = refusal(GrowableSpec(ConsistencyConfig::ASYNC), {"h1:1"});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("does not shrink"));

  std::unique_ptr<ShardJob> job = MakeJob(GrowableSpec(ConsistencyConfig::ASYNC));
  status = job->Grow("another-run", kThree);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  ASSERT_TRUE(job->Grow(kRun, kThree).ok());
  const ParameterSpec* grown = &job->spec();
  ASSERT_TRUE(job->Grow(kRun, kThree).ok());  // Again: a retry changes nothing.
  EXPECT_EQ(&job->spec(), grown);
  status = job->Grow(kRun, {"h1:1", "h1:2", "h3:1", "h3:2"});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("it runs worker:2 at h2:1"));
  EXPECT_EQ(job->spec().num_workers(), 3);
  ASSERT_TRUE(job->Grow(kRun, {"h1:1", "h1:2", "h2:1", "h3:1"}).ok());
  EXPECT_EQ(job->spec().num_workers(), 4);
}

TEST(ShardJobGrowTest, AGrownJobsCheckpointAndReplicaKeepItsWorkers) {
  std::unique_ptr<ShardJob> job = MakeJob(GrowableSpec(ConsistencyConfig::SYNC));
  ASSERT_TRUE(job->Grow(kRun, kThree).ok());
  Worker two(job.get(), 2, /*incarnation=*/1);
  ASSERT_TRUE(two.Pull(0));

  absl::StatusOr<std::unique_ptr<ShardJob>> restored = ShardJob::Restore(job->Checkpoint(), 1, 0);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->spec().num_workers(), 3);
  EXPECT_EQ((*restored)->spec().worker_addresses_size(), 3);
  EXPECT_FALSE((*restored)->Stats().workers(2).left());

  absl::StatusOr<std::unique_ptr<ShardJob>> copy =
      ShardJob::FromReplicaSnapshot(job->ReplicaSnapshot());
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ((*copy)->spec().num_workers(), 3);
  EXPECT_FALSE((*copy)->IsNewIncarnation(2, 1));  // It has worker 2's incarnation.
}

// A worker the job grew by joins at whatever incarnation its process starts with, 0 included
// (the job had no process of it before).
TEST(ShardJobGrowTest, ANewWorkersFirstProcessJoinsAtIncarnationZero) {
  std::unique_ptr<ShardJob> job = MakeJob(GrowableSpec(ConsistencyConfig::SYNC));
  ASSERT_NE(job, nullptr);
  ASSERT_TRUE(job->Grow(kRun, kThree).ok());
  EXPECT_TRUE(job->IsNewIncarnation(2, 0));
  Worker zero(job.get(), 0), one(job.get(), 1), two(job.get(), 2, /*incarnation=*/0);
  ASSERT_TRUE(two.Pull(0));
  EXPECT_FALSE(job->Stats().workers(2).left());
  ASSERT_TRUE(zero.Push(0).ok());
  ASSERT_TRUE(one.Push(0).ok());
  EXPECT_THAT(job->Stats().waiting_for(), ElementsAre(2));  // Step 0 waits for it.
  ASSERT_TRUE(two.Push(0).ok());
  EXPECT_EQ(job->Stats().step(), 1);
  // No process is a negative incarnation (-1 is how observers read).
  Worker observer(job.get(), 1, /*incarnation=*/-1);
  EXPECT_EQ(observer.Push(1).code(), absl::StatusCode::kInvalidArgument);
}

// A new worker takes its batch before its first pull joins it (a worker reads its batch first):
// should it die then, the batch goes back once its lease runs out, and another worker trains
// on it. Every batch is used once.
TEST(ShardJobGrowTest, ABatchANewWorkerTookBeforeJoiningGoesBackWhenItDies) {
  SimulatedClock clock;
  ParameterSpec spec = GrowableSpec(ConsistencyConfig::ASYNC);
  spec.mutable_data_handout()->set_batches_per_epoch(3);
  std::unique_ptr<ShardJob> job = MakeJob(spec, &clock);
  ASSERT_NE(job, nullptr);
  ASSERT_TRUE(job->Grow(kRun, kThree).ok());
  Worker zero(job.get(), 0), two(job.get(), 2, /*incarnation=*/1);
  absl::StatusOr<NextBatchesResponse> taken = two.Take();
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_THAT(taken->batches(), ElementsAre(0));
  EXPECT_FALSE(job->Stats().workers(2).lost());  // Its lease runs.
  ASSERT_TRUE(zero.Push(0).ok());                // Batch 1.
  clock.Advance(absl::Seconds(30));
  EXPECT_THAT(job->ExpireLeases(clock.Now()), ::testing::IsEmpty());
  Worker one(job.get(), 1);
  ASSERT_TRUE(one.Push(0).ok());  // Batch 2, the last new one.
  ASSERT_TRUE(zero.Pull(1));      // Heard from: its lease runs on.
  clock.Advance(absl::Seconds(31));
  EXPECT_THAT(job->ExpireLeases(clock.Now()), ElementsAre(2));
  // Batch 0, worker 2's, goes to worker 0 once the new batches are used up.
  absl::StatusOr<NextBatchesResponse> again = zero.Take();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(again->batches(), ElementsAre(0));
}

// A checkpoint's resume point counts the workers in the job, not a new one that has not joined
// (it pushed nothing): ASYNC resumes where the others are.
TEST(ShardJobGrowTest, ACheckpointResumesWhereTheWorkersInTheJobAre) {
  std::unique_ptr<ShardJob> job = MakeJob(GrowableSpec(ConsistencyConfig::ASYNC));
  ASSERT_NE(job, nullptr);
  Worker zero(job.get(), 0), one(job.get(), 1);
  for (int64_t step = 0; step < 3; ++step) {
    ASSERT_TRUE(zero.Push(step).ok());
    ASSERT_TRUE(one.Push(step).ok());
  }
  ASSERT_TRUE(job->Grow(kRun, kThree).ok());
  std::optional<ShardJob::TakenCheckpoint> taken;
  ASSERT_TRUE(job->ArmCheckpoint(kRun, 1, -1, [&taken](ShardJob::TakenCheckpoint checkpoint) {
                   taken = std::move(checkpoint);
                 }).ok());
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->entry.min_steps_pushed(), 3);
  EXPECT_THAT(taken->entry.steps_pushed(), ElementsAre(3, 3, 0));
}

}  // namespace
}  // namespace ps
