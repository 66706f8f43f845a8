#include "worker/exchange/exchange_factory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/job/consistency_modes.h"

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

// A mode with a row in common/job/consistency_modes.h has an exchange: the ps modes' on the
// shards; the ring modes' needs the links to the other workers, which it says it lacks.
TEST_F(ExchangeFactoryTest, EveryModeOfTheTableHasAnExchange) {
  StartJob(ConsistencyConfig::ASYNC);
  for (ConsistencyConfig::Mode mode : AllModes()) {
    SCOPED_TRACE(ConsistencyConfig::Mode_Name(mode));
    ExchangeContext context;
    context.spec.mutable_consistency()->set_mode(mode);
    context.spec.mutable_consistency()->set_easgd_alpha(0.3f);
    context.spec.mutable_consistency()->set_easgd_period(1);
    context.spec.mutable_consistency()->set_local_steps(1);
    context.parameters = parameters_;
    context.variables = variables_;
    context.ps = client_.get();
    absl::StatusOr<std::unique_ptr<Exchange>> exchange = CreateExchange(context);
    if (ModeTraitsOf(mode).family == ModeFamily::kRing) {
      EXPECT_EQ(exchange.status().code(), absl::StatusCode::kFailedPrecondition)
          << exchange.status();
      EXPECT_THAT(std::string(exchange.status().message()), ::testing::HasSubstr("needs links"));
    } else {
      EXPECT_TRUE(exchange.ok()) << exchange.status();
    }
  }
  ExchangeContext unset;
  unset.parameters = parameters_;
  unset.variables = variables_;
  unset.ps = client_.get();
  EXPECT_EQ(CreateExchange(unset).status().code(), absl::StatusCode::kInvalidArgument);
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
