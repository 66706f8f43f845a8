// Each decision of LostWorkers against a fake cluster, at times the test chooses: no daemon, no
// sleep.
#include "ctl/job/lost_workers.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/time.h"
#include "common/cluster/cluster_spec.h"
#include "ctl/cluster/testing/fake_cluster_client.h"
#include "ctl/job/results_writer.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class LostWorkersTest : public ::testing::Test {
 protected:
  LostWorkersTest()
      : cluster_(*ClusterSpec::Parse(
            R"({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"]})",
            "test")),
        client_(cluster_) {
    results_ = *ResultsWriter::Create(
        std::string(std::getenv("TEST_TMPDIR")) + "/" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name(),
        true);
  }

  // Worker w's latest progress: RUNNING at `step`, or FAILED there.
  static JobProgress Progress(int worker, int64_t step, bool failed = false) {
    JobProgress progress;
    progress.set_worker(worker);
    progress.set_step(step);
    progress.set_state(failed ? JobProgress::FAILED : JobProgress::RUNNING);
    if (failed) progress.set_error("the stream broke");
    return progress;
  }

  std::unique_ptr<LostWorkers> Follow(const JobSpec& spec, int64_t first_step = 0) {
    spec_ = spec;
    return std::make_unique<LostWorkers>(client_, spec_, first_step, t0_, out_,
                                         results_.get(),
                                         [this](int w) { refollowed_.push_back(w); });
  }

  static JobSpec Spec(ConsistencyConfig::Mode mode, double lease_s, int replicas = 0) {
    JobSpec spec;
    spec.set_job_id("j");
    spec.mutable_consistency()->set_mode(mode);
    spec.mutable_consistency()->set_replicas_to_aggregate(replicas);
    spec.set_worker_lease_s(lease_s);
    return spec;
  }

  const ClusterSpec cluster_;
  FakeClusterClient client_;
  JobSpec spec_;
  std::unique_ptr<ResultsWriter> results_;
  std::ostringstream out_;
  std::vector<int> refollowed_;
  const absl::Time t0_ = absl::FromUnixSeconds(1000);
};

TEST_F(LostWorkersTest, AnAsyncJobGoesOnWithoutALostWorkerAndTakesItBackAtItsStep) {
  std::unique_ptr<LostWorkers> lost = Follow(Spec(ConsistencyConfig::ASYNC, 0));
  const std::vector<JobProgress> now = {Progress(0, 10), Progress(1, 7, true), Progress(2, 9)};
  EXPECT_EQ(lost->Update(now, {1}, t0_), "");
  EXPECT_THAT(lost->lost(), ElementsAre(1));
  EXPECT_THAT(out_.str(), HasSubstr("worker:1 failed at step 7 (the stream broke); the job goes "
                                    "on without it (ASYNC)"));
  // Its daemon is still down: nothing is started.
  EXPECT_EQ(lost->Update(now, {1}, t0_ + absl::Seconds(2)), "");
  EXPECT_THAT(client_.started, IsEmpty());
  // Back: it rejoins at the step it had reached, as its next incarnation, and is followed again.
  client_.workers_up.insert(1);
  EXPECT_EQ(lost->Update(now, {1}, t0_ + absl::Seconds(4)), "");
  ASSERT_EQ(client_.started.size(), 1u);
  EXPECT_EQ(client_.started[0].first, 1);
  EXPECT_EQ(client_.started[0].second.first_step(), 7);
  EXPECT_EQ(client_.started[0].second.incarnation(), 1);
  // Its time limit counts from the run's start, as the others' do.
  EXPECT_DOUBLE_EQ(client_.started[0].second.elapsed_s(), 4);
  EXPECT_THAT(refollowed_, ElementsAre(1));
  EXPECT_THAT(lost->lost(), IsEmpty());
}

// psctl add-worker grew the job by worker:3: it is not started (neither lost nor failed) until
// its daemon is up, then started as incarnation 1 at the run's first step, with the grown
// cluster.
TEST_F(LostWorkersTest, AWorkerTheJobGrewByJoinsOnceItsDaemonIsUp) {
  JobSpec spec = Spec(ConsistencyConfig::ASYNC, 2);
  spec.set_min_workers(2);
  std::unique_ptr<LostWorkers> lost = Follow(spec, /*first_step=*/4);
  const ClusterSpec grown = *ClusterSpec::Parse(
      R"({"ps": ["127.0.0.1:1"],
          "worker": ["127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5"]})",
      "grown");
  ASSERT_TRUE(client_.GrowTo(grown).ok());
  EXPECT_EQ(client_.GrowTo(cluster_).code(), absl::StatusCode::kInvalidArgument);  // Shrinks.
  EXPECT_EQ(client_.num_workers(), 4);
  lost->AddWorkers(3);
  EXPECT_THAT(lost->lost(), IsEmpty());  // Not lost: not started yet.
  EXPECT_THAT(lost->not_started(), ElementsAre(3));
  EXPECT_THAT(out_.str(), HasSubstr("job j grew by worker:3 (127.0.0.1:5): it joins once its "
                                    "daemon is up"));
  JobProgress not_started = Progress(3, 0, /*failed=*/true);
  const std::vector<JobProgress> now = {Progress(0, 10), Progress(1, 9), Progress(2, 9),
                                        not_started};
  EXPECT_EQ(lost->Update(now, {3}, t0_ + absl::Seconds(1)), "");
  EXPECT_THAT(client_.started, IsEmpty());  // Its daemon is not up yet.
  EXPECT_THAT(out_.str(), ::testing::Not(HasSubstr("worker:3 failed")));
  client_.workers_up.insert(3);
  EXPECT_EQ(lost->Update(now, {3}, t0_ + absl::Seconds(3)), "");
  ASSERT_EQ(client_.started.size(), 1u);
  EXPECT_EQ(client_.started[0].first, 3);
  EXPECT_EQ(client_.started[0].second.incarnation(), 1);
  EXPECT_EQ(client_.started[0].second.first_step(), 4);
  EXPECT_EQ(client_.started[0].second.cluster().jobs(1).tasks_size(), 4);
  EXPECT_THAT(out_.str(), HasSubstr("worker:3 is up: it joins the job at step 4 (incarnation 1)"));
  EXPECT_THAT(refollowed_, ElementsAre(3));
  EXPECT_THAT(lost->not_started(), IsEmpty());
}

TEST_F(LostWorkersTest, SyncWithoutBackupWorkersWaitsForTheLeaseThenFailsTheJob) {
  std::unique_ptr<LostWorkers> lost = Follow(Spec(ConsistencyConfig::SYNC, 3));
  const std::vector<JobProgress> now = {Progress(0, 5), Progress(1, 5, true), Progress(2, 5)};
  EXPECT_EQ(lost->Update(now, {1}, t0_), "");
  EXPECT_THAT(out_.str(), HasSubstr("SYNC waits up to 3s for it to return"));
  EXPECT_EQ(lost->Update(now, {1}, t0_ + absl::Seconds(3)), "");
  EXPECT_EQ(lost->Update(now, {1}, t0_ + absl::Seconds(4)), "worker:1 did not return within 3s");
}

TEST_F(LostWorkersTest, SyncRejoinsAtTheBarriersStep) {
  std::unique_ptr<LostWorkers> lost = Follow(Spec(ConsistencyConfig::SYNC, 10));
  const std::vector<JobProgress> now = {Progress(0, 9), Progress(1, 7, true), Progress(2, 9)};
  EXPECT_EQ(lost->Update(now, {1}, t0_), "");
  client_.workers_up.insert(1);
  // The shards cannot say their step: it is not started yet.
  EXPECT_EQ(lost->Update(now, {1}, t0_ + absl::Seconds(1)), "");
  EXPECT_THAT(client_.started, IsEmpty());
  client_.job_stats[0].set_step(9);
  EXPECT_EQ(lost->Update(now, {1}, t0_ + absl::Seconds(2)), "");
  ASSERT_EQ(client_.started.size(), 1u);
  EXPECT_EQ(client_.started[0].second.first_step(), 9);
}

TEST_F(LostWorkersTest, SyncWithBackupWorkersGoesOnWhileEnoughRemain) {
  std::unique_ptr<LostWorkers> lost = Follow(Spec(ConsistencyConfig::SYNC, 0, /*replicas=*/2));
  EXPECT_EQ(lost->Update({Progress(0, 4), Progress(1, 4, true), Progress(2, 4)}, {1}, t0_), "");
  EXPECT_EQ(lost->Update({Progress(0, 4, true), Progress(1, 4, true), Progress(2, 4)}, {0, 1},
                         t0_ + absl::Milliseconds(100)),
            "worker:0 failed");
}

TEST_F(LostWorkersTest, AWorkerThatReportsItsOwnFailureFailsTheJobInEveryMode) {
  for (ConsistencyConfig::Mode mode : {ConsistencyConfig::ASYNC, ConsistencyConfig::SSP}) {
    std::unique_ptr<LostWorkers> lost = Follow(Spec(mode, 5));
    // Its stream did not break: it said it failed (bad data, a NaN gradient).
    EXPECT_EQ(lost->Update({Progress(0, 3), Progress(1, 3, true), Progress(2, 3)}, {}, t0_),
              "worker:1 failed")
        << ConsistencyConfig::Mode_Name(mode);
  }
}

TEST_F(LostWorkersTest, AProgramWhoseProcessDiedIsLostAndStartedAgainOnItsLiveDaemon) {
  std::unique_ptr<LostWorkers> lost = Follow(Spec(ConsistencyConfig::ASYNC, 0));
  std::vector<JobProgress> now = {Progress(0, 10), Progress(1, 6, true), Progress(2, 9)};
  now[1].set_process_died(true);  // kill -9 of its program; the daemon's stream goes on.
  client_.workers_up.insert(1);
  EXPECT_EQ(lost->Update(now, {}, t0_), "");
  ASSERT_EQ(client_.started.size(), 1u);
  EXPECT_EQ(client_.started[0].second.first_step(), 6);
  EXPECT_EQ(client_.started[0].second.incarnation(), 1);
  EXPECT_THAT(lost->lost(), IsEmpty());
  // A program that exited with an error is the worker's own failure.
  std::unique_ptr<LostWorkers> other = Follow(Spec(ConsistencyConfig::ASYNC, 0));
  now[1].set_process_died(false);
  EXPECT_EQ(other->Update(now, {}, t0_), "worker:1 failed");
}

TEST_F(LostWorkersTest, ARingFailsWithAnyWorker) {
  std::unique_ptr<LostWorkers> lost = Follow(Spec(ConsistencyConfig::ALLREDUCE, 10));
  EXPECT_EQ(lost->Update({Progress(0, 3), Progress(1, 3, true), Progress(2, 3)}, {1}, t0_),
            "worker:1 failed");
}

// psctl remove-worker: a worker that left (LEFT) is no failure, and the job's mode is asked
// about the workers still in it; psctl add-worker: taken back once its daemon says so.
TEST_F(LostWorkersTest, AWorkerThatLeftIsTakenBackOnlyOnceAskedBack) {
  JobSpec spec = Spec(ConsistencyConfig::ASYNC, 2);
  spec.set_min_workers(2);
  std::unique_ptr<LostWorkers> lost = Follow(spec);
  JobProgress left = Progress(2, 6);
  left.set_job_id("j");
  left.set_state(JobProgress::LEFT);
  left.set_stopped_by("user alice");
  const std::vector<JobProgress> now = {Progress(0, 9), Progress(1, 8), left};
  client_.workers_up = {0, 1, 2};
  client_.worker_jobs[2] = {left};
  EXPECT_EQ(lost->Update(now, {}, t0_), "");
  EXPECT_THAT(lost->left(), ElementsAre(2));
  EXPECT_THAT(lost->lost(), IsEmpty());
  EXPECT_THAT(out_.str(), HasSubstr("worker:2 left the job at step 6 (asked by user alice); the "
                                    "job goes on without it until psctl add-worker"));
  // Its daemon is up, but nobody asked for it back.
  EXPECT_EQ(lost->Update(now, {}, t0_ + absl::Seconds(2)), "");
  EXPECT_THAT(client_.started, IsEmpty());
  // With worker:2 out, losing worker:1 leaves 1 of min_workers 2: the job cannot go on.
  std::vector<JobProgress> one_lost = now;
  one_lost[1] = Progress(1, 8, /*failed=*/true);
  {
    std::unique_ptr<LostWorkers> other = Follow(spec);
    EXPECT_EQ(other->Update(one_lost, {1}, t0_), "worker:1 failed");
  }
  // Asked back (psctl add-worker), but the chief has ended the job: not started.
  client_.worker_jobs[2][0].set_rejoin_asked(true);
  std::vector<JobProgress> ending = now;
  ending[0].set_state(JobProgress::DONE);
  EXPECT_EQ(lost->Update(ending, {}, t0_ + absl::Seconds(3)), "");
  EXPECT_THAT(client_.started, IsEmpty());
  // While it runs: started again from its step, as its next incarnation.
  EXPECT_EQ(lost->Update(now, {}, t0_ + absl::Seconds(4)), "");
  ASSERT_EQ(client_.started.size(), 1u);
  EXPECT_EQ(client_.started[0].first, 2);
  EXPECT_EQ(client_.started[0].second.first_step(), 6);
  EXPECT_EQ(client_.started[0].second.incarnation(), 1);
  EXPECT_THAT(refollowed_, ElementsAre(2));
  EXPECT_THAT(lost->left(), IsEmpty());

  // Two removals at once, each seeing two others running: the job stops, saying why.
  std::unique_ptr<LostWorkers> both = Follow(spec);
  std::vector<JobProgress> two_left = {Progress(0, 9), left, left};
  two_left[1].set_worker(1);
  EXPECT_EQ(both->Update(two_left, {}, t0_),
            "2 workers left (psctl remove-worker), and the job needs at least 2 in it");
}

}  // namespace
}  // namespace ps
