#include "common/tensor/tensor_coding.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <grpcpp/support/slice.h>

#include "absl/strings/escaping.h"
#include "common/tensor/float16.h"
#include "proto/ps_service.pb.h"

namespace ps {
namespace {

using google::protobuf::MessageLite;

// Tensors of these sizes, one header slice (row_count = size) each.
const std::vector<size_t> kSizes = {3, 0, 1 << 20, 7, 1};

std::vector<std::vector<float>> MakeTensors(const std::vector<size_t>& sizes) {
  std::vector<std::vector<float>> tensors;
  for (size_t t = 0; t < sizes.size(); ++t) {
    std::vector<float> tensor(sizes[t]);
    for (size_t i = 0; i < tensor.size(); ++i) tensor[i] = 0.25f * i - 3.0f * t;
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

std::vector<absl::Span<const float>> Spans(const std::vector<std::vector<float>>& tensors) {
  return std::vector<absl::Span<const float>>(tensors.begin(), tensors.end());
}

PushRequestHeader MakeHeader(const std::vector<size_t>& sizes) {
  PushRequestHeader header;
  header.set_job_id("job-7");
  header.set_worker(3);
  header.set_push_id(42);
  header.set_read_version(9);
  header.set_step(-1);
  for (size_t t = 0; t < sizes.size(); ++t) {
    SliceRef* slice = header.add_slices();
    slice->set_variable("var" + std::to_string(t));
    slice->set_row_begin(10);
    slice->set_row_count(sizes[t]);
  }
  return header;
}

std::string Concatenate(const std::vector<std::vector<float>>& tensors) {
  std::string bytes;
  for (const std::vector<float>& tensor : tensors) {
    bytes.append(reinterpret_cast<const char*>(tensor.data()), tensor.size() * sizeof(float));
  }
  return bytes;
}

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

// A buffer of `bytes` cut into slices of `chunk` bytes (copied).
grpc::ByteBuffer ToByteBuffer(const std::string& bytes, size_t chunk = SIZE_MAX) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    slices.emplace_back(bytes.data() + at, std::min(chunk, bytes.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Decodes a push into `header` and one tensor per header slice, sized by its row_count.
// The data's encoding is the header's.
absl::Status DecodePush(const grpc::ByteBuffer& buffer, PushRequestHeader* header,
                        std::vector<std::vector<float>>* tensors, bool* all_finite = nullptr) {
  return DecodeTensorMessage(
      buffer, header,
      [tensors](const MessageLite& decoded) -> absl::StatusOr<std::vector<absl::Span<float>>> {
        const auto& push = static_cast<const PushRequestHeader&>(decoded);
        tensors->assign(push.slices_size(), {});
        std::vector<absl::Span<float>> spans;
        for (int i = 0; i < push.slices_size(); ++i) {
          (*tensors)[i].resize(push.slices(i).row_count());
          spans.push_back(absl::MakeSpan((*tensors)[i]));
        }
        return spans;
      },
      all_finite,
      [](const MessageLite& decoded) {
        return static_cast<const PushRequestHeader&>(decoded).encoding();
      });
}

// Destinations of fixed sizes that must never be asked for.
TensorDestinations Unreachable() {
  return [](const MessageLite&) -> absl::StatusOr<std::vector<absl::Span<float>>> {
    ADD_FAILURE() << "destinations asked for";
    return std::vector<absl::Span<float>>();
  };
}

TEST(TensorCodingTest, RoundTrip) {
  const std::vector<std::vector<float>> tensors = MakeTensors(kSizes);
  const PushRequestHeader header = MakeHeader(kSizes);
  for (bool with_keep_alive : {false, true}) {
    std::shared_ptr<const void> keep_alive;
    if (with_keep_alive) keep_alive = std::make_shared<int>(0);
    grpc::ByteBuffer buffer = EncodeTensorMessage(header, Spans(tensors), keep_alive);
    PushRequestHeader decoded;
    std::vector<std::vector<float>> received;
    ASSERT_TRUE(DecodePush(buffer, &decoded, &received).ok());
    EXPECT_EQ(decoded.SerializeAsString(), header.SerializeAsString());
    EXPECT_EQ(received, tensors);
  }
}

TEST(TensorCodingTest, RoundTripWithoutTensors) {
  PullResponseHeader header;
  header.set_version(5);
  grpc::ByteBuffer buffer = EncodeTensorMessage(header, {}, nullptr);
  PullResponseHeader decoded;
  int calls = 0;
  absl::Status status = DecodeTensorMessage(
      buffer, &decoded,
      [&calls](const MessageLite&) -> absl::StatusOr<std::vector<absl::Span<float>>> {
        ++calls;
        return std::vector<absl::Span<float>>();
      });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(decoded.version(), 5);
}

TEST(TensorCodingTest, GeneratedParserReadsOurEncoding) {
  const std::vector<std::vector<float>> tensors = MakeTensors(kSizes);
  const PushRequestHeader header = MakeHeader(kSizes);
  PushRequest parsed;
  ASSERT_TRUE(
      parsed.ParseFromString(ToString(EncodeTensorMessage(header, Spans(tensors), nullptr))));
  EXPECT_EQ(parsed.header().SerializeAsString(), header.SerializeAsString());
  EXPECT_EQ(parsed.data(), Concatenate(tensors));
}

TEST(TensorCodingTest, DecodesGeneratedEncoding) {
  const std::vector<std::vector<float>> tensors = MakeTensors(kSizes);
  PushRequest request;
  *request.mutable_header() = MakeHeader(kSizes);
  request.set_data(Concatenate(tensors));
  const std::string bytes = request.SerializeAsString();
  for (size_t chunk : {size_t{7}, size_t{4096}, bytes.size()}) {
    PushRequestHeader decoded;
    std::vector<std::vector<float>> received;
    absl::Status status = DecodePush(ToByteBuffer(bytes, chunk), &decoded, &received);
    ASSERT_TRUE(status.ok()) << "chunk " << chunk << ": " << status;
    EXPECT_EQ(decoded.SerializeAsString(), request.header().SerializeAsString());
    EXPECT_EQ(received, tensors);
  }
}

TEST(TensorCodingTest, DecodesDataBeforeHeaderAndSkipsUnknownFields) {
  const std::vector<size_t> sizes = {2, 5};
  const std::vector<std::vector<float>> tensors = MakeTensors(sizes);
  PushRequest data_only;
  data_only.set_data(Concatenate(tensors));
  PushRequest header_only;
  *header_only.mutable_header() = MakeHeader(sizes);
  // Unknown fields 9 (varint) and 10 (bytes), and field 1 as a varint, which is unknown too.
  const std::string unknown("\x48\x05\x52\x02" "ab" "\x08\x01", 8);
  const std::string bytes =
      data_only.SerializeAsString() + unknown + header_only.SerializeAsString();
  PushRequestHeader decoded;
  std::vector<std::vector<float>> received;
  absl::Status status = DecodePush(ToByteBuffer(bytes, 3), &decoded, &received);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(decoded.SerializeAsString(), header_only.header().SerializeAsString());
  EXPECT_EQ(received, tensors);
}

TEST(TensorCodingTest, ChecksFinitenessWhileCopying) {
  const std::vector<size_t> sizes = {3, 0, 300, 7};
  const PushRequestHeader header = MakeHeader(sizes);
  const float kBad[] = {std::numeric_limits<float>::quiet_NaN(),
                        -std::numeric_limits<float>::infinity()};
  // Every position of a bad value, with the message cut into slices of 5 bytes (floats split
  // across slices), 4096 bytes, or one slice; data after the header, and before it (staged).
  for (size_t chunk : {size_t{5}, size_t{4096}, SIZE_MAX}) {
    for (bool data_first : {false, true}) {
      for (int bad_at = -1; bad_at < 310; ++bad_at) {
        std::vector<std::vector<float>> tensors = MakeTensors(sizes);
        if (bad_at >= 0) {
          int at = bad_at;
          for (std::vector<float>& tensor : tensors) {
            if (at < static_cast<int>(tensor.size())) {
              tensor[at] = kBad[bad_at % 2];
              break;
            }
            at -= static_cast<int>(tensor.size());
          }
        }
        std::string bytes;
        if (data_first) {
          PushRequest data_only;
          data_only.set_data(Concatenate(tensors));
          PushRequest header_only;
          *header_only.mutable_header() = header;
          bytes = data_only.SerializeAsString() + header_only.SerializeAsString();
        } else {
          bytes = ToString(EncodeTensorMessage(header, Spans(tensors), nullptr));
        }
        PushRequestHeader decoded;
        std::vector<std::vector<float>> received;
        bool all_finite = bad_at >= 0;  // The opposite of the answer expected.
        absl::Status status = DecodePush(ToByteBuffer(bytes, chunk), &decoded, &received,
                                         &all_finite);
        ASSERT_TRUE(status.ok()) << status;
        EXPECT_EQ(all_finite, bad_at < 0)
            << "bad value at " << bad_at << ", slices of " << chunk << ", data first "
            << data_first;
        // The copy is the same whether or not it is checked (NaN != NaN: compare bits).
        EXPECT_EQ(Concatenate(received), Concatenate(tensors));
      }
    }
  }
}

TEST(TensorCodingTest, TensorSlicesPointAtTensorMemory) {
  const std::vector<std::vector<float>> tensors = MakeTensors(kSizes);
  for (bool with_keep_alive : {false, true}) {
    std::shared_ptr<const void> keep_alive;
    if (with_keep_alive) keep_alive = std::make_shared<int>(0);
    grpc::ByteBuffer buffer = EncodeTensorMessage(MakeHeader(kSizes), Spans(tensors), keep_alive);
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(buffer.Dump(&slices).ok());
    size_t slice = 1;  // Slice 0 holds the header and tags.
    for (const std::vector<float>& tensor : tensors) {
      if (tensor.empty()) continue;
      ASSERT_LT(slice, slices.size());
      EXPECT_EQ(slices[slice].begin(), reinterpret_cast<const uint8_t*>(tensor.data()));
      EXPECT_EQ(slices[slice].size(), tensor.size() * sizeof(float));
      ++slice;
    }
    EXPECT_EQ(slice, slices.size());
  }
}

TEST(TensorCodingTest, KeepAliveReleasedWithTheLastBuffer) {
  bool released = false;
  std::vector<float> values = {1, 2, 3};
  auto keep_alive = std::shared_ptr<const void>(values.data(), [&released](const void*) {
    released = true;
  });
  std::optional<grpc::ByteBuffer> buffer =
      EncodeTensorMessage(MakeHeader({3, 3}), {values, values}, keep_alive);
  keep_alive.reset();
  EXPECT_FALSE(released);
  std::optional<grpc::ByteBuffer> copy = *buffer;
  buffer.reset();
  EXPECT_FALSE(released);
  copy.reset();
  EXPECT_TRUE(released);
}

TEST(TensorCodingTest, RejectsTruncatedMessages) {
  PushRequest request;
  *request.mutable_header() = MakeHeader({4});
  request.set_data(Concatenate(MakeTensors({4})));
  const std::string bytes = request.SerializeAsString();
  // Cut inside the data (destinations untouched), after its length, and inside the header.
  for (size_t cut : {size_t{1}, size_t{16}, bytes.size() - 20}) {
    PushRequestHeader decoded;
    absl::Status status =
        DecodeTensorMessage(ToByteBuffer(bytes.substr(0, bytes.size() - cut), 5), &decoded,
                            Unreachable());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << "cut " << cut;
  }
}

TEST(TensorCodingTest, RejectsDataThatIsNotWholeFloats) {
  PushRequest request;
  request.set_data(std::string(13, 'x'));
  PushRequestHeader decoded;
  absl::Status status =
      DecodeTensorMessage(ToByteBuffer(request.SerializeAsString()), &decoded, Unreachable());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("13 bytes"), absl::string_view::npos) << status;
}

TEST(TensorCodingTest, RejectsDataThatDoesNotMatchTheDestinations) {
  const std::vector<std::vector<float>> tensors = MakeTensors({3});
  PushRequestHeader header = MakeHeader({4});  // Says 4 floats; 3 are sent.
  PushRequestHeader decoded;
  std::vector<std::vector<float>> received;
  absl::Status status =
      DecodePush(EncodeTensorMessage(header, Spans(tensors), nullptr), &decoded, &received);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "tensor data is 12 bytes but the header describes 4 float32 values (16 bytes)");

  // A missing data field is zero floats.
  PushRequest header_only;
  *header_only.mutable_header() = header;
  status = DecodePush(ToByteBuffer(header_only.SerializeAsString()), &decoded, &received);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorCodingTest, PassesDestinationsErrorThrough) {
  const std::vector<std::vector<float>> tensors = MakeTensors({3});
  grpc::ByteBuffer buffer = EncodeTensorMessage(MakeHeader({3}), Spans(tensors), nullptr);
  PushRequestHeader decoded;
  absl::Status status = DecodeTensorMessage(
      buffer, &decoded, [](const MessageLite&) -> absl::StatusOr<std::vector<absl::Span<float>>> {
        return absl::NotFoundError("no such slice");
      });
  EXPECT_EQ(status, absl::NotFoundError("no such slice"));
}

TEST(TensorCodingTest, RejectsGarbage) {
  PushRequest data_only;
  data_only.set_data(std::string(8, '\0'));
  PushRequest header_only;
  *header_only.mutable_header() = MakeHeader({2});
  const std::vector<std::string> garbage = {
      std::string(1, '\0'),                      // Tag 0.
      std::string(11, '\xff'),                   // A varint that never ends.
      "\x0a\x05\x0a\x03" "ab",                   // Header shorter than its length.
      "\x0c",                                    // An end-group tag.
      "\x12\x80\x80\x80\x80\x08",                // Data length over 2 GiB.
      data_only.SerializeAsString() + data_only.SerializeAsString(),  // Two data fields.
      // Header fields on both sides of the data.
      header_only.SerializeAsString() + data_only.SerializeAsString() +
          header_only.SerializeAsString(),
  };
  for (const std::string& bytes : garbage) {
    PushRequestHeader decoded;
    std::vector<std::vector<float>> received;
    absl::Status status = DecodePush(ToByteBuffer(bytes), &decoded, &received);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << absl::CEscape(bytes) << ": " << status;
  }
  PushRequestHeader decoded;
  EXPECT_EQ(DecodeTensorMessage(grpc::ByteBuffer(), &decoded, Unreachable()).code(),
            absl::StatusCode::kInvalidArgument);
}

// `tensors` as they arrive in `encoding`.
std::vector<std::vector<float>> AsSent(std::vector<std::vector<float>> tensors,
                                       TensorEncoding encoding) {
  for (std::vector<float>& tensor : tensors) {
    for (float& value : tensor) {
      value = RoundTo(value, encoding);
    }
  }
  return tensors;
}

TEST(TensorCodingEncodingTest, SixteenBitValuesRoundTripAtHalfTheBytes) {
  std::vector<std::vector<float>> tensors = MakeTensors(kSizes);
  tensors[0] = {1.0f / 3.0f, -70000.0f, 1e-9f};  // Rounded; beyond half's range; below it.
  for (TensorEncoding encoding : {FLOAT16, BFLOAT16}) {
    PushRequestHeader header = MakeHeader(kSizes);
    header.set_encoding(encoding);
    const grpc::ByteBuffer buffer = EncodeTensorMessage(header, Spans(tensors), nullptr, encoding);
    const size_t float32_bytes = EncodeTensorMessage(header, Spans(tensors), nullptr).Length();
    size_t values = 0;
    for (const std::vector<float>& tensor : tensors) values += tensor.size();
    EXPECT_EQ(buffer.Length(), float32_bytes - 2 * values);
    const std::vector<std::vector<float>> expected = AsSent(tensors, encoding);
    EXPECT_NE(expected, tensors);
    // Cut into 3-byte slices (values split across them), or whole; data after the header, and
    // before it (staged).
    const std::string encoded = ToString(buffer);
    PushRequest parsed;  // By the generated parser: the same message.
    ASSERT_TRUE(parsed.ParseFromString(encoded));
    for (size_t chunk : {size_t{3}, SIZE_MAX}) {
      PushRequestHeader decoded;
      std::vector<std::vector<float>> received;
      bool all_finite = false;
      absl::Status status = DecodePush(ToByteBuffer(encoded, chunk), &decoded, &received,
                                       &all_finite);
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(decoded.SerializeAsString(), header.SerializeAsString());
      EXPECT_EQ(Concatenate(received), Concatenate(expected)) << TensorEncoding_Name(encoding);
      EXPECT_EQ(all_finite, encoding == BFLOAT16) << "-70000 is beyond float16's range";

      PushRequest data_only;
      data_only.set_data(parsed.data());
      PushRequest header_only;
      *header_only.mutable_header() = header;
      received.clear();
      status = DecodePush(
          ToByteBuffer(data_only.SerializeAsString() + header_only.SerializeAsString(), chunk),
          &decoded, &received, &all_finite);
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(Concatenate(received), Concatenate(expected)) << "data before the header";
      EXPECT_EQ(all_finite, encoding == BFLOAT16);
    }
  }
}

TEST(TensorCodingEncodingTest, RejectsAnOddLengthAndAnUnknownEncoding) {
  PushRequest request;
  request.mutable_header()->set_encoding(FLOAT16);
  request.set_data(std::string(13, 'x'));
  PushRequestHeader decoded;
  std::vector<std::vector<float>> received;
  absl::Status status =
      DecodePush(ToByteBuffer(request.SerializeAsString()), &decoded, &received);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("not a whole number of float16 values"),
            absl::string_view::npos)
      << status;

  request.mutable_header()->set_encoding(static_cast<TensorEncoding>(7));
  request.set_data(std::string(16, 'x'));
  status = DecodePush(ToByteBuffer(request.SerializeAsString()), &decoded, &received);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("encoding 7"), absl::string_view::npos) << status;
}

}  // namespace
}  // namespace ps
