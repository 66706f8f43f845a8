#include "worker/exchange/easgd_exchange.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/job/job_spec.h"
#include "worker/exchange/exchange_testing.h"

namespace ps {
namespace {

using exchange_testing::kInitial;
using exchange_testing::kLearningRate;
using ::testing::Each;
using ::testing::FloatEq;

// EASGD on the one-variable job of exchange_testing (w = [1] * 4, the workers' SGD at 0.5),
// alpha 0.5 and period `period`; the shards made as ToParameterSpec makes them (SGD at rate 1).
class EasgdExchangeTest : public exchange_testing::ExchangeTest {
 protected:
  std::unique_ptr<EasgdExchange> Start(int period, int workers = 1) {
    JobSpec spec;
    spec.set_job_id("exchange-test");
    spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
    spec.mutable_learning_rate()->set_base(kLearningRate);
    spec.mutable_consistency()->set_mode(ConsistencyConfig::EASGD);
    spec.mutable_consistency()->set_easgd_alpha(0.5f);
    spec.mutable_consistency()->set_easgd_period(period);
    StartJob(ConsistencyConfig::ASYNC, workers);  // The cluster and the variable "w".
    // The shards' spec as the workers make it: the center moves by each difference as it is.
    parameters_ = ToParameterSpec(spec, variables_, workers);
    EXPECT_TRUE(client_->DeleteJob(parameters_.job_id()).ok());
    EXPECT_TRUE(client_->CreateJob(parameters_).ok());
    spec_ = spec;
    absl::StatusOr<std::unique_ptr<EasgdExchange>> exchange =
        EasgdExchange::Create(NewSession(0), variables_, spec);
    EXPECT_TRUE(exchange.ok()) << exchange.status();
    return exchange.ok() ? *std::move(exchange) : nullptr;
  }
  std::vector<float> Center() {
    std::vector<float> values(4);
    absl::StatusOr<WorkerSession::PullResult> pulled =
        NewSession(0)->Pull(WorkerSession::PullOptions(), {{"w", absl::MakeSpan(values)}});
    EXPECT_TRUE(pulled.ok()) << pulled.status();
    return values;
  }
  JobSpec spec_;
};

TEST_F(EasgdExchangeTest, TheCopyAndTheCenterMeetByTheElasticDifference) {
  std::unique_ptr<EasgdExchange> exchange = Start(/*period=*/1);
  ASSERT_TRUE(exchange->BeforeCompute(0).ok());
  EXPECT_THAT(exchange->weights().arrays()[0], Each(kInitial));
  ASSERT_TRUE(exchange->AfterCompute(0, *Gradient(1.0f)).ok());
  // Local SGD: x = 1 - 0.5 * 1 = 0.5; center 1; d = 0.5 * (0.5 - 1) = -0.25:
  // x = 0.5 + 0.25 = 0.75, center = 1 - 0.25 = 0.75.
  EXPECT_THAT(exchange->weights().arrays()[0], Each(FloatEq(0.75f)));
  EXPECT_THAT(Center(), Each(FloatEq(0.75f)));
  // The ps ran SGD at rate 1, not the job's 0.5: the whole difference moved the center.
  EXPECT_EQ(Stats().spec().learning_rate().base(), 1.0f);
}

TEST_F(EasgdExchangeTest, BetweenExchangesTheWorkerTrainsAlone) {
  std::unique_ptr<EasgdExchange> exchange = Start(/*period=*/2);
  ASSERT_TRUE(exchange->BeforeCompute(0).ok());
  ASSERT_TRUE(exchange->AfterCompute(0, *Gradient(1.0f)).ok());
  EXPECT_THAT(exchange->weights().arrays()[0], Each(FloatEq(0.5f)));
  EXPECT_THAT(Center(), Each(kInitial));  // Not met yet.
  ASSERT_TRUE(exchange->BeforeCompute(1).ok());
  ASSERT_TRUE(exchange->AfterCompute(1, *Gradient(1.0f)).ok());
  // x = 0 after two local steps; d = 0.5 * (0 - 1) = -0.5: x = 0.5, center = 0.5.
  EXPECT_THAT(exchange->weights().arrays()[0], Each(FloatEq(0.5f)));
  EXPECT_THAT(Center(), Each(FloatEq(0.5f)));
  EXPECT_EQ(Stats().applied_updates(), 1);
}

}  // namespace
}  // namespace ps
