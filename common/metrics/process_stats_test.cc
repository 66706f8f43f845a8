#include "common/metrics/process_stats.h"

#include <gtest/gtest.h>

#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"

namespace ps {
namespace {

TEST(ProcessStatsTest, ReadsThisProcess) {
  // Burn some CPU and hold some memory so that both are visibly above zero.
  std::vector<char> held(64 << 20, 1);
  volatile double sink = 0;
  const ProcessStats before = ReadProcessStats();
  for (int i = 0; i < 20000000; ++i) sink = sink + i * 1e-9;
  // `other` lives until the reading is done (a thread that had already ended would not count).
  absl::Notification read;
  std::thread other([&read] { read.WaitForNotification(); });
  const ProcessStats after = ReadProcessStats();
  read.Notify();
  other.join();
  EXPECT_GT(after.cpu_seconds, before.cpu_seconds);
  EXPECT_GE(after.resident_bytes, int64_t{64} << 20);
  EXPECT_GE(after.threads, 2);  // This one and `other`.
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(after.start_time_seconds, now + 1);
  EXPECT_GT(after.start_time_seconds, now - 3600);  // The test started within the hour.
  EXPECT_EQ(held[12345], 1);
}

TEST(ProcessStatsTest, WritesPrometheusFamilies) {
  MetricsWriter writer;
  WriteProcessMetrics(&writer);
  for (const char* family :
       {"process_cpu_seconds_total counter", "process_resident_memory_bytes gauge",
        "process_threads gauge", "process_start_time_seconds gauge"}) {
    EXPECT_NE(writer.text().find(std::string("# TYPE ") + family), std::string::npos) << family;
  }
}

}  // namespace
}  // namespace ps
