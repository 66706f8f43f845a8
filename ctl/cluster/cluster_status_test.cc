#include "ctl/cluster/cluster_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

JobStats Shard(int ps, const std::string& restored_from = "", int64_t version = 10) {
  JobStats stats;
  stats.set_ps_index(ps);
  stats.mutable_spec()->set_run_id("r2");
  stats.set_version(version);
  if (!restored_from.empty()) {
    stats.set_restored_from(restored_from);
    stats.set_restored_version(10);
    stats.set_restored_step(300);
  }
  return stats;
}

JobProgress Worker(int w, JobProgress::State state) {
  JobProgress progress;
  progress.set_worker(w);
  progress.set_state(state);
  return progress;
}

TEST(JobStateTest, AJobNoTaskKnowsIsUnknown) {
  EXPECT_EQ(JobState("j", JobSightings{2, {}, {}, {}}), "job j: UNKNOWN (no task knows it)");
}

TEST(JobStateTest, TheWorkersSayWhetherItRunsFailedOrIsDone) {
  JobSightings seen{
      2, {}, {Shard(0), Shard(1)}, {Worker(0, JobProgress::RUNNING), Worker(1, JobProgress::DONE)}};
  EXPECT_EQ(JobState("j", seen), "job j: RUNNING (run r2)");
  seen.workers[0].set_state(JobProgress::FAILED);
  EXPECT_EQ(JobState("j", seen), "job j: FAILED (run r2)");
  seen.workers[0].set_state(JobProgress::DONE);
  EXPECT_EQ(JobState("j", seen), "job j: DONE (run r2)");
}

// A ps down or started again (it lost the job) while another holds it: the job is recovering.
TEST(JobStateTest, AShardThatIsDownOrLostTheJobMakesItRecovering) {
  JobSightings seen{2,
                    {"ps:1 is down (connection refused)"},
                    {Shard(0)},
                    {Worker(0, JobProgress::FAILED), Worker(1, JobProgress::FAILED)}};
  EXPECT_THAT(JobState("j", seen),
              StartsWith("job j: RECOVERING (ps:1 is down (connection refused); the psctl that "
                         "submitted the job rolls it back to its latest complete checkpoint"));
  seen.shards_lost = {"ps:1 does not hold it"};
  EXPECT_THAT(JobState("j", seen), StartsWith("job j: RECOVERING (ps:1 does not hold it;"));
  // A finished job is not recovered when a ps that held it restarts.
  seen.workers = {Worker(0, JobProgress::DONE), Worker(1, JobProgress::DONE)};
  EXPECT_EQ(JobState("j", seen), "job j: DONE (run r2)");
}

// Restored from a checkpoint on every shard, no update applied yet: still recovering; once an
// update is applied it runs, and says where it came from.
TEST(JobStateTest, ARestoredRunRecoversUntilItsFirstUpdate) {
  JobSightings seen{
      2, {}, {Shard(0, "r1-000003"), Shard(1, "r1-000003")}, {Worker(0, JobProgress::RUNNING)}};
  EXPECT_EQ(JobState("j", seen),
            "job j: RECOVERING (run r2, restored from checkpoint r1-000003 at step 300; waiting "
            "for the workers' first step)");
  seen.shards[1].set_version(11);
  EXPECT_EQ(JobState("j", seen),
            "job j: RUNNING (run r2, restored from checkpoint r1-000003 at step 300)");
}

}  // namespace
}  // namespace ps
