#include "server/io_thread.h"

#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"

namespace ps {
namespace {

TEST(IoThreadTest, RunsWorkInOrderAndAllOfItBeforeItEnds) {
  std::vector<int> order;
  {
    IoThread thread;
    absl::Notification release;
    thread.Schedule([&release] { release.WaitForNotification(); });
    for (int i = 0; i < 5; ++i) thread.Schedule([&order, i] { order.push_back(i); });
    EXPECT_EQ(thread.pending(), 6);
    release.Notify();
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace ps
