#include "worker/exchange/ps_exchange.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/exchange/exchange_testing.h"

namespace ps {
namespace {

using exchange_testing::kInitial;
using exchange_testing::kLearningRate;
using ::testing::Each;

class PsExchangeTest : public exchange_testing::ExchangeTest {
 protected:
  std::unique_ptr<PsExchange> NewExchange(const DownpourSchedule& downpour, bool counts_steps,
                                          int64_t step_limit, int worker = 0) {
    PsExchangeOptions options;
    options.downpour = downpour;
    options.counts_steps = counts_steps;
    options.step_limit = step_limit;
    return std::make_unique<PsExchange>(NewSession(worker), variables_, options);
  }
  static std::vector<float> W(const Exchange& exchange) { return exchange.weights().arrays()[0]; }
};

TEST_F(PsExchangeTest, SyncStepsFollowTheShardsStepAndEachStartsFromTheLastUpdate) {
  StartJob(ConsistencyConfig::SYNC);
  std::unique_ptr<PsExchange> exchange = NewExchange(DownpourSchedule(), true, 3);
  ASSERT_TRUE(exchange->BeforeCompute(0).ok());
  EXPECT_EQ(exchange->job_step(), 0);
  EXPECT_THAT(W(*exchange), Each(kInitial));
  ASSERT_TRUE(exchange->AfterCompute(0, *Gradient(1.0f)).ok());
  // The next pull came with the push: step 1 starts from the values after step 0.
  ASSERT_TRUE(exchange->BeforeCompute(1).ok());
  EXPECT_EQ(exchange->job_step(), 1);
  EXPECT_EQ(exchange->global_step(), 1);
  EXPECT_THAT(W(*exchange), Each(kInitial - kLearningRate));
  ASSERT_TRUE(exchange->AfterCompute(1, *Gradient(0.5f)).ok());
  JobStats stats = Stats();
  EXPECT_EQ(stats.step(), 2);
  EXPECT_EQ(stats.applied_gradients(), 2);
  EXPECT_EQ(exchange->mean_staleness(), 0);
}

// With a backup worker (R < N) the job's steps go on without the slow one, which then follows
// the shards' step rather than its own count, and whose push counts for that step.
TEST_F(PsExchangeTest, ALateSyncWorkerFollowsTheShardsStepPastItsOwn) {
  StartJob(ConsistencyConfig::SYNC, /*num_workers=*/2, /*replicas_to_aggregate=*/1);
  std::unique_ptr<PsExchange> fast = NewExchange(DownpourSchedule(), true, 10, /*worker=*/0);
  std::unique_ptr<PsExchange> late = NewExchange(DownpourSchedule(), true, 10, /*worker=*/1);
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(fast->BeforeCompute(step).ok());
    ASSERT_TRUE(fast->AfterCompute(step, *Gradient(1.0f)).ok());
  }
  ASSERT_TRUE(late->BeforeCompute(0).ok());
  EXPECT_EQ(late->job_step(), 3);
  EXPECT_EQ(late->global_step(), 3);
  ASSERT_TRUE(late->AfterCompute(0, *Gradient(1.0f)).ok());
  JobStats stats = Stats();
  EXPECT_EQ(stats.step(), 4);
  EXPECT_TRUE(stats.dropped().empty());
}

TEST_F(PsExchangeTest, DownpourPushesTheMeanOfNPushGradientsAndPullsEveryNFetchSteps) {
  StartJob(ConsistencyConfig::ASYNC);
  DownpourSchedule downpour;
  downpour.n_push = 2;
  downpour.n_fetch = 2;
  downpour.accumulate = true;
  std::unique_ptr<PsExchange> exchange = NewExchange(downpour, false, 4);
  ASSERT_TRUE(exchange->BeforeCompute(0).ok());
  EXPECT_EQ(exchange->job_step(), -1);  // ASYNC counts no steps of the job.
  ASSERT_TRUE(exchange->AfterCompute(0, *Gradient(1.0f)).ok());
  EXPECT_EQ(Stats().applied_gradients(), 0);  // Accumulated, not pushed.
  ASSERT_TRUE(exchange->BeforeCompute(1).ok());  // No pull on step 1.
  ASSERT_TRUE(exchange->AfterCompute(1, *Gradient(0.5f)).ok());
  EXPECT_EQ(Stats().applied_gradients(), 1);
  ASSERT_TRUE(exchange->BeforeCompute(2).ok());
  EXPECT_THAT(W(*exchange), Each(kInitial - kLearningRate * (1.0f + 0.5f) / 2));
  EXPECT_EQ(exchange->global_step(), 1);
}

TEST_F(PsExchangeTest, ALocalLearningRateUpdatesTheLocalWeightsBetweenPulls) {
  StartJob(ConsistencyConfig::ASYNC);
  DownpourSchedule downpour;
  downpour.n_fetch = 4;
  downpour.local_learning_rate = 0.25f;
  downpour.accumulate = true;
  std::unique_ptr<PsExchange> exchange = NewExchange(downpour, false, 4);
  ASSERT_TRUE(exchange->BeforeCompute(0).ok());
  ASSERT_TRUE(exchange->AfterCompute(0, *Gradient(1.0f)).ok());
  ASSERT_TRUE(exchange->BeforeCompute(1).ok());
  EXPECT_THAT(W(*exchange), Each(kInitial - 0.25f));
}

TEST_F(PsExchangeTest, TheLastStepsPushBringsNoPull) {
  StartJob(ConsistencyConfig::ASYNC);
  std::unique_ptr<PsExchange> exchange = NewExchange(DownpourSchedule(), false, 1);
  ASSERT_TRUE(exchange->BeforeCompute(0).ok());
  ASSERT_TRUE(exchange->AfterCompute(0, *Gradient(1.0f)).ok());
  EXPECT_THAT(W(*exchange), Each(kInitial));  // Unchanged: nothing was pulled after the push.
  EXPECT_EQ(Stats().applied_gradients(), 1);
  EXPECT_TRUE(exchange->Finish().ok());
}

TEST_F(PsExchangeTest, SspPushesCompleteTheWorkersClocks) {
  StartJob(ConsistencyConfig::SSP);
  std::unique_ptr<PsExchange> exchange = NewExchange(DownpourSchedule(), false, 3);
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(exchange->BeforeCompute(step).ok());
    ASSERT_TRUE(exchange->AfterCompute(step, *Gradient(1.0f)).ok());
  }
  EXPECT_EQ(Stats().workers(0).clock(), 3);
}

}  // namespace
}  // namespace ps
