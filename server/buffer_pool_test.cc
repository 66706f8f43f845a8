#include "server/buffer_pool.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(BufferPoolTest, ReusesReleasedBuffers) {
  std::shared_ptr<BufferPool> pool = BufferPool::Create(2);
  const float* first_data;
  {
    std::shared_ptr<std::vector<float>> buffer = pool->Acquire(1000);
    ASSERT_EQ(buffer->size(), 1000u);
    first_data = buffer->data();
  }
  std::shared_ptr<std::vector<float>> again = pool->Acquire(500);
  EXPECT_EQ(again->size(), 500u);
  EXPECT_EQ(again->data(), first_data);
}

TEST(BufferPoolTest, BuffersOutliveThePool) {
  std::shared_ptr<BufferPool> pool = BufferPool::Create();
  std::shared_ptr<std::vector<float>> buffer = pool->Acquire(10);
  pool.reset();
  (*buffer)[9] = 1.0f;  // Still valid; freed when `buffer` goes (checked by asan).
}

}  // namespace
}  // namespace ps
