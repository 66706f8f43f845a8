// Each checkpoint decision of CheckpointCoordinator against a fake cluster of two shards: when it
// arms, what it commits, and when it abandons. No daemon, no sleep.
#include "ctl/job/checkpoint_coordinator.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/checkpoint/checkpoint_store.h"
#include "common/cluster/cluster_spec.h"
#include "common/testing/simulated_clock.h"
#include "ctl/cluster/testing/fake_cluster_client.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class CheckpointCoordinatorTest : public ::testing::Test {
 protected:
  CheckpointCoordinatorTest()
      : cluster_(*ClusterSpec::Parse(
            R"({"ps": ["127.0.0.1:1", "127.0.0.1:2"], "worker": ["127.0.0.1:3", "127.0.0.1:4"]})",
            "test")),
        client_(cluster_) {}

  static JobSpec Spec(ConsistencyConfig::Mode mode, int64_t every_steps) {
    JobSpec spec;
    spec.set_job_id("j");
    spec.set_run_id("run");
    spec.mutable_consistency()->set_mode(mode);
    spec.mutable_checkpoint()->set_every_steps(every_steps);
    spec.mutable_checkpoint()->set_keep(3);
    return spec;
  }

  // Both shards at `clock`, having written checkpoint `seq` there (`clocks` per shard, and each
  // worker's steps pushed to it), or with `error`.
  void Shards(int64_t clock, std::vector<int64_t> written_at = {},
              std::vector<std::vector<int64_t>> steps_pushed = {{}, {}},
              const std::string& error = "", int64_t seq = 1) {
    for (int ps = 0; ps < 2; ++ps) {
      JobStats& stats = client_.job_stats[ps];
      stats.set_checkpoint_clock(clock);
      stats.clear_checkpoints();
      if (written_at.empty()) continue;
      ShardCheckpoint* entry = stats.add_checkpoints();
      entry->set_seq(seq);
      entry->set_ps_index(ps);
      entry->set_clock(written_at[ps]);
      entry->set_file(absl::StrCat("run-00000", seq, "/shard-", ps, "-of-2.ckpt"));
      int64_t fewest = INT64_MAX;
      for (int64_t steps : steps_pushed[ps]) {
        entry->add_steps_pushed(steps);
        fewest = std::min(fewest, steps);
      }
      entry->set_min_steps_pushed(steps_pushed[ps].empty() ? 0 : fewest);
      if (ps == 1) entry->set_error(error);
    }
  }

  const ClusterSpec cluster_;
  FakeClusterClient client_;
  std::ostringstream out_;
  const absl::Time t0_ = absl::FromUnixSeconds(1000);
};

TEST_F(CheckpointCoordinatorTest, SyncArmsTheNextMultipleOnEveryShardAndCommitsWhenAllWrote) {
  CheckpointCoordinator coordinator(client_, Spec(ConsistencyConfig::SYNC, 10), &out_);
  ASSERT_TRUE(coordinator.enabled());
  Shards(3);
  coordinator.Poll(t0_);
  ASSERT_EQ(client_.armed.size(), 2u);
  for (int ps = 0; ps < 2; ++ps) {
    EXPECT_EQ(client_.armed[ps].first, ps);
    EXPECT_EQ(client_.armed[ps].second.seq(), 1);
    EXPECT_EQ(client_.armed[ps].second.at_clock(), 10);
    EXPECT_EQ(client_.armed[ps].second.run_id(), "run");
  }
  EXPECT_EQ(coordinator.pending(), 1);
  // One shard has not reached it: nothing is committed, nothing armed again.
  Shards(9);
  coordinator.Poll(t0_ + absl::Seconds(1));
  EXPECT_THAT(client_.committed, IsEmpty());
  EXPECT_EQ(client_.armed.size(), 2u);
  // Both wrote it at step 10: the manifest goes to every shard, and the next is armed at 20.
  Shards(10, {10, 10});
  coordinator.Poll(t0_ + absl::Seconds(2));
  ASSERT_EQ(client_.committed.size(), 2u);
  const CheckpointManifest& manifest = client_.committed[0].second.manifest();
  EXPECT_EQ(manifest.name(), "run-000001");
  EXPECT_EQ(manifest.resume_step(), 10);
  EXPECT_EQ(manifest.shards_size(), 2);
  EXPECT_EQ(client_.committed[0].second.keep(), 3);
  ASSERT_TRUE(coordinator.last_complete().has_value());
  EXPECT_THAT(out_.str(), HasSubstr("checkpoint 1 complete: run-000001, resumes at step 10"));
  EXPECT_EQ(client_.armed.back().second.at_clock(), 20);
}

TEST_F(CheckpointCoordinatorTest, AShardThatFailedToWriteAbandonsTheCheckpoint) {
  CheckpointCoordinator coordinator(client_, Spec(ConsistencyConfig::SYNC, 10), &out_);
  Shards(3);
  coordinator.Poll(t0_);
  Shards(10, {10, 10}, {{}, {}}, "disk full");
  coordinator.Poll(t0_ + absl::Seconds(1));
  EXPECT_THAT(client_.committed, IsEmpty());
  EXPECT_EQ(coordinator.failed(), 1);
  EXPECT_THAT(out_.str(), HasSubstr("checkpoint 1 abandoned (training goes on): disk full"));
  EXPECT_FALSE(coordinator.last_complete().has_value());
}

TEST_F(CheckpointCoordinatorTest, SyncShardsThatTookItAtDifferentStepsAbandonIt) {
  CheckpointCoordinator coordinator(client_, Spec(ConsistencyConfig::SYNC, 10), &out_);
  Shards(3);
  coordinator.Poll(t0_);
  Shards(11, {10, 11});
  coordinator.Poll(t0_ + absl::Seconds(1));
  EXPECT_THAT(client_.committed, IsEmpty());
  EXPECT_THAT(out_.str(), HasSubstr("ps:1 took it at step 11, ps:0 at 10"));
}

TEST_F(CheckpointCoordinatorTest, AsyncResumesEachWorkerAtTheFewestStepsItPushedToAnyShard) {
  CheckpointCoordinator coordinator(client_, Spec(ConsistencyConfig::ASYNC, 10), &out_);
  Shards(3);
  coordinator.Poll(t0_);
  // Each shard at its own version; worker 0 pushed 12 and 11 steps, worker 1 9 and 10.
  Shards(12, {12, 11}, {{12, 9}, {11, 10}});
  coordinator.Poll(t0_ + absl::Seconds(1));
  ASSERT_EQ(client_.committed.size(), 2u);
  const CheckpointManifest& manifest = client_.committed[0].second.manifest();
  EXPECT_EQ(manifest.resume_step(), 9);
  EXPECT_THAT(manifest.worker_resume_steps(), ElementsAre(11, 9));
}

// A growth reaches the shards in turn: a shard that has the new worker lists it, the other not
// yet. Each worker every shard lists resumes at its own count; the new one at the resume step.
TEST_F(CheckpointCoordinatorTest, AsyncResumesTheWorkersEveryShardListsAtTheirOwnSteps) {
  CheckpointCoordinator coordinator(client_, Spec(ConsistencyConfig::ASYNC, 10), &out_);
  Shards(3);
  coordinator.Poll(t0_);
  Shards(12, {12, 11}, {{12, 9, 0}, {11, 10}});
  // ps:0 counts the workers in the job: not worker 2, which has not joined (ShardJob).
  client_.job_stats[0].mutable_checkpoints(0)->set_min_steps_pushed(9);
  coordinator.Poll(t0_ + absl::Seconds(1));
  ASSERT_EQ(client_.committed.size(), 2u);
  const CheckpointManifest& manifest = client_.committed[0].second.manifest();
  EXPECT_THAT(manifest.worker_resume_steps(), ElementsAre(11, 9));
  EXPECT_EQ(manifest.resume_step(), 9);
  EXPECT_THAT(WorkerResumeSteps(manifest, 3), ElementsAre(11, 9, 9));
  EXPECT_THAT(WorkerResumeSteps(manifest, 1), ElementsAre(9));  // Another cluster.
}

// Once every shard lists the new worker, one that has not joined (0 steps pushed, not counted in
// min_steps_pushed) resumes at the resume step, not at 0.
TEST_F(CheckpointCoordinatorTest, AsyncResumesANewWorkerThatHasNotJoinedAtTheResumeStep) {
  CheckpointCoordinator coordinator(client_, Spec(ConsistencyConfig::ASYNC, 10), &out_);
  Shards(3);
  coordinator.Poll(t0_);
  Shards(12, {12, 11}, {{12, 9, 0}, {11, 10, 0}});
  client_.job_stats[0].mutable_checkpoints(0)->set_min_steps_pushed(9);
  client_.job_stats[1].mutable_checkpoints(0)->set_min_steps_pushed(10);
  coordinator.Poll(t0_ + absl::Seconds(1));
  ASSERT_EQ(client_.committed.size(), 2u);
  const CheckpointManifest& manifest = client_.committed[0].second.manifest();
  EXPECT_EQ(manifest.resume_step(), 9);
  EXPECT_THAT(manifest.worker_resume_steps(), ElementsAre(11, 9, 9));
}

TEST_F(CheckpointCoordinatorTest, AShardThatRefusesToArmAbandonsItAtOnce) {
  client_.arm_status = absl::UnavailableError("ps:1 is down");
  CheckpointCoordinator coordinator(client_, Spec(ConsistencyConfig::SYNC, 10), &out_);
  Shards(3);
  coordinator.Poll(t0_);
  EXPECT_EQ(coordinator.pending(), 0);
  EXPECT_EQ(coordinator.failed(), 1);
  EXPECT_THAT(out_.str(), HasSubstr("checkpoint 1 abandoned (training goes on): ps:1 is down"));
}

TEST_F(CheckpointCoordinatorTest, FinishWaitsForTheFilesOnItsClockThenAbandonsThoseNotWritten) {
  SimulatedClock clock;
  const absl::Time start = clock.Now();
  CheckpointCoordinator coordinator(client_, Spec(ConsistencyConfig::SYNC, 10), &out_, &clock);
  Shards(3);
  coordinator.Poll(t0_);
  Shards(10);  // Every shard reached the step armed; none has written its file.
  coordinator.Finish(/*final=*/false, absl::Seconds(5));
  EXPECT_GE(clock.Now(), start + absl::Seconds(5));
  EXPECT_LT(clock.Now(), start + absl::Seconds(6));
  EXPECT_EQ(coordinator.pending(), 0);
  EXPECT_THAT(client_.committed, IsEmpty());
  EXPECT_THAT(out_.str(), HasSubstr("checkpoint 1 abandoned (training goes on): not written by "
                                    "every shard within 5s of the job's end"));
}

TEST_F(CheckpointCoordinatorTest, AManifestIsDatedByTheCoordinatorsClock) {
  SimulatedClock clock(absl::FromUnixSeconds(5000));
  CheckpointCoordinator coordinator(client_, Spec(ConsistencyConfig::SYNC, 10), &out_, &clock);
  Shards(3);
  coordinator.Poll(t0_);
  Shards(10, {10, 10});
  coordinator.Poll(t0_ + absl::Seconds(1));
  ASSERT_EQ(client_.committed.size(), 2u);
  EXPECT_EQ(client_.committed[0].second.manifest().written_at_ms(), 5000 * 1000);
}

// A replicated job whose shard 1 was taken over by ps:0's copy: nothing is armed while the shard
// is away from its own ps (where its file would be read back), and it says so once.
TEST_F(CheckpointCoordinatorTest, AReplicatedJobTakesNoCheckpointWhileAShardIsAwayFromItsPs) {
  JobSpec spec = Spec(ConsistencyConfig::SYNC, 10);
  spec.set_replicas(2);
  CheckpointCoordinator coordinator(client_, spec, &out_);
  Shards(3);
  coordinator.Poll(t0_);
  ASSERT_EQ(client_.armed.size(), 2u);
  Shards(10, {10, 10});
  coordinator.Poll(t0_ + absl::Seconds(1));
  ASSERT_TRUE(coordinator.last_complete().has_value());
  const size_t armed = client_.armed.size();

  client_.job_stats[1].mutable_replication()->set_took_over(true);
  Shards(25);
  coordinator.Poll(t0_ + absl::Seconds(2));
  coordinator.Poll(t0_ + absl::Seconds(3));
  EXPECT_EQ(client_.armed.size(), armed);
  EXPECT_THAT(out_.str(), HasSubstr("checkpoints paused: shard 1 is served by a copy that took it "
                                    "over (its ps was taken for gone)"));
  EXPECT_THAT(out_.str(), HasSubstr("checkpoint run-000001 (step 10) stays the job's fallback"));
  EXPECT_EQ(out_.str().find("checkpoints paused"), out_.str().rfind("checkpoints paused"));
  // The one armed at 20 is never written by the copy that took shard 1 over.
  EXPECT_THAT(out_.str(), HasSubstr("checkpoint 2 abandoned (training goes on): shard 1 was taken "
                                    "over before it wrote it"));
  EXPECT_EQ(coordinator.pending(), 0);
  // Nor a final one at the end.
  coordinator.Finish(/*final=*/true, absl::ZeroDuration());
  EXPECT_EQ(client_.armed.size(), armed);
}

// Once every shard is served by its own ps again (the copy that took one over handed it back),
// checkpoints go on, and it says so once.
TEST_F(CheckpointCoordinatorTest, CheckpointsResumeOnceEveryShardIsBackAtItsOwnPs) {
  JobSpec spec = Spec(ConsistencyConfig::SYNC, 10);
  spec.set_replicas(2);
  CheckpointCoordinator coordinator(client_, spec, &out_);
  client_.job_stats[1].mutable_replication()->set_took_over(true);
  Shards(3);
  coordinator.Poll(t0_);
  EXPECT_TRUE(client_.armed.empty());
  EXPECT_THAT(out_.str(), HasSubstr("checkpoints paused"));

  client_.job_stats[1].mutable_replication()->set_took_over(false);
  Shards(12);
  coordinator.Poll(t0_ + absl::Seconds(1));
  coordinator.Poll(t0_ + absl::Seconds(2));
  EXPECT_THAT(out_.str(), HasSubstr("checkpoints resumed: every shard is served by its own ps "
                                    "again"));
  EXPECT_EQ(out_.str().find("checkpoints resumed"), out_.str().rfind("checkpoints resumed"));
  ASSERT_FALSE(client_.armed.empty());
  Shards(25, {20, 20});
  coordinator.Poll(t0_ + absl::Seconds(3));
  EXPECT_TRUE(coordinator.last_complete().has_value()) << out_.str();
}

}  // namespace
}  // namespace ps
