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
    diverged = watch.Observe(step, 1.0 + 0.2 * step);  // The first 10: at most 2.8.
  }
  ASSERT_TRUE(diverged.has_value());
  // Steps 13-22 (losses 3.4 .. 5.2, mean 4.3 > 1.5 * 2.8) are the first window above.
  EXPECT_EQ(step, 22);
  EXPECT_THAT(*diverged, HasSubstr("the training loss rose: its mean over steps 13-22 is 4.3,"));
  EXPECT_THAT(*diverged, HasSubstr("above 2.8, the largest over steps 1-10 where it started"));
}

TEST(DivergenceWatchTest, ALossThatBlowsUpDiverges) {
  DivergenceWatch watch;
  std::optional<std::string> diverged;
  for (int step = 0; step < 30 && !diverged.has_value(); ++step) {
    diverged = watch.Observe(step, 1.4 * std::pow(2.0, step));  // Doubling from the start.
  }
  ASSERT_TRUE(diverged.has_value());
}

// A classifier whose loss jumps at once and stays far above a uniform guess's.
TEST(DivergenceWatchTest, AClassifierFarWorseThanGuessingDiverges) {
  DivergenceWatch watch(std::log(4.0));
  std::optional<std::string> diverged = watch.Observe(0, 1.4);
  for (int step = 1; step < 20 && !diverged.has_value(); ++step) {
    diverged = watch.Observe(step, step % 2 == 0 ? 300.0 : 250.0);
  }
  ASSERT_TRUE(diverged.has_value());
  EXPECT_THAT(*diverged, HasSubstr("far worse than guessing (1.38629)"));
  DivergenceWatch regression;  // Without a guessing loss, the first window's 300 is the start.
  diverged = regression.Observe(0, 1.4);
  for (int step = 1; step < 40; ++step) {
    EXPECT_EQ(regression.Observe(step, step % 2 == 0 ? 300.0 : 250.0), std::nullopt);
  }
}

// A worker that started once the others had trained the model (ASYNC on a loaded machine): its
// loss is small and noisy from step 0, and that noise is no divergence.
TEST(DivergenceWatchTest, ASmallNoisyStartIsNoDivergence) {
  DivergenceWatch watch(std::log(10.0));
  for (int step = 0; step < 200; ++step) {
    EXPECT_EQ(watch.Observe(step, step % 3 == 0 ? 0.0009 : 0.0004), std::nullopt) << step;
  }
  // Nor is a tiny loss that doubles, as the ci sweep's late ASYNC worker's did (0.0047 at its
  // first step, 0.009 later).
  DivergenceWatch doubling(std::log(4.0));
  for (int step = 0; step < 10; ++step) EXPECT_EQ(doubling.Observe(step, 0.0047), std::nullopt);
  for (int step = 10; step < 60; ++step) EXPECT_EQ(doubling.Observe(step, 0.009), std::nullopt);
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
