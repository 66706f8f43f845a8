#include "server/consistency/sync_rule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/schedules.h"
#include "server/consistency/rule_testing.h"

namespace ps {
namespace {

using rule_testing::PullFor;
using rule_testing::PushFrom;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ConsistencyConfig Sync(int replicas_to_aggregate = 0) {
  ConsistencyConfig config;
  config.set_mode(ConsistencyConfig::SYNC);
  config.set_replicas_to_aggregate(replicas_to_aggregate);
  return config;
}

TEST(SyncRuleTest, AStepAggregatesUntilAllWorkersGaveTheirGradient) {
  SyncRule rule(Sync(), 3);
  EXPECT_TRUE(rule.aggregates());
  EXPECT_EQ(rule.Admit(PushFrom(0), 0).action, PushDecision::kAccumulate);
  EXPECT_EQ(rule.Admit(PushFrom(2), 0).action, PushDecision::kAccumulate);
  EXPECT_THAT(rule.WaitingFor(), ElementsAre(1));
  EXPECT_EQ(rule.Admit(PushFrom(1), 0).action, PushDecision::kApplyAggregate);
  EXPECT_EQ(rule.open_aggregate().size(), 3u);
  EXPECT_EQ(rule.step(), 0);
  const std::vector<Contribution> applied = rule.TakeAggregate();
  ASSERT_EQ(applied.size(), 3u);
  EXPECT_EQ(applied[1].worker, 2);
  EXPECT_EQ(rule.step(), 1);
  EXPECT_THAT(rule.open_aggregate(), IsEmpty());
}

TEST(SyncRuleTest, APullForTheNextStepWaitsUntilTheStepIsApplied) {
  SyncRule rule(Sync(), 2);
  EXPECT_TRUE(rule.PullReady(PullFor(0, /*step=*/0)));
  EXPECT_FALSE(rule.PullReady(PullFor(0, /*step=*/1)));
  rule.Admit(PushFrom(0), 0);
  EXPECT_THAT(rule.WaitReason(PullFor(0, 1)),
              HasSubstr("pull for step 1 is waiting for step 0, which has 1 of 2 gradients; "
                        "still missing workers 1"));
  rule.Admit(PushFrom(1), 0);
  rule.TakeAggregate();
  EXPECT_TRUE(rule.PullReady(PullFor(0, 1)));
}

TEST(SyncRuleTest, BackupWorkersApplyTheFirstRAndDropTheRestAsStale) {
  SyncRule rule(Sync(/*replicas_to_aggregate=*/2), 3);
  EXPECT_EQ(rule.Admit(PushFrom(1), 0).action, PushDecision::kAccumulate);
  EXPECT_EQ(rule.Admit(PushFrom(0), 0).action, PushDecision::kApplyAggregate);
  rule.TakeAggregate();
  const PushDecision late = rule.Admit(PushFrom(2, 0, /*step=*/0), 1);
  EXPECT_EQ(late.action, PushDecision::kDrop);
  EXPECT_EQ(late.reason, "stale_step");
}

TEST(SyncRuleTest, FutureStepsAndSecondPushesForAStepAreRejected) {
  SyncRule rule(Sync(), 2);
  PushDecision future = rule.Admit(PushFrom(0, 0, /*step=*/1), 0);
  EXPECT_EQ(future.action, PushDecision::kReject);
  EXPECT_EQ(future.reason, "future_step");
  EXPECT_EQ(future.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(future.status.message(), HasSubstr("pull for a step before pushing for it"));
  EXPECT_THAT(rule.open_aggregate(), IsEmpty());

  rule.Admit(PushFrom(0), 0);
  PushDecision again = rule.Admit(PushFrom(0), 0);
  EXPECT_EQ(again.action, PushDecision::kReject);
  EXPECT_EQ(again.reason, "repeated_step");
  EXPECT_EQ(rule.open_aggregate().size(), 1u);
}

TEST(SyncRuleTest, AStepNeedsOnlyTheWorkersStillInTheJob) {
  SyncRule rule(Sync(), 3);
  rule.Leave(2);
  EXPECT_EQ(rule.AggregateSize(), 2);
  EXPECT_EQ(rule.Admit(PushFrom(0), 0).action, PushDecision::kAccumulate);
  EXPECT_THAT(rule.WaitingFor(), ElementsAre(1));
  // The last worker leaving completes the step that has the others' gradients.
  EXPECT_TRUE(rule.Leave(1));
  EXPECT_EQ(rule.AggregateSize(), 1);
}

TEST(SyncRuleTest, AWorkerThatLeftAfterGivingItsGradientStillCountsForTheOpenStep) {
  SyncRule rule(Sync(), 3);
  rule.Admit(PushFrom(0), 0);
  EXPECT_FALSE(rule.Leave(0));
  EXPECT_EQ(rule.AggregateSize(), 3);
  EXPECT_THAT(rule.WaitingFor(), ElementsAre(1, 2));
  rule.Admit(PushFrom(1), 0);
  EXPECT_EQ(rule.Admit(PushFrom(2), 0).action, PushDecision::kApplyAggregate);
  rule.TakeAggregate();
  EXPECT_EQ(rule.AggregateSize(), 2);  // The next step: worker 0 has left.
}

TEST(SyncRuleTest, LeavingWithNoOpenStepAppliesNothing) {
  SyncRule rule(Sync(), 2);
  EXPECT_FALSE(rule.Leave(0));
  EXPECT_FALSE(rule.Leave(1));
}

TEST(SyncRuleTest, TheScheduleCountsStepsNotUpdates) {
  SyncRule rule(Sync(), 1);
  const LearningRateSchedule schedule = testing_schedules::StepDecay(1.0f, 1, 0.5f);
  EXPECT_FLOAT_EQ(rule.LearningRate(schedule, /*updates_started=*/7, 0), 1.0f);
  rule.Admit(PushFrom(0), 0);
  rule.TakeAggregate();
  EXPECT_FLOAT_EQ(rule.LearningRate(schedule, 0, 0), 0.5f);
}

TEST(SyncRuleTest, ItsStateComesBackFromACheckpointWithTheOpenStep) {
  SyncRule rule(Sync(), 3);
  rule.Admit(PushFrom(0), 0);
  rule.Admit(PushFrom(1), 0);
  rule.Admit(PushFrom(2), 0);
  rule.TakeAggregate();
  rule.Admit(PushFrom(2, /*read_version=*/1, /*step=*/1), 0);
  rule.Leave(0);
  ShardCheckpointState state;
  rule.SaveState(&state);
  SyncRule restored(Sync(), 3);
  ASSERT_TRUE(restored.RestoreState(state).ok());
  EXPECT_EQ(restored.step(), 1);
  ASSERT_EQ(restored.open_aggregate().size(), 1u);
  EXPECT_EQ(restored.open_aggregate()[0].worker, 2);
  EXPECT_EQ(restored.open_aggregate()[0].read_version, 1);
  EXPECT_TRUE(restored.left(0));
  EXPECT_THAT(restored.WaitingFor(), ElementsAre(1));
  // It goes on as the original would: worker 1's gradient completes the step.
  EXPECT_EQ(restored.Admit(PushFrom(1, 1, 1), 0).action, PushDecision::kApplyAggregate);
}

// A repeat (a batch the shard trained on before) counts for a step that needs every worker, not
// for its mean, and is one in a checkpoint too; with backup workers it is dropped.
TEST(SyncRuleTest, ARepeatJoinsOnlyAStepThatNeedsEveryWorker) {
  SyncRule rule(Sync(), 2);
  ASSERT_EQ(rule.AdmitRepeat(PushFrom(0), 0).action, PushDecision::kAccumulate);
  EXPECT_EQ(rule.SummedContributions(), 0);
  EXPECT_THAT(rule.WaitingFor(), ElementsAre(1));
  ShardCheckpointState state;
  rule.SaveState(&state);
  SyncRule restored(Sync(), 2);
  ASSERT_TRUE(restored.RestoreState(state).ok());
  ASSERT_EQ(restored.open_aggregate().size(), 1u);
  EXPECT_TRUE(restored.open_aggregate()[0].repeat);
  EXPECT_EQ(restored.Admit(PushFrom(1), 0).action, PushDecision::kApplyAggregate);
  EXPECT_EQ(restored.SummedContributions(), 1);

  SyncRule backups(Sync(/*replicas_to_aggregate=*/2), 3);
  PushDecision dropped = backups.AdmitRepeat(PushFrom(0), 0);
  EXPECT_EQ(dropped.action, PushDecision::kDrop);
  EXPECT_EQ(dropped.reason, "batch_seen");
  EXPECT_THAT(backups.open_aggregate(), IsEmpty());
  // Once one of the three has left, the step needs both others: a repeat joins it.
  backups.Leave(2);
  EXPECT_EQ(backups.AdmitRepeat(PushFrom(1), 0).action, PushDecision::kAccumulate);
}

}  // namespace
}  // namespace ps
