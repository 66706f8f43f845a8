#include "common/clock.h"

#include <gtest/gtest.h>

#include "absl/time/clock.h"

namespace ps {
namespace {

TEST(RealClockTest, FollowsTheMachinesClock) {
  Clock* clock = Clock::Real();
  absl::Time before = absl::Now();
  clock->SleepFor(absl::Milliseconds(5));
  EXPECT_GE(clock->Now(), before + absl::Milliseconds(5));
}

TEST(RealClockTest, AwaitEndsAtTheDeadlineOrWhenTheConditionHolds) {
  Clock* clock = Clock::Real();
  absl::Mutex mu;
  bool ready = false;
  absl::MutexLock lock(&mu);
  absl::Time deadline = clock->Now() + absl::Milliseconds(5);
  EXPECT_FALSE(clock->AwaitWithDeadline(&mu, absl::Condition(&ready), deadline));
  EXPECT_GE(clock->Now(), deadline);
  ready = true;
  EXPECT_TRUE(clock->AwaitWithDeadline(&mu, absl::Condition(&ready), absl::InfiniteFuture()));
}

}  // namespace
}  // namespace ps
