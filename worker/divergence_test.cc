#include "worker/divergence.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ps {
namespace {

using ::testing::HasSubstr;

TEST(DivergenceWatchTest, AFallingNoisyLossNeitherDivergesNorStalls) {
  DivergenceWatch watch;
  for (int step = 0; step < 200; ++step) {
    // Falling, with batch noise of +-30% that a window's mean smooths out.
    const double loss = 2.0 / (1 + 0.05 * step) * (step % 2 == 0 ? 1.3 : 0.7);
    EXPECT_EQ(watch.Observe(step, loss), std::nullopt) << "step " << step;
  }
  EXPECT_EQ(watch.StallNote(), "");
}

TEST(DivergenceWatchTest, ARisingLossDivergesOnceItsMeanIsWellAboveTheStart) {
  DivergenceWatch watch;
  std::optional<std::string> diverged;
  int step = 0;
  for (; step < 100 && !diverged.has_value(); ++step) {
    diverged = watch.Observe(step, 1.0 + 0.1 * step);
  }
  ASSERT_TRUE(diverged.has_value());
  // Steps 2-11 (losses 1.1 .. 2.0, mean 1.55 > 1.5 * 1.0) are the first window above.
  EXPECT_EQ(step, 11);
  EXPECT_THAT(*diverged, HasSubstr("the training loss rose: its mean over steps 2-11 is 1.55,"));
  EXPECT_THAT(*diverged, HasSubstr("above 1 at step 1 where it started"));
}

TEST(DivergenceWatchTest, AJobThatBlowsUpAtOnceDiverges) {
  DivergenceWatch watch;
  EXPECT_EQ(watch.Observe(0, 1.4), std::nullopt);
  std::optional<std::string> diverged;
  for (int step = 1; step < 10; ++step) diverged = watch.Observe(step, 300.0);
  ASSERT_TRUE(diverged.has_value());
}

TEST(DivergenceWatchTest, AWorkerThatResumesMidRunIsJudgedOnNonFiniteLossesOnly) {
  DivergenceWatch watch;
  // A trained model's small loss, noisy: no start to rise from.
  for (int step = 60; step < 100; ++step) {
    EXPECT_EQ(watch.Observe(step, step % 2 == 0 ? 0.001 : 0.003), std::nullopt);
  }
  EXPECT_TRUE(watch.Observe(100, std::nan("")).has_value());
}

TEST(DivergenceWatchTest, ANonFiniteLossDivergesAtOnce) {
  DivergenceWatch watch;
  EXPECT_EQ(watch.Observe(0, 1.0), std::nullopt);
  std::optional<std::string> nan = watch.Observe(1, std::nan(""));
  ASSERT_TRUE(nan.has_value());
  EXPECT_THAT(*nan, HasSubstr("is nan at step 2"));
  std::optional<std::string> inf = watch.Observe(2, std::numeric_limits<double>::infinity());
  ASSERT_TRUE(inf.has_value());
  EXPECT_THAT(*inf, HasSubstr("is inf at step 3"));
}

TEST(DivergenceWatchTest, AFlatLossStallsButDoesNotDiverge) {
  DivergenceWatch watch;
  for (int step = 0; step < 40; ++step) EXPECT_EQ(watch.Observe(step, 0.7), std::nullopt);
  EXPECT_THAT(watch.StallNote(), HasSubstr("had stopped falling"));
  DivergenceWatch short_job;  // Too few steps to judge.
  for (int step = 0; step < 39; ++step) short_job.Observe(step, 0.7);
  EXPECT_EQ(short_job.StallNote(), "");
}

}  // namespace
}  // namespace ps
