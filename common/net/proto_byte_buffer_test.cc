#include "common/net/proto_byte_buffer.h"

#include <gtest/gtest.h>

#include "proto/ps_service.pb.h"

namespace ps {
namespace {

TEST(ProtoByteBufferTest, RoundTrip) {
  PullRequest request;
  request.set_job_id("job");
  request.set_worker(3);
  request.set_step(7);
  PullRequest parsed;
  ASSERT_TRUE(ParseFromByteBuffer(SerializeToByteBuffer(request), &parsed).ok());
  EXPECT_EQ(parsed.job_id(), "job");
  EXPECT_EQ(parsed.worker(), 3);
  EXPECT_EQ(parsed.step(), 7);
}

TEST(ProtoByteBufferTest, GarbageIsInvalidArgument) {
  std::string garbage = "\xff\xff\xff\xff";
  grpc::Slice slice(garbage);
  grpc::ByteBuffer buffer(&slice, 1);
  PullRequest parsed;
  absl::Status status = ParseFromByteBuffer(buffer, &parsed);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("ps.PullRequest"), absl::string_view::npos);
}

}  // namespace
}  // namespace ps
