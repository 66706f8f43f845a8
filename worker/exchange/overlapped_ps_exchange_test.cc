#include "worker/exchange/overlapped_ps_exchange.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/exchange/exchange_testing.h"

namespace ps {
namespace {

using exchange_testing::kInitial;
using exchange_testing::kLearningRate;
using ::testing::Each;

class OverlappedPsExchangeTest : public exchange_testing::ExchangeTest {
 protected:
  static DownpourSchedule EveryStep() {
    DownpourSchedule downpour;
    downpour.accumulate = true;
    return downpour;
  }
};

TEST_F(OverlappedPsExchangeTest, EachStepComputesOnTheWeightsOfTheExchangeBeforeTheLast) {
  StartJob(ConsistencyConfig::ASYNC);
  OverlappedPsExchange exchange(NewSession(), variables_, EveryStep(), 3);
  ASSERT_TRUE(exchange.BeforeCompute(0).ok());
  ASSERT_TRUE(exchange.AfterCompute(0, *Gradient(1.0f)).ok());
  // Step 1 computes while step 0's push and pull are in flight: on the initial weights.
  ASSERT_TRUE(exchange.BeforeCompute(1).ok());
  EXPECT_THAT(exchange.weights().arrays()[0], Each(kInitial));
  ASSERT_TRUE(exchange.AfterCompute(1, *Gradient(1.0f)).ok());
  // Step 0's exchange is finished: step 2 computes on the values after step 0's update.
  ASSERT_TRUE(exchange.BeforeCompute(2).ok());
  EXPECT_THAT(exchange.weights().arrays()[0], Each(kInitial - kLearningRate));
  ASSERT_TRUE(exchange.AfterCompute(2, *Gradient(1.0f)).ok());  // The last: finished here.
  EXPECT_EQ(Stats().applied_gradients(), 3);
  ASSERT_TRUE(exchange.Finish().ok());
}

TEST_F(OverlappedPsExchangeTest, PushesCarryTheVersionsTheirGradientWasComputedFrom) {
  StartJob(ConsistencyConfig::ASYNC);
  OverlappedPsExchange exchange(NewSession(), variables_, EveryStep(), 4);
  for (int step = 0; step < 4; ++step) {
    ASSERT_TRUE(exchange.BeforeCompute(step).ok());
    ASSERT_TRUE(exchange.AfterCompute(step, *Gradient(0.5f)).ok());
  }
  ASSERT_TRUE(exchange.Finish().ok());
  // One worker: the first gradient is fresh, every later one one update stale.
  JobStats stats = Stats();
  EXPECT_EQ(stats.applied_gradients(), 4);
  EXPECT_EQ(stats.staleness().max(), 1);
  EXPECT_DOUBLE_EQ(exchange.mean_staleness(), 3.0 / 4);
}

TEST_F(OverlappedPsExchangeTest, NPushGradientsAddUpBeforeTheyGo) {
  StartJob(ConsistencyConfig::ASYNC);
  DownpourSchedule downpour = EveryStep();
  downpour.n_push = 2;
  OverlappedPsExchange exchange(NewSession(), variables_, downpour, 2);
  ASSERT_TRUE(exchange.BeforeCompute(0).ok());
  ASSERT_TRUE(exchange.AfterCompute(0, *Gradient(1.0f)).ok());
  ASSERT_TRUE(exchange.BeforeCompute(1).ok());
  ASSERT_TRUE(exchange.AfterCompute(1, *Gradient(0.5f)).ok());
  ASSERT_TRUE(exchange.Finish().ok());
  EXPECT_EQ(Stats().applied_gradients(), 1);
  EXPECT_EQ(Stats().version(), 1);
}

}  // namespace
}  // namespace ps
