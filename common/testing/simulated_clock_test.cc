#include "common/testing/simulated_clock.h"

#include <thread>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"

namespace ps {
namespace {

TEST(SimulatedClockTest, TimeMovesOnlyWhenAdvancedOrSleptThrough) {
  SimulatedClock clock;
  const absl::Time start = clock.Now();
  EXPECT_EQ(clock.Now(), start);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.Now(), start + absl::Seconds(3));
  clock.SleepFor(absl::Hours(2));  // Returns at once.
  EXPECT_EQ(clock.Now(), start + absl::Seconds(3) + absl::Hours(2));
}

TEST(SimulatedClockTest, AnAwaitEndsWhenAnotherThreadAdvancesPastItsDeadline) {
  SimulatedClock clock;
  absl::Mutex mu;
  bool ready = false;
  absl::Notification waiting, returned;
  bool result = true;
  const absl::Time deadline = clock.Now() + absl::Hours(1);
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    waiting.Notify();
    result = clock.AwaitWithDeadline(&mu, absl::Condition(&ready), deadline);
    returned.Notify();
  });
  waiting.WaitForNotification();
  clock.Advance(absl::Minutes(59));
  EXPECT_FALSE(returned.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  clock.Advance(absl::Minutes(1));
  EXPECT_TRUE(returned.WaitForNotificationWithTimeout(absl::Seconds(30)));
  waiter.join();
  EXPECT_FALSE(result);
}

TEST(SimulatedClockTest, AnAwaitEndsWhenItsConditionHoldsBeforeTheDeadline) {
  SimulatedClock clock;
  absl::Mutex mu;
  bool ready = false;
  bool result = false;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    result = clock.AwaitWithDeadline(&mu, absl::Condition(&ready), absl::InfiniteFuture());
  });
  {
    absl::MutexLock lock(&mu);
    ready = true;
  }
  waiter.join();
  EXPECT_TRUE(result);
}

}  // namespace
}  // namespace ps
