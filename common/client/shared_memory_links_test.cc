#include "common/client/shared_memory_links.h"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "common/net/proto_byte_buffer.h"

namespace ps {
namespace {

TEST(SharedMemoryLinksTest, GatherAndScatterLayTensorsOneAfterAnother) {
  std::vector<float> a = {1, 2}, b = {3, 4, 5};
  std::vector<float> region(6, -1.0f);
  const std::vector<absl::Span<const float>> tensors = {a, b};
  SharedMemoryLinks::Gather(tensors, absl::MakeSpan(region));
  EXPECT_EQ(region, (std::vector<float>{1, 2, 3, 4, 5, -1}));
  std::vector<float> x(3), y(2);
  const std::vector<absl::Span<float>> destinations = {absl::MakeSpan(x), absl::MakeSpan(y)};
  SharedMemoryLinks::Scatter(region, destinations);
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(y, (std::vector<float>{4, 5}));
}

class SharedMemoryLinksOpenTest : public testing::Test {
 protected:
  void SetUp() override {
    PsClientOptions options;
    options.ps_addresses = {"127.0.0.1:1"};  // Nothing listens: opening fails for now.
    options.max_attempts = 1;
    options.call_timeout = absl::Seconds(2);
    absl::StatusOr<std::unique_ptr<PsConnections>> connections = PsConnections::Create(options);
    ASSERT_TRUE(connections.ok()) << connections.status();
    connections_ = *std::move(connections);
  }
  std::unique_ptr<PsConnections> connections_;
};

TEST_F(SharedMemoryLinksOpenTest, AShardWithoutValuesOrAnUnreachablePsHasNoLink) {
  SharedMemoryLinks none(connections_.get(), OpenSharedMemoryRequest(), {0});
  EXPECT_EQ(none.For(0), nullptr);
  SharedMemoryLinks unreachable(connections_.get(), OpenSharedMemoryRequest(), {16});
  EXPECT_EQ(unreachable.For(0), nullptr);  // Worth another try later: not refused for good.
  EXPECT_EQ(unreachable.For(0), nullptr);
}

TEST_F(SharedMemoryLinksOpenTest, ARetryGoesInTheRequests) {
  SharedMemoryLinks links(connections_.get(), OpenSharedMemoryRequest(), {16});
  PullRequest through_memory;
  through_memory.set_shared_memory(7);
  int in_requests = 0;
  std::function<grpc::ByteBuffer()> make = links.FirstThroughMemory(
      0, SerializeToByteBuffer(through_memory), [&in_requests] {
        ++in_requests;
        return SerializeToByteBuffer(PullRequest());
      });
  PullRequest first, second;
  ASSERT_TRUE(ParseFromByteBuffer(make(), &first).ok());
  ASSERT_TRUE(ParseFromByteBuffer(make(), &second).ok());
  EXPECT_EQ(first.shared_memory(), 7u);
  EXPECT_EQ(second.shared_memory(), 0u);
  EXPECT_EQ(in_requests, 1);
  links.DropStale();  // Nothing was open; dropping the stale link changes nothing else.
  EXPECT_EQ(links.For(0), nullptr);
}

}  // namespace
}  // namespace ps
