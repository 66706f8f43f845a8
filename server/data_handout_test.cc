#include "server/data_handout.h"

#include <map>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Takes with each worker's next request id.
class Taker {
 public:
  explicit Taker(DataHandout* handout) : handout_(handout) {}
  std::vector<int64_t> operator()(int worker, int count) {
    absl::StatusOr<std::vector<int64_t>> batches =
        handout_->Take(worker, /*incarnation=*/0, ++ids_[worker], count);
    EXPECT_TRUE(batches.ok()) << batches.status();
    return batches.ok() ? *batches : std::vector<int64_t>();
  }
  // After a restore every worker restarts, numbering its requests from 1.
  void RestartAll() { ids_.clear(); }

 private:
  DataHandout* handout_;
  std::map<int, int64_t> ids_;
};

DataHandoutSpec Spec(int64_t batches_per_epoch, int64_t epochs) {
  DataHandoutSpec spec;
  spec.set_batches_per_epoch(batches_per_epoch);
  spec.set_epochs(epochs);
  return spec;
}

TEST(DataHandoutTest, HandsBatchesOutInOrderAndEndsAfterTheLastEpoch) {
  DataHandout handout(Spec(3, 2), 2);
  Taker take(&handout);
  EXPECT_THAT(take(0, 2), ElementsAre(0, 1));
  EXPECT_THAT(take(1, 5), ElementsAre(2, 3, 4, 5));
  EXPECT_THAT(take(0, 1), IsEmpty());
  EXPECT_EQ(handout.epochs_completed(), 0);
  handout.Trained(0, {0, 1});
  handout.Trained(1, {2});
  EXPECT_EQ(handout.epochs_completed(), 1);
  handout.Trained(1, {3, 4, 5});
  EXPECT_EQ(handout.epochs_completed(), 2);
  const DataHandoutStats stats = handout.Stats();
  EXPECT_EQ(stats.batches_trained(), 6);
  EXPECT_EQ(stats.batches_held(), 0);
}

TEST(DataHandoutTest, GivenBackBatchesGoOutAgainFirst) {
  DataHandout handout(Spec(10, 0), 3);
  Taker take(&handout);
  EXPECT_THAT(take(0, 3), ElementsAre(0, 1, 2));
  EXPECT_THAT(take(1, 2), ElementsAre(3, 4));
  handout.GiveBackAll(0);  // Worker 0 left.
  EXPECT_THAT(take(2, 5), ElementsAre(0, 1, 2, 5, 6));
  EXPECT_EQ(handout.Stats().batches_given_back(), 3);
}

// A lost worker keeps its batches while its epoch has new ones to hand out: a slow worker that
// comes back pushes them itself. Before the next epoch begins, they go to others.
TEST(DataHandoutTest, ALostWorkersBatchesGoToOthersOnlyBeforeTheNextEpoch) {
  DataHandout handout(Spec(4, 2), 2);
  Taker take(&handout);
  EXPECT_THAT(take(0, 2), ElementsAre(0, 1));
  handout.Lost(0);
  EXPECT_THAT(take(1, 1), ElementsAre(2));
  handout.Trained(0, {0});  // Back in time for batch 0: no longer lost.
  handout.Lost(0);
  EXPECT_THAT(take(1, 3), ElementsAre(3, 1, 4));  // Batch 1 before epoch 1's first.
  EXPECT_THAT(handout.CheckHeld(0, {1}).message(), HasSubstr("worker 1 holds it now"));
  EXPECT_EQ(handout.Stats().batches_given_back(), 1);
}

TEST(DataHandoutTest, RefusesBatchesTheWorkerDoesNotHold) {
  DataHandout handout(Spec(10, 1), 2);
  Taker take(&handout);
  take(0, 2);
  EXPECT_TRUE(handout.CheckHeld(0, {0, 1}).ok());
  EXPECT_THAT(handout.CheckHeld(1, {0}).message(), HasSubstr("worker 0 holds it"));
  EXPECT_THAT(handout.CheckHeld(0, {7}).message(), HasSubstr("never handed out"));
  EXPECT_THAT(handout.CheckHeld(0, {-1}).message(), HasSubstr("never handed out"));
  EXPECT_EQ(handout.CheckHeld(0, {1, 1}).code(), absl::StatusCode::kInvalidArgument);
  handout.GiveBackAll(0);
  EXPECT_THAT(handout.CheckHeld(0, {0}).message(), HasSubstr("waits to be handed out again"));
  take(1, 1);
  handout.Trained(1, {0});
  EXPECT_EQ(handout.CheckHeld(0, {0}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(DataHandoutTest, ARetriedRequestGetsTheSameAnswer) {
  DataHandout handout(Spec(10, 1), 2);
  EXPECT_THAT(*handout.Take(0, 0, 1, 2), ElementsAre(0, 1));
  EXPECT_THAT(*handout.Take(0, 0, 1, 2), ElementsAre(0, 1));  // The answer was lost: the same.
  EXPECT_THAT(*handout.Take(0, 0, 2, 1), ElementsAre(2));
  EXPECT_EQ(handout.Take(0, 0, 1, 2).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(handout.Take(0, 0, 3, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(handout.Take(0, 0, 3, DataHandout::kMaxHeld + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A new process numbers from 1 again, and what the old one held went back.
  EXPECT_THAT(*handout.Take(0, 1, 1, 5), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_EQ(handout.Take(0, 0, 9, 1).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(DataHandoutTest, AWorkerHoldsAtMostKMaxHeld) {
  DataHandout handout(Spec(1000, 1), 1);
  EXPECT_EQ(handout.Take(0, 0, 1, DataHandout::kMaxHeld)->size(), DataHandout::kMaxHeld);
  absl::StatusOr<std::vector<int64_t>> full = handout.Take(0, 0, 2, 1);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(full.status().message(), HasSubstr("push their gradients first"));
  handout.Trained(0, {0});
  EXPECT_THAT(*handout.Take(0, 0, 2, 5), ElementsAre(DataHandout::kMaxHeld));  // Its retry.
}

TEST(DataHandoutTest, RequestsAreNumberedOneByOne) {
  DataHandout handout(Spec(10, 1), 1);
  EXPECT_EQ(handout.Take(0, 0, 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(handout.Take(0, 0, 2, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(handout.Take(0, 0, 1, 1).ok());
  EXPECT_EQ(handout.Take(0, 0, 5, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(handout.Stats().batches_held(), 1);
}

// Workers take, push (admitted or dropped), die and restart at random: every batch of every
// epoch is trained on exactly once, and a checkpoint taken anywhere resumes to the same end.
TEST(DataHandoutTest, EveryBatchIsTrainedOnExactlyOnceWhateverHappens) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    constexpr int kWorkers = 4;
    const DataHandoutSpec spec = Spec(17, 3);
    DataHandout handout(spec, kWorkers);
    Taker take(&handout);
    std::mt19937 random(seed);
    std::vector<std::vector<int64_t>> holding(kWorkers);
    std::map<int64_t, int> trained;
    for (int event = 0; event < 2000; ++event) {
      const int worker = static_cast<int>(random() % kWorkers);
      std::vector<int64_t>& mine = holding[worker];
      switch (random() % 6) {
        case 0:
        case 1: {
          std::vector<int64_t> got = take(worker, 1 + static_cast<int>(random() % 4));
          mine.insert(mine.end(), got.begin(), got.end());
          break;
        }
        case 2:
        case 3:
          if (!mine.empty()) {
            const std::vector<int64_t> push = {mine.front()};
            mine.erase(mine.begin());
            // Refused only when it was lost and its batch went to another meanwhile.
            if (!handout.CheckHeld(worker, push).ok()) break;
            handout.Trained(worker, push);
            ++trained[push[0]];
          }
          break;
        case 4:
          handout.Lost(worker);  // Its lease ran out; it may yet come back.
          break;
        case 5:
          if (random() % 4 == 0) {
            // Dies holding its batches, whose late push is then refused.
            handout.GiveBackAll(worker);
            for (int64_t batch : mine) EXPECT_FALSE(handout.CheckHeld(worker, {batch}).ok());
            mine.clear();
          } else if (random() % 4 == 0) {
            // A checkpoint and a restore: held batches go back.
            DataHandoutState state;
            handout.Save(&state);
            ASSERT_TRUE(handout.Restore(state).ok());
            take.RestartAll();
            for (auto& held : holding) held.clear();
          }
          break;
      }
    }
    // The survivors drain what is left.
    for (int worker = 0, round = 0;; worker = (worker + 1) % kWorkers, ++round) {
      ASSERT_LT(round, 1000) << "the drain does not end";
      for (int64_t batch : holding[worker]) {
        if (!handout.CheckHeld(worker, {batch}).ok()) continue;  // Went to another.
        handout.Trained(worker, {batch});
        ++trained[batch];
      }
      holding[worker] = take(worker, 3);
      if (handout.epochs_completed() == 3) break;
    }
    ASSERT_EQ(trained.size(), 51u);
    for (const auto& [batch, times] : trained) EXPECT_EQ(times, 1) << "batch " << batch;
    EXPECT_EQ(handout.Stats().batches_trained(), 51);
  }
}

TEST(DataHandoutTest, RestoreRefusesAStateThatDoesNotFit) {
  DataHandout handout(Spec(5, 2), 1);
  Taker take(&handout);
  DataHandoutState state;
  state.set_next_batch(11);
  EXPECT_EQ(handout.Restore(state).code(), absl::StatusCode::kDataLoss);
  state.set_next_batch(4);
  state.add_waiting(2);
  state.add_waiting(2);
  EXPECT_EQ(handout.Restore(state).code(), absl::StatusCode::kDataLoss);
  state.clear_waiting();
  state.add_waiting(3);
  ASSERT_TRUE(handout.Restore(state).ok());
  EXPECT_THAT(take(0, 3), ElementsAre(3, 4, 5));
}

}  // namespace
}  // namespace ps
