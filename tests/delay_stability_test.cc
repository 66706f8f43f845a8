#include "tests/delay_stability.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(DelayStabilityTest, TheFormulasEdges) {
  EXPECT_NEAR(TheoreticalStabilityEdge(0), 2.0, 1e-12);
  EXPECT_NEAR(TheoreticalStabilityEdge(1), 1.0, 1e-12);
  EXPECT_NEAR(TheoreticalStabilityEdge(2), 0.618034, 1e-6);
  EXPECT_NEAR(TheoreticalStabilityEdge(10), 0.149, 1e-3);
}

TEST(DelayStabilityTest, JustBelowTheEdgeShrinksAndJustAboveGrows) {
  for (int delay : {0, 1, 3}) {
    const double edge = TheoreticalStabilityEdge(delay);
    EXPECT_TRUE(IsStable(delay, 0.97 * edge, 20000).value()) << delay;
    EXPECT_FALSE(IsStable(delay, 1.03 * edge, 20000).value()) << delay;
  }
}

// The check: the measured edge of the ps's DELAYED mode within 2% of the formula.
TEST(DelayStabilityTest, TheMeasuredEdgeIsTheFormulasWithinTwoPercent) {
  for (int delay : {0, 1, 2}) {
    absl::StatusOr<double> edge = MeasuredStabilityEdge(delay, 0.002, 20000);
    ASSERT_TRUE(edge.ok()) << edge.status();
    EXPECT_NEAR(*edge / TheoreticalStabilityEdge(delay), 1.0, 0.02) << "delay " << delay;
  }
}

}  // namespace
}  // namespace ps
