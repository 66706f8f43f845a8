#include "ctl/cluster/drain_plan.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// A ListJobs answer listing `jobs` (each with this ps's own shard).
ListJobsResponse Listing(std::vector<std::string> jobs) {
  ListJobsResponse listed;
  for (const std::string& job : jobs) listed.add_job_ids(job);
  return listed;
}
void AddCopy(ListJobsResponse* listed, const std::string& job, int shard, bool moved) {
  ListJobsResponse::ShardCopy* copy = listed->add_copies();
  copy->set_job_id(job);
  copy->set_shard(shard);
  copy->set_serving(true);
  copy->set_moved(moved);
}
void AddMovedAway(ListJobsResponse* listed, const std::string& job, int shard, int to) {
  ListJobsResponse::MovedShard* moved = listed->add_moved();
  moved->set_job_id(job);
  moved->set_shard(shard);
  moved->set_to_ps(to);
}

std::string Describe(const DrainPlan& plan) {
  std::string out;
  for (const ShardMove& move : plan.moves) {
    out += move.job_id + ":" + std::to_string(move.shard) + "->" + std::to_string(move.to_ps) + " ";
  }
  return out;
}

// Each of ps:1's shards goes to the ps serving the fewest then, those the plan sends counted;
// a shard moved away from ps:1 stays where it is, and one moved to ps:1 goes home.
TEST(DrainPlanTest, EveryShardThePsServesGoesWhereTheFewestAreServed) {
  std::vector<absl::StatusOr<ListJobsResponse>> listed = {
      Listing({"a", "b", "c"}), Listing({"a", "b", "c"}), Listing({"a", "b"})};
  AddMovedAway(&*listed[1], "c", 1, 2);  // c's shard 1 is on ps:2 already.
  AddCopy(&*listed[2], "c", 1, /*moved=*/true);
  AddCopy(&*listed[1], "b", 0, /*moved=*/true);  // b's shard 0 moved to ps:1.
  AddMovedAway(&*listed[0], "b", 0, 1);
  absl::StatusOr<DrainPlan> plan = PlanDrain(1, listed, std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Serving: ps:0 a:0 c:0 (2), ps:2 a:2 b:2 c:1 (3). b:0 -> home, ps:0 (3); a:1 -> ps:0
  // (tie: the lowest, 4); b:1 -> ps:2 (4).
  EXPECT_EQ(Describe(*plan), "b:0->0 a:1->0 b:1->2 ");
  EXPECT_TRUE(plan->refused.empty());

  plan = PlanDrain(1, listed, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Describe(*plan), "b:0->2 a:1->2 b:1->2 ");
}

TEST(DrainPlanTest, APsThatDoesNotAnswerTakesNothing) {
  std::vector<absl::StatusOr<ListJobsResponse>> listed = {
      absl::UnavailableError("ps:0 is down"), Listing({"a"}), Listing({"a"})};
  absl::StatusOr<DrainPlan> plan = PlanDrain(1, listed, std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Describe(*plan), "a:1->2 ");
  listed[2] = absl::UnavailableError("ps:2 is down");
  plan = PlanDrain(1, listed, std::nullopt);
  EXPECT_TRUE(absl::IsUnavailable(plan.status())) << plan.status();
  EXPECT_THAT(plan.status().message(), HasSubstr("nowhere to go"));
  // The drained ps itself down: its own error.
  plan = PlanDrain(0, listed, 1);
  EXPECT_TRUE(absl::IsUnavailable(plan.status())) << plan.status();
  EXPECT_THAT(plan.status().message(), HasSubstr("ps:0 is down"));
}

TEST(DrainPlanTest, AReplicatedShardsBackupAndABadTargetAreRefused) {
  std::vector<absl::StatusOr<ListJobsResponse>> listed = {Listing({"r"}), Listing({"r"})};
  AddCopy(&*listed[1], "r", 0, /*moved=*/false);  // r's backup of shard 0.
  absl::StatusOr<DrainPlan> plan = PlanDrain(1, listed, std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->refused.size(), 1u);
  EXPECT_THAT(plan->refused[0], HasSubstr("job r has replicas"));
  EXPECT_TRUE(plan->moves.empty()) << "its own shard 1 moves neither";
  for (int to : {1, 2, -1}) {
    EXPECT_TRUE(absl::IsInvalidArgument(PlanDrain(1, listed, to).status())) << to;
  }
}

// Undrain brings home every copy of ps:1's shard that another ps serves as moved there; a
// backup of a replicated shard, a copy of another shard, and one still moving in stay; a ps
// that did not answer is named.
TEST(DrainPlanTest, UndrainBringsEveryMovedCopyOfThePsShardHome) {
  std::vector<absl::StatusOr<ListJobsResponse>> listed = {
      Listing({"a", "b"}), Listing({}), Listing({"a", "b"}),
      absl::UnavailableError("ps:3 is down")};
  AddCopy(&*listed[0], "a", 1, /*moved=*/true);
  AddCopy(&*listed[2], "b", 1, /*moved=*/true);
  AddCopy(&*listed[2], "r", 1, /*moved=*/false);  // A replicated shard's backup.
  AddCopy(&*listed[2], "a", 0, /*moved=*/true);   // Another shard: ps:0's.
  AddCopy(&*listed[0], "c", 1, /*moved=*/true);
  listed[0]->mutable_copies()->rbegin()->set_serving(false);  // Still moving in.
  absl::StatusOr<UndrainPlan> plan = PlanUndrain(1, listed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::string moves;
  for (const ShardMove& move : plan->moves) {
    moves += move.job_id + ":" + std::to_string(move.shard) + "->" + std::to_string(move.to_ps) + " ";
  }
  EXPECT_EQ(moves, "a:1->1 b:1->1 ");
  EXPECT_THAT(plan->unasked, ::testing::ElementsAre(3));
  // The ps must answer to take its shards.
  listed[1] = absl::UnavailableError("ps:1 is down");
  EXPECT_EQ(PlanUndrain(1, listed).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ps
