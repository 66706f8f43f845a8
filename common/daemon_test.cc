#include "common/daemon.h"

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ps
