#include "worker/background_task.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace ps {
namespace {

TEST(BackgroundTaskTest, WaitWithoutATaskIsOk) {
  BackgroundTask task;
  EXPECT_FALSE(task.busy());
  EXPECT_TRUE(task.Wait().ok());
}

// The task runs on another thread while Start's caller goes on: it waits for a notification
// that the caller gives only after Start has returned.
TEST(BackgroundTaskTest, RunsOnItsOwnThreadWhileTheCallerGoesOn) {
  BackgroundTask task;
  absl::Notification go;
  std::thread::id ran_on;
  task.Start([&] {
    go.WaitForNotification();
    ran_on = std::this_thread::get_id();
    return absl::OkStatus();
  });
  EXPECT_TRUE(task.busy());
  go.Notify();
  EXPECT_TRUE(task.Wait().ok());
  EXPECT_FALSE(task.busy());
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(BackgroundTaskTest, WaitReturnsEachTasksStatusInTurn) {
  BackgroundTask task;
  task.Start([] { return absl::UnavailableError("ps 1 is down"); });
  absl::Status first = task.Wait();
  EXPECT_EQ(first.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(first.message(), "ps 1 is down");
  int runs = 0;
  for (int i = 0; i < 100; ++i) {
    task.Start([&runs] {
      ++runs;  // Ordered by Start and Wait: one task at a time.
      return absl::OkStatus();
    });
    EXPECT_TRUE(task.Wait().ok());
  }
  EXPECT_EQ(runs, 100);
}

TEST(BackgroundTaskTest, DestructorWaitsForTheTaskInFlight) {
  std::atomic<bool> finished{false};
  {
    BackgroundTask task;
    task.Start([&finished] {
      absl::SleepFor(absl::Milliseconds(50));
      finished = true;
      return absl::OkStatus();
    });
  }
  EXPECT_TRUE(finished);
}

}  // namespace
}  // namespace ps
