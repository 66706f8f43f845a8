#include "common/did_you_mean.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

const std::vector<std::string> kFields = {"job_id", "steps", "epochs", "learning_rate",
                                          "batch_size", "time_limit_s"};

TEST(DidYouMeanTest, FindsTheNameATypoWasMeantToBe) {
  EXPECT_EQ(ClosestName("stepz", kFields), "steps");          // Replaced.
  EXPECT_EQ(ClosestName("learning_rat", kFields), "learning_rate");  // Deleted.
  EXPECT_EQ(ClosestName("batchsize", kFields), "batch_size");  // Deleted.
  EXPECT_EQ(ClosestName("epcohs", kFields), "epochs");        // Neighbours swapped: one edit.
  EXPECT_EQ(ClosestName("STEPS", kFields), "steps");          // Case ignored.
  EXPECT_EQ(ClosestName("SYNCH", {"SYNC", "ASYNC", "SSP"}), "SYNC");
  EXPECT_EQ(ClosestName("submitt", {"local", "submit", "status"}), "submit");
}

TEST(DidYouMeanTest, SuggestsNothingForAWordFarFromEveryName) {
  EXPECT_EQ(ClosestName("model_size", kFields), "");
  EXPECT_EQ(ClosestName("ab", {"cd"}), "");  // Two edits of a short word: not a typo.
  EXPECT_EQ(ClosestName("x", {}), "");
  EXPECT_EQ(DidYouMean("model_size", kFields), "");
}

TEST(DidYouMeanTest, SaysItWithThePrefix) {
  EXPECT_EQ(DidYouMean("stepz", kFields), " (did you mean \"steps\"?)");
  EXPECT_EQ(DidYouMean("worker", {"workers", "ps"}, "--"), " (did you mean \"--workers\"?)");
}

}  // namespace
}  // namespace ps
