#include "worker/exchange/exchange_factory.h"

#include <gtest/gtest.h>

#include "worker/exchange/exchange_testing.h"
#include "worker/exchange/overlapped_ps_exchange.h"
#include "worker/exchange/ps_exchange.h"

namespace ps {
namespace {

class ExchangeFactoryTest : public exchange_testing::ExchangeTest {
 protected:
  absl::StatusOr<std::unique_ptr<Exchange>> Create(ConsistencyConfig::Mode mode, bool overlap) {
    ExchangeContext context;
    context.spec.mutable_consistency()->set_mode(mode);
    context.spec.mutable_downpour()->set_overlap_communication(overlap);
    context.parameters = parameters_;
    context.variables = variables_;
    context.ps = client_.get();
    context.step_limit = 10;
    return CreateExchange(context);
  }
};

TEST_F(ExchangeFactoryTest, OverlappedCommunicationGetsItsOwnExchange) {
  StartJob(ConsistencyConfig::ASYNC);
  absl::StatusOr<std::unique_ptr<Exchange>> overlapped = Create(ConsistencyConfig::ASYNC, true);
  ASSERT_TRUE(overlapped.ok()) << overlapped.status();
  EXPECT_NE(dynamic_cast<OverlappedPsExchange*>(overlapped->get()), nullptr);
  absl::StatusOr<std::unique_ptr<Exchange>> plain = Create(ConsistencyConfig::ASYNC, false);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_NE(dynamic_cast<PsExchange*>(plain->get()), nullptr);
}

TEST_F(ExchangeFactoryTest, SyncCountsTheJobsStepsAndTheOtherModesDoNot) {
  StartJob(ConsistencyConfig::SYNC);
  absl::StatusOr<std::unique_ptr<Exchange>> sync = Create(ConsistencyConfig::SYNC, false);
  ASSERT_TRUE(sync.ok()) << sync.status();
  ASSERT_TRUE((*sync)->BeforeCompute(0).ok());
  EXPECT_EQ((*sync)->job_step(), 0);
  absl::StatusOr<std::unique_ptr<Exchange>> ssp = Create(ConsistencyConfig::SSP, false);
  ASSERT_TRUE(ssp.ok()) << ssp.status();
  EXPECT_EQ((*ssp)->job_step(), -1);
}

TEST_F(ExchangeFactoryTest, AWorkerOutOfRangeIsRefused) {
  StartJob(ConsistencyConfig::ASYNC);
  ExchangeContext context;
  context.spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  context.parameters = parameters_;
  context.variables = variables_;
  context.ps = client_.get();
  context.worker = 5;
  EXPECT_EQ(CreateExchange(context).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
