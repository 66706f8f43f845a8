#include "common/process/daemon.h"

#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "common/testing/fault_injecting_file_system.h"

namespace ps {
namespace {

TEST(DaemonTest, WritesThePortFile) {
  std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/port";
  ASSERT_TRUE(WritePortFile(path, 4321).ok());
  int port = 0;
  std::ifstream(path) >> port;
  EXPECT_EQ(port, 4321);
  EXPECT_FALSE(WritePortFile("/nonexistent/dir/port", 1).ok());
}

TEST(DaemonTest, AFullDiskLeavesNoPortFileAndSaysWhich) {
  std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/full/port";
  FaultInjectingFileSystem fs;
  ASSERT_TRUE(fs.CreateDirectories(std::string(std::getenv("TEST_TMPDIR")) + "/full").ok());
  fs.FailWrites("/full/port");
  absl::Status status = WritePortFile(path, 4321, &fs);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("cannot write the port file"), std::string::npos) << status;
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
  EXPECT_FALSE(std::ifstream(path).good());
}

// A thread started before BlockStopSignals (as OpenBLAS starts its pool when the library loads)
// does not block the stop signals; one delivered there must reach WaitForStopSignal, not end
// the process.
TEST(DaemonTest, AStopSignalToAThreadStartedEarlierReachesTheWaiter) {
  absl::Notification done;
  std::thread early([&done] { done.WaitForNotification(); });
  BlockStopSignals();
  pthread_kill(early.native_handle(), SIGTERM);
  EXPECT_EQ(WaitForStopSignal(), SIGTERM);
  done.Notify();
  early.join();
}

}  // namespace
}  // namespace ps
