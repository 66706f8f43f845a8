// Each recovery decision of RecoverRun and RecoveryNeeded against a fake cluster of two ps and two
// workers, on a simulated clock: which checkpoint a recovery restores, what it does when a
// failure comes on top of the one it recovers from, and when it gives up. No daemon, no sleep.
#include "ctl/job/ps_recovery.h"

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/cluster/cluster_spec.h"
#include "common/testing/simulated_clock.h"
#include "ctl/cluster/testing/fake_cluster_client.h"
#include "ctl/job/checkpoint_restore.h"
#include "ctl/job/results_writer.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

// A fake cluster whose ps are down (ListJobs: UNAVAILABLE) over spans of simulated time.
class FlakyPsCluster : public FakeClusterClient {
 public:
  FlakyPsCluster(const ClusterSpec& cluster, Clock* clock)
      : FakeClusterClient(cluster), clock_(clock) {}

  // Ps `ps` is down from `from` until `until` (absl::InfiniteFuture(): it never comes back).
  void Down(int ps, absl::Time from, absl::Time until) { down_[ps] = {from, until}; }

  absl::StatusOr<ListJobsResponse> ListJobs(int ps) const override {
    auto it = down_.find(ps);
    const absl::Time now = clock_->Now();
    if (it != down_.end() && now >= it->second.first && now < it->second.second) {
      return absl::UnavailableError("connection refused");
    }
    return FakeClusterClient::ListJobs(ps);
  }

 private:
  Clock* const clock_;
  std::map<int, std::pair<absl::Time, absl::Time>> down_;
};

class PsRecoveryTest : public ::testing::Test {
 protected:
  PsRecoveryTest()
      : cluster_(*ClusterSpec::Parse(
            R"({"ps": ["127.0.0.1:1", "127.0.0.1:2"], "worker": ["127.0.0.1:3", "127.0.0.1:4"]})",
            "test")),
        fake_(cluster_, &clock_),
        t0_(clock_.Now()) {
    ResultsWriterOptions writer;
    writer.clock = &clock_;
    results_ = *ResultsWriter::Create(
        std::string(std::getenv("TEST_TMPDIR")) + "/" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name(),
        true, writer);
    spec_.set_job_id("j");
    spec_.set_run_id("run-1");
    restorable_.run_ids.insert("run-1");
    for (int ps = 0; ps < 2; ++ps) {
      fake_.ps_jobs[ps].add_job_ids("j");
      fake_.ps_checkpoints[ps].set_dir(absl::StrCat("/ckpt", ps));
    }
  }

  // A complete checkpoint of run `run_id` at `step`, its manifest written at `written_at`.
  CheckpointManifest Manifest(const std::string& run_id, int64_t seq, int64_t step,
                              absl::Time written_at) const {
    CheckpointManifest manifest;
    manifest.set_job_id("j");
    manifest.set_run_id(run_id);
    manifest.set_seq(seq);
    manifest.set_name(absl::StrFormat("%s-%06d", run_id, seq));
    manifest.set_num_ps(2);
    manifest.set_resume_step(step);
    manifest.set_written_at_ms(absl::ToUnixMillis(written_at));
    return manifest;
  }
  // Every ps lists `manifests` (ps:1 in the reverse order).
  void EveryPsLists(const std::vector<CheckpointManifest>& manifests) {
    for (int ps = 0; ps < 2; ++ps) fake_.ps_checkpoints[ps].clear_manifests();
    for (const CheckpointManifest& manifest : manifests) {
      *fake_.ps_checkpoints[0].add_manifests() = manifest;
    }
    for (auto it = manifests.rbegin(); it != manifests.rend(); ++it) {
      *fake_.ps_checkpoints[1].add_manifests() = *it;
    }
  }

  // The environment on the fake cluster: each stop is recorded with the RestoreJob calls made
  // before it, and each start with its run id and steps.
  RecoveryEnvironment Environment() {
    RecoveryEnvironment env;
    env.connect = [this]() -> absl::StatusOr<std::unique_ptr<ClusterClient>> {
      return fake_.NewHandle();
    };
    env.stop_everywhere = [this](const std::string& job_id) {
      stops_.push_back({job_id, fake_.restored.size(), clock_.Now()});
      if (on_stop_) on_stop_(static_cast<int>(stops_.size()));
    };
    env.new_run_id = [this] { return absl::StrCat("run-", ++runs_); };
    env.start_workers = [this](const ClusterClient&, const JobSpec& spec,
                               const std::vector<int64_t>& first_steps) {
      starts_.push_back({spec.run_id(), first_steps});
      return absl::OkStatus();
    };
    env.clock = &clock_;
    env.out = &out_;
    env.results = results_.get();
    return env;
  }

  // ps:1 lost the job at step 340 (worker 0) and 320 (worker 1).
  static Recovery Ps1Lost() {
    return Recovery{LostShard{1, true, "ps:1 is down (gone)"}, {340, 320}};
  }

  absl::StatusOr<int64_t> Recover() {
    std::unique_ptr<ClusterClient> client;
    return RecoverRun(Environment(), Ps1Lost(), &client, &spec_, &restorable_);
  }

  // The checkpoints RestoreJob was asked for, by ps, from the `first`-th call.
  std::vector<std::string> Restored(size_t first = 0) const {
    std::vector<std::string> names;
    for (size_t i = first; i < fake_.restored.size(); ++i) {
      names.push_back(absl::StrCat("ps:", fake_.restored[i].first, " ",
                                   fake_.restored[i].second.checkpoint(), " as ",
                                   fake_.restored[i].second.spec().run_id()));
    }
    return names;
  }

  struct Stop {
    std::string job_id;
    size_t restores_before;  // RestoreJob calls made before it.
    absl::Time at;
  };
  struct Start {
    std::string run_id;
    std::vector<int64_t> first_steps;
  };

  SimulatedClock clock_;
  const ClusterSpec cluster_;
  FlakyPsCluster fake_;
  const absl::Time t0_;
  std::unique_ptr<ResultsWriter> results_;
  std::ostringstream out_;
  JobSpec spec_;
  RestorableCheckpoints restorable_;
  std::vector<Stop> stops_;
  std::vector<Start> starts_;
  std::function<void(int)> on_stop_;  // Called with the count of stops so far.
  int runs_ = 1;
};

TEST_F(PsRecoveryTest, APsBackWithOlderStateGetsTheRunsLatestCheckpointNotItsOwnState) {
  // ps:1 was down for 3 s and comes back holding the job in an older state (it lists the job
  // again); the run's latest committed checkpoint is run-1-000003 at step 300, and an older one
  // at step 100 is listed too (ps:1 lists it first).
  fake_.Down(1, t0_, t0_ + absl::Seconds(3));
  EveryPsLists({Manifest("run-1", 1, 100, t0_ - absl::Minutes(5)),
                Manifest("run-1", 3, 300, t0_ - absl::Minutes(1))});

  absl::StatusOr<int64_t> recovered = Recover();

  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(*recovered, 300);
  // The job, with the state ps:1 came back with, is deleted everywhere before any restore, and
  // then every shard restores the manifest's latest checkpoint as a new run.
  ASSERT_EQ(stops_.size(), 1u);
  EXPECT_EQ(stops_[0].restores_before, 0u);
  EXPECT_GE(stops_[0].at, t0_ + absl::Seconds(3));
  EXPECT_THAT(Restored(), ElementsAre("ps:0 run-1-000003 as run-2", "ps:1 run-1-000003 as run-2"));
  EXPECT_EQ(spec_.run_id(), "run-2");
  EXPECT_THAT(restorable_.run_ids, UnorderedElementsAre("run-1", "run-2"));
  ASSERT_EQ(starts_.size(), 1u);
  EXPECT_EQ(starts_[0].run_id, "run-2");
  EXPECT_THAT(starts_[0].first_steps, ElementsAre(300, 300));
  EXPECT_THAT(out_.str(), HasSubstr("recovered: the job goes on from checkpoint run-1-000003 at "
                                    "step 300 as run run-2 (40 steps done again"));
}

TEST_F(PsRecoveryTest, ACheckpointOfAnotherRunIsNeverAdoptedEvenWhenNewer) {
  // A newer checkpoint of an earlier run of the job id: this run has none of its own yet.
  EveryPsLists({Manifest("earlier", 9, 900, t0_ - absl::Seconds(1))});

  absl::StatusOr<int64_t> recovered = Recover();

  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(*recovered, 0);
  EXPECT_THAT(fake_.restored, IsEmpty());
  ASSERT_EQ(starts_.size(), 1u);
  EXPECT_THAT(starts_[0].first_steps, ElementsAre(0, 0));
  EXPECT_THAT(out_.str(), HasSubstr("the 1 of other runs are never restored"));
  EXPECT_THAT(out_.str(), HasSubstr("the job starts over from step 0"));
}

TEST_F(PsRecoveryTest, AnotherPsDownWhileWaitingForTheFirstIsWaitedForToo) {
  // ps:1 is back after 5 s, but ps:0 fails at 3 s and is back only at 20 s.
  fake_.Down(1, t0_, t0_ + absl::Seconds(5));
  fake_.Down(0, t0_ + absl::Seconds(3), t0_ + absl::Seconds(20));
  EveryPsLists({Manifest("run-1", 3, 300, t0_ - absl::Minutes(1))});

  absl::StatusOr<int64_t> recovered = Recover();

  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(*recovered, 300);
  ASSERT_EQ(stops_.size(), 1u);
  EXPECT_GE(stops_[0].at, t0_ + absl::Seconds(20));
  EXPECT_LT(stops_[0].at, t0_ + absl::Seconds(21));
  EXPECT_THAT(Restored(), ElementsAre("ps:0 run-1-000003 as run-2", "ps:1 run-1-000003 as run-2"));
  EXPECT_THAT(out_.str(), HasSubstr("every ps up after 20.00s"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("attempt")));
}

TEST_F(PsRecoveryTest, APsLostDuringTheRestoreStartsTheRecoveryOverAsAnotherRun) {
  EveryPsLists({Manifest("run-1", 1, 100, t0_ - absl::Minutes(5)),
                Manifest("run-1", 3, 300, t0_ - absl::Minutes(1))});
  // ps:1 fails while the first attempt restores (after ps:0 took it), and is back for the
  // second.
  on_stop_ = [this](int stops) {
    if (stops == 1) {
      fake_.restore_status[1] = absl::UnavailableError("ps:1: RestoreJob: connection reset");
    } else {
      fake_.restore_status.erase(1);
    }
  };

  absl::StatusOr<int64_t> recovered = Recover();

  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(*recovered, 300);
  // ps:0's half of the first attempt is undone, never falling back to the older checkpoint for a
  // ps that could not be reached, and the second attempt restores the same checkpoint of the
  // run as a run of its own.
  EXPECT_THAT(fake_.deleted, ElementsAre("j"));
  ASSERT_EQ(stops_.size(), 2u);
  EXPECT_EQ(stops_[1].restores_before, 2u);
  EXPECT_THAT(Restored(), ElementsAre("ps:0 run-1-000003 as run-2", "ps:1 run-1-000003 as run-2",
                                      "ps:0 run-1-000003 as run-3", "ps:1 run-1-000003 as run-3"));
  EXPECT_EQ(spec_.run_id(), "run-3");
  EXPECT_THAT(restorable_.run_ids, UnorderedElementsAre("run-1", "run-2", "run-3"));
  ASSERT_EQ(starts_.size(), 1u);
  EXPECT_EQ(starts_[0].run_id, "run-3");
  EXPECT_THAT(out_.str(), HasSubstr("recovery attempt 1 failed (ps:1: RestoreJob: connection "
                                    "reset); trying again"));
  EXPECT_THAT(out_.str(), HasSubstr(", attempt 2)"));
}

TEST_F(PsRecoveryTest, APsThatNeverComesBackEndsTheRecoveryAtItsDeadlineNamingIt) {
  fake_.Down(1, t0_, absl::InfiniteFuture());
  EveryPsLists({Manifest("run-1", 3, 300, t0_ - absl::Minutes(1))});

  absl::StatusOr<int64_t> recovered = Recover();

  EXPECT_TRUE(absl::IsUnavailable(recovered.status())) << recovered.status();
  EXPECT_THAT(recovered.status().message(),
              HasSubstr("ps:1 is down (connection refused): the job could not be recovered "
                        "within 1m and was stopped"));
  // Given up at the deadline, on simulated time; the job is stopped and nothing restored.
  EXPECT_GE(clock_.Now(), t0_ + kRecoveryDeadline);
  EXPECT_LT(clock_.Now(), t0_ + kRecoveryDeadline + absl::Seconds(1));
  ASSERT_EQ(stops_.size(), 1u);
  EXPECT_EQ(stops_[0].job_id, "j");
  EXPECT_THAT(fake_.restored, IsEmpty());
  EXPECT_THAT(starts_, IsEmpty());
}

// RecoveryNeeded: a failed worker calls for a recovery only when a ps lost the job.
JobProgress Worker(int worker, int64_t step, JobProgress::State state) {
  JobProgress progress;
  progress.set_worker(worker);
  progress.set_step(step);
  progress.set_state(state);
  return progress;
}

TEST_F(PsRecoveryTest, AFailedWorkerWithEveryPsHoldingTheJobIsNoRecovery) {
  EXPECT_FALSE(RecoveryNeeded(fake_, "j",
                              {Worker(0, 12, JobProgress::FAILED),
                               Worker(1, 11, JobProgress::RUNNING)})
                   .has_value());
}

TEST_F(PsRecoveryTest, WorkersFailingWhileBothPsAreLostRecoverFromTheFirst) {
  fake_.Down(0, t0_, absl::InfiniteFuture());
  fake_.ps_jobs[1].clear_job_ids();  // ps:1 was started again without the job.
  std::vector<JobProgress> workers = {Worker(0, 12, JobProgress::FAILED),
                                      Worker(1, 15, JobProgress::FAILED)};
  std::optional<Recovery> recovery = RecoveryNeeded(fake_, "j", workers);
  ASSERT_TRUE(recovery.has_value());
  EXPECT_EQ(recovery->shard.ps, 0);
  EXPECT_TRUE(recovery->shard.down);
  EXPECT_EQ(recovery->shard.why, "ps:0 is down (connection refused)");
  EXPECT_EQ(recovery->furthest_step(), 15);
  // No worker failed yet: nothing to recover, whatever the ps.
  workers[0].set_state(JobProgress::RUNNING);
  workers[1].set_state(JobProgress::RUNNING);
  EXPECT_FALSE(RecoveryNeeded(fake_, "j", workers).has_value());
  // A worker the job grew by that never started is no failure (its record is a placeholder).
  workers.push_back(Worker(2, 0, JobProgress::FAILED));
  EXPECT_FALSE(RecoveryNeeded(fake_, "j", workers, false, /*not_started=*/{2}).has_value());
  workers.pop_back();
  // Once ps:0 is back, ps:1, which lost the job, is the one named.
  fake_.Down(0, t0_, t0_);
  workers[1].set_state(JobProgress::FAILED);
  recovery = RecoveryNeeded(fake_, "j", workers);
  ASSERT_TRUE(recovery.has_value());
  EXPECT_EQ(recovery->shard.ps, 1);
  EXPECT_FALSE(recovery->shard.down);
  EXPECT_THAT(recovery->shard.why, HasSubstr("ps:1 no longer holds the job"));
}

// Replicated (docs/replication.md): a ps started again, or down, loses no shard while the next
// ps holds a copy of it (a backup, which a worker's call makes serve, or one serving already); a
// shard no ps holds a copy of is lost, and the message names both of its ps.
ListJobsResponse::ShardCopy Copy(int shard, bool serving) {
  ListJobsResponse::ShardCopy copy;
  copy.set_job_id("j");
  copy.set_shard(shard);
  copy.set_serving(serving);
  return copy;
}

TEST_F(PsRecoveryTest, AReplicatedJobLosesAShardOnlyWithBothItsCopies) {
  fake_.ps_jobs[1].clear_job_ids();  // ps:1 was started again: ps:0 holds a copy of shard 1.
  *fake_.ps_jobs[0].add_copies() = Copy(1, /*serving=*/false);
  const std::vector<JobProgress> workers = {Worker(0, 12, JobProgress::FAILED),
                                            Worker(1, 15, JobProgress::RUNNING)};
  EXPECT_FALSE(RecoveryNeeded(fake_, "j", workers, /*replicated=*/true).has_value());
  EXPECT_TRUE(RecoveryNeeded(fake_, "j", workers).has_value()) << "unreplicated, ps:1 lost it";
  // ps:1 down: still held, at ps:0.
  fake_.Down(1, t0_, absl::InfiniteFuture());
  EXPECT_FALSE(RecoveryNeeded(fake_, "j", workers, /*replicated=*/true).has_value());
  // Every ps lost its own shard to the other (each was started again once): held, as copies.
  fake_.Down(1, t0_, t0_);
  fake_.ps_jobs[0].clear_job_ids();
  *fake_.ps_jobs[1].add_copies() = Copy(0, /*serving=*/true);
  EXPECT_FALSE(RecoveryNeeded(fake_, "j", workers, /*replicated=*/true).has_value());

  fake_.ps_jobs[0].clear_copies();  // No copy of shard 1 anywhere.
  std::optional<Recovery> recovery = RecoveryNeeded(fake_, "j", workers, /*replicated=*/true);
  ASSERT_TRUE(recovery.has_value());
  EXPECT_EQ(recovery->shard.ps, 1);
  EXPECT_FALSE(recovery->shard.down);
  EXPECT_EQ(recovery->shard.why, "shard 1 lost both its copies: neither ps:1 nor ps:0 holds it");
  // A ps still down: the recovery waits for it (down) and says so.
  fake_.Down(1, t0_, absl::InfiniteFuture());
  recovery = RecoveryNeeded(fake_, "j", workers, /*replicated=*/true);
  ASSERT_TRUE(recovery.has_value());
  EXPECT_TRUE(recovery->shard.down);
  EXPECT_THAT(recovery->shard.why, HasSubstr("(ps:1 is down"));
}

// Without replicas, a shard moved to another ps (MoveShard) is held where it is served: its own
// ps may then be down for good (a ps removed from the job) with nothing lost; the ps it moved
// to, down or started again, loses it.
TEST_F(PsRecoveryTest, AShardMovedAwayIsLostOnlyWithThePsThatServesIt) {
  // Shard 1 moved to ps:0, which serves it; ps:1 keeps its record of the move.
  ListJobsResponse::ShardCopy moved = Copy(1, /*serving=*/true);
  moved.set_moved(true);
  *fake_.ps_jobs[0].add_copies() = moved;
  ListJobsResponse::MovedShard* record = fake_.ps_jobs[1].add_moved();
  record->set_job_id("j");
  record->set_shard(1);
  record->set_to_ps(0);
  const std::vector<JobProgress> workers = {Worker(0, 12, JobProgress::FAILED),
                                            Worker(1, 15, JobProgress::RUNNING)};
  EXPECT_FALSE(RecoveryNeeded(fake_, "j", workers).has_value());
  fake_.Down(1, t0_, absl::InfiniteFuture());
  EXPECT_FALSE(RecoveryNeeded(fake_, "j", workers).has_value()) << "ps:1 serves no shard";

  // ps:0 down: shard 0 and the moved shard 1 with it.
  fake_.Down(1, t0_, t0_);
  fake_.Down(0, t0_, absl::InfiniteFuture());
  std::optional<Recovery> recovery = RecoveryNeeded(fake_, "j", workers);
  ASSERT_TRUE(recovery.has_value());
  EXPECT_EQ(recovery->shard.ps, 0);
  EXPECT_TRUE(recovery->shard.down);
  EXPECT_THAT(recovery->shard.why, HasSubstr("ps:0 is down"));

  // ps:0 started again, holding neither: ps:0 is named (for its own shard first).
  fake_.Down(0, t0_, t0_);
  fake_.ps_jobs[0].clear_copies();
  fake_.ps_jobs[0].clear_job_ids();
  recovery = RecoveryNeeded(fake_, "j", workers);
  ASSERT_TRUE(recovery.has_value());
  EXPECT_EQ(recovery->shard.ps, 0);
  EXPECT_FALSE(recovery->shard.down);
  // Only the moved shard gone: named by where it went.
  fake_.ps_jobs[0].add_job_ids("j");
  recovery = RecoveryNeeded(fake_, "j", workers);
  ASSERT_TRUE(recovery.has_value());
  EXPECT_EQ(recovery->shard.ps, 0);
  EXPECT_FALSE(recovery->shard.down);
  EXPECT_THAT(recovery->shard.why, HasSubstr("ps:0 no longer holds shard 1, which moved there"));
}

// A shard moved on (ps:1 -> ps:0 -> ps:2) is looked for where its records of moves end.
TEST_F(PsRecoveryTest, AShardMovedOnIsLookedForWhereItsMovesEnd) {
  const ClusterSpec three = *ClusterSpec::Parse(
      R"({"ps": ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:5"],
          "worker": ["127.0.0.1:3", "127.0.0.1:4"]})",
      "test");
  FlakyPsCluster fake(three, &clock_);
  for (int ps = 0; ps < 3; ++ps) fake.ps_jobs[ps].add_job_ids("j");
  for (const auto& [at, to] : {std::pair<int, int>{1, 0}, {0, 2}}) {
    ListJobsResponse::MovedShard* record = fake.ps_jobs[at].add_moved();
    record->set_job_id("j");
    record->set_shard(1);
    record->set_to_ps(to);
  }
  const std::vector<JobProgress> workers = {Worker(0, 12, JobProgress::FAILED),
                                            Worker(1, 15, JobProgress::RUNNING)};
  fake.Down(2, t0_, absl::InfiniteFuture());
  std::optional<Recovery> recovery = RecoveryNeeded(fake, "j", workers);
  ASSERT_TRUE(recovery.has_value());
  EXPECT_EQ(recovery->shard.ps, 2);
  EXPECT_TRUE(recovery->shard.down);
  // ps:2 back, started again: it lost the shard that moved there.
  fake.Down(2, t0_, t0_);
  recovery = RecoveryNeeded(fake, "j", workers);
  ASSERT_TRUE(recovery.has_value());
  EXPECT_EQ(recovery->shard.ps, 2);
  EXPECT_FALSE(recovery->shard.down);
  EXPECT_THAT(recovery->shard.why, HasSubstr("ps:2 no longer holds shard 1, which moved there"));
  // ps:2 serving it: nothing lost, ps:1 down or not.
  ListJobsResponse::ShardCopy moved = Copy(1, /*serving=*/true);
  moved.set_moved(true);
  *fake.ps_jobs[2].add_copies() = moved;
  fake.Down(1, t0_, absl::InfiniteFuture());
  EXPECT_FALSE(RecoveryNeeded(fake, "j", workers).has_value());
}

}  // namespace
}  // namespace ps
