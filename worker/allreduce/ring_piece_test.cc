#include "worker/allreduce/ring_piece.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/net/proto_byte_buffer.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

RingPieceHeader Header() {
  RingPieceHeader header;
  header.set_job_id("job");
  header.set_run_id("run-1");
  header.set_tag(77);
  header.set_from_worker(2);
  return header;
}

TEST(RingPieceTest, EncodesWhatTheGeneratedMessageSerializes) {
  const std::vector<float> data = {1.5f, -2.0f, 3.25f};
  grpc::ByteBuffer encoded = EncodeRingPiece(Header(), data);
  RingPiece parsed;
  ASSERT_TRUE(ParseFromByteBuffer(encoded, &parsed).ok());
  EXPECT_EQ(parsed.header().tag(), 77u);
  EXPECT_EQ(parsed.header().num_floats(), 3);
  EXPECT_EQ(parsed.data(), std::string(reinterpret_cast<const char*>(data.data()), 12));

  RingPiece generated = parsed;
  std::vector<float> out(3);
  ASSERT_TRUE(DecodeRingPiece(SerializeToByteBuffer(generated), absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(1.5f, -2.0f, 3.25f));
}

TEST(RingPieceTest, PeeksTheHeaderAlone) {
  const std::vector<float> data(1000, 1.0f);
  absl::StatusOr<RingPieceHeader> header = PeekRingPieceHeader(EncodeRingPiece(Header(), data));
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->job_id(), "job");
  EXPECT_EQ(header->run_id(), "run-1");
  EXPECT_EQ(header->from_worker(), 2);
  EXPECT_EQ(header->num_floats(), 1000);
}

TEST(RingPieceTest, AnEmptyPieceRoundTrips) {
  grpc::ByteBuffer encoded = EncodeRingPiece(Header(), {});
  EXPECT_TRUE(PeekRingPieceHeader(encoded).ok());
  EXPECT_TRUE(DecodeRingPiece(encoded, {}).ok());
}

TEST(RingPieceTest, AnotherLengthIsRefusedSayingBoth) {
  const std::vector<float> data = {1, 2, 3};
  std::vector<float> out(4);
  absl::Status status = DecodeRingPiece(EncodeRingPiece(Header(), data), absl::MakeSpan(out));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("ring message 77 from worker:2 has 3 floats where 4"));
}

TEST(RingPieceTest, MalformedBytesAreRefused) {
  grpc::Slice junk(std::string("\xff\xff\xff"));
  grpc::ByteBuffer buffer(&junk, 1);
  EXPECT_TRUE(absl::IsInvalidArgument(PeekRingPieceHeader(buffer).status()));
}

}  // namespace
}  // namespace ps
