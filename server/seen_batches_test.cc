#include "server/seen_batches.h"

#include <vector>

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(SeenBatchesTest, SaysWhetherEveryBatchWasSeenAndStaysCompact) {
  SeenBatches seen;
  EXPECT_FALSE(seen.AllSeen({}));
  EXPECT_FALSE(seen.AllSeen({0}));
  seen.Add({2});
  seen.Add({0});
  EXPECT_TRUE(seen.AllSeen({0}));
  EXPECT_TRUE(seen.AllSeen({2, 0}));
  EXPECT_FALSE(seen.AllSeen({1}));
  EXPECT_FALSE(seen.AllSeen({0, 1})) << "one of them is new";
  EXPECT_EQ(seen.listed(), 1u);  // 0 is in the prefix, 2 listed.
  seen.Add({1});                 // Fills the gap: 0, 1, 2 are the prefix now.
  EXPECT_EQ(seen.listed(), 0u);
  EXPECT_TRUE(seen.AllSeen({0, 1, 2}));
  seen.Add({1});  // Again: no change.
  EXPECT_EQ(seen.listed(), 0u);
  EXPECT_FALSE(seen.AllSeen({3}));
}

TEST(SeenBatchesTest, ComesBackFromACheckpointAndRefusesADamagedOne) {
  SeenBatches seen;
  seen.Add({0, 1, 5, 7});
  ShardCheckpointState state;
  seen.Save(&state);
  EXPECT_EQ(state.batches_seen_below(), 2);
  EXPECT_EQ(std::vector<int64_t>(state.batches_seen().begin(), state.batches_seen().end()),
            (std::vector<int64_t>{5, 7}));
  SeenBatches restored;
  ASSERT_TRUE(restored.Restore(state).ok());
  EXPECT_TRUE(restored.AllSeen({1, 5, 7}));
  EXPECT_FALSE(restored.AllSeen({6}));

  ShardCheckpointState damaged = state;
  damaged.add_batches_seen(6);  // Not increasing.
  absl::Status refused = restored.Restore(damaged);
  EXPECT_TRUE(absl::IsDataLoss(refused)) << refused;
  EXPECT_FALSE(restored.AllSeen({6})) << "a refused restore changes nothing";
  damaged = state;
  damaged.set_batches_seen_below(-1);
  EXPECT_TRUE(absl::IsDataLoss(restored.Restore(damaged)));
  damaged = state;
  damaged.clear_batches_seen();
  damaged.add_batches_seen(2);  // Not after the prefix.
  EXPECT_TRUE(absl::IsDataLoss(restored.Restore(damaged)));
  ASSERT_TRUE(restored.Restore(ShardCheckpointState()).ok()) << "an older checkpoint";
  EXPECT_FALSE(restored.AllSeen({0}));
}

}  // namespace
}  // namespace ps
