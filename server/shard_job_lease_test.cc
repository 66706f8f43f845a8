// Worker leases (ShardJob::ExpireLeases): a worker the shard has not heard from for longer
// than ParameterSpec.worker_lease_ms is lost; SSP then stops waiting for it, SYNC does not. A
// worker started again (a new incarnation) rejoins; its earlier incarnation is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "common/testing/simulated_clock.h"
#include "server/shard_job.h"

namespace ps {
namespace {

constexpr absl::Duration kLease = absl::Milliseconds(300);

// The leases' time: each test advances it by hand instead of sleeping.
SimulatedClock* TestClock() {
  static SimulatedClock* const clock = new SimulatedClock();
  return clock;
}

std::unique_ptr<ShardJob> Job(ConsistencyConfig::Mode mode, bool lost_workers_leave = false,
                              int num_workers = 2) {
  ParameterSpec spec;
  spec.set_job_id("leased");
  VariableDef* variable = spec.add_variables();
  variable->set_name("w");
  variable->add_shape(4);
  spec.mutable_learning_rate()->set_base(0.1f);
  spec.mutable_consistency()->set_mode(mode);
  spec.mutable_consistency()->set_ssp_bound(1);
  spec.set_num_workers(num_workers);
  spec.set_lost_workers_leave(lost_workers_leave);
  spec.set_worker_lease_ms(absl::ToInt64Milliseconds(kLease));
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, 1, 0, TestClock());
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *std::move(job) : nullptr;
}

absl::Status Push(ShardJob* job, int worker, int64_t n, int incarnation = 0,
                  int64_t push_id = 0, float value = 0.5f) {
  PushRequestHeader header;
  header.set_job_id("leased");
  header.set_worker(worker);
  header.set_incarnation(incarnation);
  header.set_push_id(push_id > 0 ? push_id : n + 1);
  header.set_step(n);
  header.set_clock(n);
  header.set_read_version(job->Stats().version());
  for (const SliceRef& ref : job->SliceRefs()) *header.add_slices() = ref;
  std::vector<float> gradient(4, value);
  return job->Push(header, gradient).status();
}

TEST(ShardJobLeaseTest, SspStopsWaitingForAWorkerWhoseLeaseRanOut) {
  std::unique_ptr<ShardJob> job = Job(ConsistencyConfig::SSP);
  TestClock()->Advance(kLease * 2 / 3);  // Worker 1 says nothing from here on.
  for (int64_t clock = 0; clock < 2; ++clock) ASSERT_TRUE(Push(job.get(), 0, clock).ok());
  PullRequest pull;
  pull.set_job_id("leased");
  pull.set_worker(0);
  pull.set_clock(2);  // Two ahead of worker 1, over the bound of 1: it waits.
  std::optional<absl::Status> answered;
  job->Pull(pull, [&answered](absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
    answered = snapshot.status();
  });
  ASSERT_FALSE(answered.has_value());

  // Worker 0 was heard just now; worker 1 not since the job began, over the lease by then.
  const absl::Time now = TestClock()->Now() + kLease / 2;
  EXPECT_EQ(job->ExpireLeases(now), std::vector<int>{1});
  ASSERT_TRUE(answered.has_value());
  EXPECT_TRUE(answered->ok()) << *answered;
  const JobStats stats = job->Stats();
  EXPECT_FALSE(stats.workers(0).lost());
  EXPECT_TRUE(stats.workers(1).lost());
  EXPECT_TRUE(stats.workers(1).left());
  EXPECT_TRUE(job->ExpireLeases(now).empty());  // Lost once.
}

TEST(ShardJobLeaseTest, APushWaitingForTheByteBudgetKeepsItsWorkersLease) {
  std::shared_ptr<ShardJob> job = Job(ConsistencyConfig::ASYNC);
  std::shared_ptr<void> parked = ShardJob::ParkPush(job, 1);
  ASSERT_NE(parked, nullptr);
  EXPECT_EQ(ShardJob::ParkPush(job, 2), nullptr);  // Out of range.
  const absl::Time later = TestClock()->Now() + kLease * 3;
  ASSERT_TRUE(Push(job.get(), 0, 0).ok());
  EXPECT_EQ(job->ExpireLeases(later), std::vector<int>{0});  // Not worker 1, which waits.
  parked.reset();
  EXPECT_EQ(job->ExpireLeases(later), std::vector<int>{1});
}

TEST(ShardJobLeaseTest, SyncMarksALostWorkerButItsBarrierStillWaitsForIt) {
  std::unique_ptr<ShardJob> job = Job(ConsistencyConfig::SYNC);
  TestClock()->Advance(kLease * 2 / 3);
  ASSERT_TRUE(Push(job.get(), 0, 0).ok());
  EXPECT_EQ(job->ExpireLeases(TestClock()->Now() + kLease / 2), std::vector<int>{1});
  const JobStats stats = job->Stats();
  EXPECT_TRUE(stats.workers(1).lost());
  EXPECT_FALSE(stats.workers(1).left());
  ASSERT_EQ(stats.waiting_for_size(), 1);
  EXPECT_EQ(stats.waiting_for(0), 1);
  EXPECT_EQ(stats.step(), 0);
}

// An elastic job (JobSpec.min_workers): a lost worker leaves SYNC's barrier, whose steps go on
// with the others, and a new incarnation of it joins again: the open step then waits for it.
TEST(ShardJobLeaseTest, AnElasticSyncJobGoesOnWithoutALostWorkerAndTakesItBack) {
  std::unique_ptr<ShardJob> job =
      Job(ConsistencyConfig::SYNC, /*lost_workers_leave=*/true, /*num_workers=*/3);
  TestClock()->Advance(kLease * 2 / 3);  // Worker 2 says nothing from here on.
  ASSERT_TRUE(Push(job.get(), 0, 0).ok());
  ASSERT_TRUE(Push(job.get(), 1, 0).ok());
  EXPECT_EQ(job->Stats().step(), 0);  // Waiting for worker 2.
  // Workers 0 and 1 wait at the barrier for step 1, longer than the lease: waiting is not gone.
  std::vector<absl::Status> barrier;
  for (int w = 0; w < 2; ++w) {
    PullRequest pull;
    pull.set_job_id("leased");
    pull.set_worker(w);
    pull.set_step(1);
    job->Pull(pull, [&barrier](absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
      barrier.push_back(snapshot.status());
    });
  }
  EXPECT_TRUE(barrier.empty());
  TestClock()->Advance(kLease * 2);
  EXPECT_EQ(job->ExpireLeases(TestClock()->Now()), std::vector<int>{2});
  EXPECT_EQ(barrier.size(), 2u);  // Step 0 applied as worker 2 left: the barrier opened.
  JobStats stats = job->Stats();
  EXPECT_TRUE(stats.workers(2).lost());
  EXPECT_TRUE(stats.workers(2).left());
  EXPECT_EQ(stats.step(), 1);  // Step 0 of the two that are left, applied as it left.
  ASSERT_TRUE(Push(job.get(), 0, 1).ok());
  ASSERT_TRUE(Push(job.get(), 1, 1).ok());
  EXPECT_EQ(job->Stats().step(), 2);
  // Its daemon is back: the new incarnation's pull of step 2 joins it, and step 2 needs it.
  PullRequest pull;
  pull.set_job_id("leased");
  pull.set_worker(2);
  pull.set_incarnation(1);
  pull.set_step(2);
  std::optional<absl::Status> answered;
  job->Pull(pull, [&answered](absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
    answered = snapshot.status();
  });
  ASSERT_TRUE(answered.has_value() && answered->ok());
  ASSERT_TRUE(Push(job.get(), 0, 2).ok());
  ASSERT_TRUE(Push(job.get(), 1, 2).ok());
  stats = job->Stats();
  EXPECT_EQ(stats.step(), 2);
  EXPECT_THAT(stats.waiting_for(), ::testing::ElementsAre(2));
  ASSERT_TRUE(Push(job.get(), 2, 2, /*incarnation=*/1, /*push_id=*/1).ok());
  EXPECT_EQ(job->Stats().step(), 3);
}

TEST(ShardJobIncarnationTest, ANewIncarnationRejoinsAndTheOldOneIsRefused) {
  std::unique_ptr<ShardJob> job = Job(ConsistencyConfig::ASYNC);
  for (int64_t n = 0; n < 3; ++n) ASSERT_TRUE(Push(job.get(), 1, n).ok());
  EXPECT_EQ(job->Stats().workers(1).last_push_id(), 3);
  // Restarted, its push ids start again at 1: applied, not swallowed as duplicates.
  ASSERT_TRUE(Push(job.get(), 1, 3, /*incarnation=*/1, /*push_id=*/1).ok());
  JobStats stats = job->Stats();
  EXPECT_EQ(stats.workers(1).last_push_id(), 1);
  EXPECT_EQ(stats.version(), 4);
  EXPECT_EQ(stats.duplicate_pushes(), 0);
  absl::Status old = Push(job.get(), 1, 4, /*incarnation=*/0, /*push_id=*/4);
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(old.message().find("incarnation 1 has replaced"), std::string::npos) << old;
  stats = job->Stats();
  EXPECT_EQ(stats.version(), 4);
  EXPECT_EQ(stats.rejected().at("incarnation"), 1);

  // Pulls alike; a reader that is not the worker (psctl's results) is not checked.
  for (const auto& [incarnation, code] :
       {std::make_pair(0, absl::StatusCode::kFailedPrecondition),
        std::make_pair(static_cast<int>(OBSERVER_INCARNATION), absl::StatusCode::kOk),
        std::make_pair(1, absl::StatusCode::kOk)}) {
    PullRequest pull;
    pull.set_job_id("leased");
    pull.set_worker(1);
    pull.set_incarnation(incarnation);
    std::optional<absl::Status> answered;
    job->Pull(pull, [&answered](absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
      answered = snapshot.status();
    });
    ASSERT_TRUE(answered.has_value());
    EXPECT_EQ(answered->code(), code) << incarnation << ": " << *answered;
  }
}

// A leave of an incarnation that a newer one replaced (held up in transit) changes nothing: the
// new incarnation stays in the job. One of the newest, or one that names none, takes it out.
TEST(ShardJobIncarnationTest, AnOldIncarnationsLeaveDoesNotTakeTheNewOneOut) {
  std::unique_ptr<ShardJob> job = Job(ConsistencyConfig::ASYNC);
  ASSERT_TRUE(Push(job.get(), 1, 0).ok());
  ASSERT_TRUE(Push(job.get(), 1, 1, /*incarnation=*/1, /*push_id=*/1).ok());
  ASSERT_TRUE(job->Leave(1, job->spec().run_id(), /*incarnation=*/0).ok());
  EXPECT_FALSE(job->Stats().workers(1).left());
  ASSERT_TRUE(job->Leave(1, job->spec().run_id(), /*incarnation=*/1).ok());
  EXPECT_TRUE(job->Stats().workers(1).left());
  ASSERT_TRUE(job->Leave(0, job->spec().run_id()).ok());
  EXPECT_TRUE(job->Stats().workers(0).left());
}

// A push that is refused (a push id far ahead, NaN) changes nothing: a newer incarnation in it
// is not taken, so it cannot fence off the worker's real process (issue 30 item 2).
TEST(ShardJobIncarnationTest, ARefusedPushOfANewerIncarnationDoesNotFenceTheWorker) {
  std::unique_ptr<ShardJob> job = Job(ConsistencyConfig::ASYNC);
  ASSERT_TRUE(Push(job.get(), 1, 0).ok());
  const absl::Status jump = Push(job.get(), 1, 1, /*incarnation=*/7, /*push_id=*/1000000);
  EXPECT_EQ(jump.code(), absl::StatusCode::kInvalidArgument) << jump;
  const absl::Status nan =
      Push(job.get(), 1, 1, /*incarnation=*/8, /*push_id=*/1, std::nanf(""));
  EXPECT_EQ(nan.code(), absl::StatusCode::kInvalidArgument) << nan;
  JobStats stats = job->Stats();
  EXPECT_EQ(stats.version(), 1);
  EXPECT_EQ(stats.workers(1).last_push_id(), 1);
  // The real process, incarnation 0, goes on with its next push id.
  ASSERT_TRUE(Push(job.get(), 1, 1, /*incarnation=*/0, /*push_id=*/2).ok());
  EXPECT_EQ(job->Stats().version(), 2);
}

TEST(ShardJobIncarnationTest, ALostSspWorkerRejoinsAtItsClockAndHoldsTheOthersBackAgain) {
  std::unique_ptr<ShardJob> job = Job(ConsistencyConfig::SSP);
  TestClock()->Advance(kLease * 2 / 3);
  ASSERT_TRUE(Push(job.get(), 0, 0).ok());
  EXPECT_EQ(job->ExpireLeases(TestClock()->Now() + kLease / 2), std::vector<int>{1});
  for (int64_t clock = 1; clock < 4; ++clock) ASSERT_TRUE(Push(job.get(), 0, clock).ok());
  PullRequest pull;
  pull.set_job_id("leased");
  pull.set_worker(1);
  pull.set_incarnation(1);
  pull.set_clock(1);  // Started again at its step 1.
  std::optional<absl::Status> answered;
  job->Pull(pull, [&answered](absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
    answered = snapshot.status();
  });
  ASSERT_TRUE(answered.has_value());
  EXPECT_TRUE(answered->ok()) << *answered;
  const JobStats stats = job->Stats();
  EXPECT_FALSE(stats.workers(1).lost());
  EXPECT_FALSE(stats.workers(1).left());
  EXPECT_EQ(stats.workers(1).clock(), 1);
  // Worker 0, at clock 4, is now more than the bound ahead of worker 1 again: it waits.
  pull.set_worker(0);
  pull.set_incarnation(0);
  pull.set_clock(4);
  answered.reset();
  job->Pull(pull, [&answered](absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
    answered = snapshot.status();
  });
  EXPECT_FALSE(answered.has_value());
  job->CancelAllWaiters(absl::CancelledError("test over"));
}

TEST(ShardJobLeaseTest, WithoutALeaseNoWorkerIsLost) {
  ParameterSpec spec;
  spec.set_job_id("unleased");
  VariableDef* variable = spec.add_variables();
  variable->set_name("w");
  variable->add_shape(4);
  spec.mutable_learning_rate()->set_base(0.1f);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::SSP);
  spec.set_num_workers(2);
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, 1, 0, TestClock());
  ASSERT_TRUE(job.ok());
  EXPECT_TRUE((*job)->ExpireLeases(TestClock()->Now() + absl::Hours(1)).empty());
}

}  // namespace
}  // namespace ps
