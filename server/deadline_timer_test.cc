#include "server/deadline_timer.h"

#include <atomic>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/testing/simulated_clock.h"

namespace ps {
namespace {

TEST(DeadlineTimerTest, RunsCallbacksInDeadlineOrder) {
  DeadlineTimer timer;
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification done;
  // Deadlines far enough ahead that all three are scheduled before the first is due, even on
  // a loaded machine or under a sanitizer; scheduled latest first.
  const absl::Time first = absl::Now() + absl::Milliseconds(300);
  timer.Schedule(first + absl::Milliseconds(40), [&] {
    absl::MutexLock lock(&mu);
    order.push_back(3);
    done.Notify();
  });
  timer.Schedule(first + absl::Milliseconds(20), [&] {
    absl::MutexLock lock(&mu);
    order.push_back(2);
  });
  timer.Schedule(first, [&] {
    absl::MutexLock lock(&mu);
    order.push_back(1);
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_GE(absl::Now(), first + absl::Milliseconds(40));
}

TEST(DeadlineTimerTest, ACallbackScheduledOnAnIdleTimerRunsAtItsDeadline) {
  DeadlineTimer timer;
  absl::SleepFor(absl::Milliseconds(50));  // The timer's thread now waits with nothing pending.
  absl::Notification done;
  absl::Time start = absl::Now();
  timer.Schedule(start + absl::Milliseconds(20), [&] { done.Notify(); });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));

  // The same once it waits for a later deadline: an earlier one is not held up by it.
  absl::Notification early;
  timer.Schedule(absl::Now() + absl::Hours(1), [] {});
  absl::SleepFor(absl::Milliseconds(50));
  start = absl::Now();
  timer.Schedule(start + absl::Milliseconds(20), [&] { early.Notify(); });
  ASSERT_TRUE(early.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST(DeadlineTimerTest, CancelledCallbacksDoNotRun) {
  std::atomic<int> runs{0};
  absl::Notification later;
  {
    DeadlineTimer timer;
    uint64_t handle = timer.Schedule(absl::Now() + absl::Milliseconds(20), [&] { ++runs; });
    timer.Cancel(handle);
    timer.Schedule(absl::Now() + absl::Milliseconds(40), [&] { later.Notify(); });
    ASSERT_TRUE(later.WaitForNotificationWithTimeout(absl::Seconds(10)));
    timer.Schedule(absl::Now() + absl::Hours(1), [&] { ++runs; });  // Dropped by the destructor.
  }
  EXPECT_EQ(runs.load(), 0);
}

TEST(DeadlineTimerTest, CallbacksExpireWhenTheSimulatedClockReachesTheirDeadlines) {
  SimulatedClock clock;
  DeadlineTimerOptions options;
  options.clock = &clock;
  absl::Notification soon, later;
  DeadlineTimer timer(options);
  timer.Schedule(clock.Now() + absl::Hours(1), [&] { later.Notify(); });
  timer.Schedule(clock.Now() + absl::Seconds(10), [&] { soon.Notify(); });

  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(soon.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(soon.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_FALSE(later.HasBeenNotified());

  clock.Advance(absl::Hours(1));
  ASSERT_TRUE(later.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // A deadline the clock has passed already runs at once.
  absl::Notification past;
  timer.Schedule(clock.Now() - absl::Seconds(1), [&] { past.Notify(); });
  EXPECT_TRUE(past.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

}  // namespace
}  // namespace ps
