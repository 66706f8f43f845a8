#include "server/job_traffic.h"

#include <string>
#include <thread>
#include <vector>

#include <grpcpp/support/status.h>
#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(JobTrafficTest, CountsCallsByMethodAndCodeAndAddsBytes) {
  JobTraffic traffic;
  traffic.Count(JobMethod::kPull, grpc::StatusCode::OK, 100, 4000);
  traffic.Count(JobMethod::kPull, grpc::StatusCode::OK, 100, 4000);
  traffic.Count(JobMethod::kPush, grpc::StatusCode::INVALID_ARGUMENT, 4100, 20);
  traffic.Count(JobMethod::kPushPull, grpc::StatusCode::DEADLINE_EXCEEDED, 4100, 0);

  EXPECT_EQ(traffic.calls(JobMethod::kPull, grpc::StatusCode::OK), 2);
  EXPECT_EQ(traffic.calls(JobMethod::kPush, grpc::StatusCode::INVALID_ARGUMENT), 1);
  EXPECT_EQ(traffic.calls(JobMethod::kPushPull, grpc::StatusCode::DEADLINE_EXCEEDED), 1);
  EXPECT_EQ(traffic.calls(JobMethod::kPush, grpc::StatusCode::OK), 0);
  EXPECT_EQ(traffic.calls(JobMethod::kPull, grpc::StatusCode::INVALID_ARGUMENT), 0);
  EXPECT_EQ(traffic.bytes_received(), 100 + 100 + 4100 + 4100);
  EXPECT_EQ(traffic.bytes_sent(), 4000 + 4000 + 20);
}

TEST(JobTrafficTest, CountsACodeOutsideTheKnownRangeAsUnknown) {
  JobTraffic traffic;
  traffic.Count(JobMethod::kPush, static_cast<grpc::StatusCode>(JobTraffic::kNumCodes), 1, 2);
  traffic.Count(JobMethod::kPush, static_cast<grpc::StatusCode>(-3), 1, 2);
  EXPECT_EQ(traffic.calls(JobMethod::kPush, grpc::StatusCode::UNKNOWN), 2);
  EXPECT_EQ(traffic.bytes_received(), 2);
  EXPECT_EQ(traffic.bytes_sent(), 4);
}

TEST(JobTrafficTest, CountsFromManyThreadsWithoutLosingAny) {
  JobTraffic traffic;
  constexpr int kThreads = 4;
  constexpr int kCallsEach = 10000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&traffic, t] {
      const JobMethod method = kJobMethods[t % 3];
      for (int i = 0; i < kCallsEach; ++i) traffic.Count(method, grpc::StatusCode::OK, 3, 5);
    });
  }
  for (std::thread& thread : threads) thread.join();
  int64_t calls = 0;
  for (JobMethod method : kJobMethods) calls += traffic.calls(method, grpc::StatusCode::OK);
  EXPECT_EQ(calls, kThreads * kCallsEach);
  EXPECT_EQ(traffic.bytes_received(), 3 * kThreads * kCallsEach);
  EXPECT_EQ(traffic.bytes_sent(), 5 * kThreads * kCallsEach);
}

TEST(JobTrafficTest, NamesEachMethodAsTheServiceDoes) {
  EXPECT_EQ(std::string(JobMethodName(JobMethod::kPull)), "Pull");
  EXPECT_EQ(std::string(JobMethodName(JobMethod::kPush)), "Push");
  EXPECT_EQ(std::string(JobMethodName(JobMethod::kPushPull)), "PushPull");
}

}  // namespace
}  // namespace ps
