#include "common/client/bulk_links.h"

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "common/net/bulk_frame.h"

namespace ps {
namespace {

// A link reading one end of a socket pair; the test writes frames as the ps would on the other.
class BulkLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int ends[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
    link_ = std::make_unique<BulkLink>(ends[0], 7);
    ps_ = ends[1];
  }
  void TearDown() override {
    link_.reset();
    close(ps_);
  }
  void Send(uint64_t frame, const std::vector<float>& values) {
    ASSERT_TRUE(SendBulkFrame(ps_, frame, {absl::MakeConstSpan(values)}).ok());
  }

  std::unique_ptr<BulkLink> link_;
  int ps_ = -1;
};

TEST_F(BulkLinkTest, AFrameComesIntoItsDestinationsInOrder) {
  std::vector<float> first(3), second(2);
  const uint64_t frame = link_->Expect({absl::MakeSpan(first), absl::MakeSpan(second)});
  Send(frame, {1, 2, 3, 4, 5});
  ASSERT_TRUE(link_->Await(frame, absl::Now() + absl::Seconds(5)).ok());
  EXPECT_EQ(first, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(second, (std::vector<float>{4, 5}));
  EXPECT_FALSE(link_->expecting());
  EXPECT_FALSE(link_->broken());
}

TEST_F(BulkLinkTest, AFrameForgottenIsReadPastAndTheNextComes) {
  std::vector<float> dropped(2, -1.0f), kept(2);
  const uint64_t old = link_->Expect({absl::MakeSpan(dropped)});
  link_->Forget(old);
  const uint64_t next = link_->Expect({absl::MakeSpan(kept)});
  Send(old, {8, 9});
  Send(next, {6, 7});
  ASSERT_TRUE(link_->Await(next, absl::Now() + absl::Seconds(5)).ok());
  EXPECT_EQ(dropped, (std::vector<float>{-1, -1})) << "a frame given up never lands";
  EXPECT_EQ(kept, (std::vector<float>{6, 7}));
}

TEST_F(BulkLinkTest, ALateFrameIsUnavailableAndBreaksTheStream) {
  std::vector<float> values(4);
  const uint64_t frame = link_->Expect({absl::MakeSpan(values)});
  EXPECT_EQ(link_->Await(frame, absl::Now() + absl::Milliseconds(50)).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(link_->broken());
  EXPECT_FALSE(link_->expecting());
}

TEST_F(BulkLinkTest, AFrameOfAnotherSizeBreaksTheStream) {
  std::vector<float> values(4);
  const uint64_t frame = link_->Expect({absl::MakeSpan(values)});
  Send(frame, {1, 2, 3});
  EXPECT_EQ(link_->Await(frame, absl::Now() + absl::Seconds(5)).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(link_->broken());
}

}  // namespace
}  // namespace ps
