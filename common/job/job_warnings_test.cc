#include "common/job/job_warnings.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

JobSpec Job(ConsistencyConfig::Mode mode, OptimizerConfig::Kind optimizer) {
  JobSpec spec;
  spec.mutable_consistency()->set_mode(mode);
  spec.mutable_optimizer()->set_kind(optimizer);
  spec.mutable_learning_rate()->set_base(0.1f);
  return spec;
}

TEST(JobWarningsTest, MomentumWithAsynchronyIsATrap) {
  EXPECT_THAT(JobWarnings(Job(ConsistencyConfig::ASYNC, OptimizerConfig::MOMENTUM), 2),
              ElementsAre(HasSubstr("ASYNC with momentum 0.9 on 2 workers")));
  EXPECT_THAT(JobWarnings(Job(ConsistencyConfig::SOFTSYNC, OptimizerConfig::ADAM), 2),
              ElementsAre(HasSubstr("asynchrony itself acts as momentum")));
  JobSpec ssp = Job(ConsistencyConfig::SSP, OptimizerConfig::MOMENTUM);
  ssp.mutable_consistency()->set_ssp_bound(3);
  EXPECT_THAT(JobWarnings(ssp, 3), SizeIs(1));
  ssp.mutable_consistency()->set_ssp_bound(0);  // Lockstep: no asynchrony.
  EXPECT_THAT(JobWarnings(ssp, 3), IsEmpty());
  // Not a trap: SYNC, one worker, or no momentum.
  EXPECT_THAT(JobWarnings(Job(ConsistencyConfig::SYNC, OptimizerConfig::MOMENTUM), 8), IsEmpty());
  EXPECT_THAT(JobWarnings(Job(ConsistencyConfig::ASYNC, OptimizerConfig::MOMENTUM), 1),
              IsEmpty());
  EXPECT_THAT(JobWarnings(Job(ConsistencyConfig::ASYNC, OptimizerConfig::SGD), 2), IsEmpty());
}

TEST(JobWarningsTest, ManyAsyncWorkersAtAFixedRateAreATrapUnlessStalenessIsHandled) {
  EXPECT_THAT(JobWarnings(Job(ConsistencyConfig::ASYNC, OptimizerConfig::SGD), 8),
              ElementsAre(HasSubstr("each gradient is about 7 updates stale")));
  JobSpec inverse = Job(ConsistencyConfig::ASYNC, OptimizerConfig::SGD);
  inverse.mutable_consistency()->set_staleness_learning_rate(ConsistencyConfig::INVERSE);
  EXPECT_THAT(JobWarnings(inverse, 8), IsEmpty());
  JobSpec bounded = Job(ConsistencyConfig::ASYNC, OptimizerConfig::SGD);
  bounded.mutable_consistency()->set_max_staleness(2);
  EXPECT_THAT(JobWarnings(bounded, 8), IsEmpty());
  EXPECT_THAT(JobWarnings(Job(ConsistencyConfig::ASYNC, OptimizerConfig::SGD), 3), IsEmpty());
}

TEST(JobWarningsTest, RingCheckpointsWithAnOptimizersStateSayItIsNotKept) {
  JobSpec spec = Job(ConsistencyConfig::ALLREDUCE, OptimizerConfig::ADAM);
  EXPECT_THAT(JobWarnings(spec, 2), IsEmpty());  // No checkpoints.
  spec.mutable_checkpoint()->set_every_steps(10);
  EXPECT_THAT(JobWarnings(spec, 2),
              ElementsAre(HasSubstr("ALLREDUCE checkpoints hold the chief's weights but not the "
                                    "state of its ADAM optimizer")));
  spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  EXPECT_THAT(JobWarnings(spec, 2), IsEmpty());
}

}  // namespace
}  // namespace ps
