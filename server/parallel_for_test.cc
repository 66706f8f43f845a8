#include "server/parallel_for.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(ParallelForTest, CoversEveryIndexExactlyOnce) {
  for (int64_t n : {0, 1, 15, 16, 17, 1000, 100003}) {
    for (int64_t grain : {1, 16, 1000, 1 << 20}) {
      std::vector<std::atomic<int>> visits(n);
      for (auto& v : visits) v = 0;
      ParallelFor(n, grain, [&visits](int64_t begin, int64_t end) {
        ASSERT_LT(begin, end);
        for (int64_t i = begin; i < end; ++i) ++visits[i];
      });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(visits[i], 1) << "n " << n << " grain " << grain << " index " << i;
      }
    }
  }
}

TEST(ParallelForTest, SmallLoopsStayOnTheCallingThread) {
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  ParallelFor(100, 1000, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 100);
  });
  EXPECT_EQ(calls, 1);
}

TEST(ParallelForTest, ConcurrentCallersEachGetTheirWholeRange) {
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&total] {
      for (int round = 0; round < 50; ++round) {
        ParallelFor(4096, 16, [&total](int64_t begin, int64_t end) { total += end - begin; });
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(total, 4 * 50 * 4096);
}

}  // namespace
}  // namespace ps
