#include "common/net/grpc_deadline.h"

#include <chrono>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(GrpcDeadlineTest, IsTheTimeoutFromNow) {
  const auto before = std::chrono::system_clock::now();
  const auto deadline = GrpcDeadline(absl::Seconds(5));
  const auto after = std::chrono::system_clock::now();
  EXPECT_GE(deadline, before + std::chrono::seconds(5));
  EXPECT_LE(deadline, after + std::chrono::seconds(5));
}

TEST(GrpcDeadlineTest, AnInfiniteTimeoutNeverPasses) {
  EXPECT_EQ(GrpcDeadline(absl::InfiniteDuration()), std::chrono::system_clock::time_point::max());
}

}  // namespace
}  // namespace ps
