#include "common/tensor/tensor_coding.h"

#include <algorithm>
#include <cassert>
#include <climits>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpc/slice.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/slice.h>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "common/tensor/finite.h"
#include "common/tensor/float16.h"

// The wire carries IEEE-754 float32 in little-endian order, which is the tensors' memory layout
// on the hosts we build for; a big-endian host would need a byte-swapping copy on both sides.
#ifndef ABSL_IS_LITTLE_ENDIAN
#error "tensor coding sends tensor memory as is, so it requires a little-endian host"
#endif
static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559,
              "tensor coding requires IEEE-754 float32");

namespace ps {
namespace {

using google::protobuf::MessageLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::internal::WireFormatLite;

constexpr int kHeaderField = 1;
constexpr int kDataField = 2;
constexpr uint32_t kHeaderTag =
    WireFormatLite::MakeTag(kHeaderField, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
constexpr uint32_t kDataTag =
    WireFormatLite::MakeTag(kDataField, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);

// The destroy callback of a tensor slice: drops the slice's reference to `keep_alive`.
void ReleaseKeepAlive(void* keep_alive) {
  delete static_cast<std::shared_ptr<const void>*>(keep_alive);
}

// The one slice ahead of the tensors: header field, then the data field's tag and length.
grpc::Slice EncodePrefix(const MessageLite& header, size_t data_bytes) {
  const size_t header_bytes = header.ByteSizeLong();
  const size_t prefix_bytes =
      CodedOutputStream::VarintSize32(kHeaderTag) + CodedOutputStream::VarintSize64(header_bytes) +
      header_bytes + CodedOutputStream::VarintSize32(kDataTag) +
      CodedOutputStream::VarintSize64(data_bytes);
  // Protobuf and gRPC's reader stop at 2 GiB. Lengths are written as 64-bit varints, so even an
  // oversized message (NDEBUG) is well-formed; receivers then reject it as too large.
  assert(prefix_bytes + data_bytes <= static_cast<size_t>(INT_MAX) &&
         "tensor messages must be smaller than 2 GiB");

  grpc_slice prefix = grpc_slice_malloc(prefix_bytes);
  uint8_t* out = GRPC_SLICE_START_PTR(prefix);
  out = CodedOutputStream::WriteTagToArray(kHeaderTag, out);
  out = CodedOutputStream::WriteVarint64ToArray(header_bytes, out);
  out = header.SerializeWithCachedSizesToArray(out);
  out = CodedOutputStream::WriteTagToArray(kDataTag, out);
  out = CodedOutputStream::WriteVarint64ToArray(data_bytes, out);
  assert(out == GRPC_SLICE_END_PTR(prefix));
  return grpc::Slice(prefix, grpc::Slice::STEAL_REF);
}

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed tensor message: ", what));
}

const char* EncodingName(TensorEncoding encoding) {
  switch (encoding) {
    case FLOAT16:
      return "float16";
    case BFLOAT16:
      return "bfloat16";
    default:
      return "float32";
  }
}

// Asks `destinations` where `data_bytes` of tensor data go and fills them in order with
// `read_values(absl::Span<float> to) -> bool` (false: the bytes are not there).
template <typename ReadValues>
absl::Status FillDestinations(int data_bytes, TensorEncoding encoding, const MessageLite& header,
                              const TensorDestinations& destinations, ReadValues read_values) {
  if (!TensorEncoding_IsValid(encoding)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor data in encoding ", static_cast<int>(encoding),
        ", which this build does not know: send FLOAT32, FLOAT16 or BFLOAT16"));
  }
  const int value_bytes = EncodedValueBytes(encoding);
  if (data_bytes % value_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor data is ", data_bytes,
                                                   " bytes, not a whole number of ",
                                                   EncodingName(encoding), " values"));
  }
  absl::StatusOr<std::vector<absl::Span<float>>> spans = destinations(header);
  if (!spans.ok()) return spans.status();
  size_t values = 0;
  for (absl::Span<float> span : *spans) values += span.size();
  if (values * value_bytes != static_cast<size_t>(data_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor data is ", data_bytes, " bytes but the header describes ", values, " ",
        EncodingName(encoding), " values (", values * value_bytes, " bytes)"));
  }
  for (absl::Span<float> span : *spans) {
    if (!span.empty() && !read_values(span)) return Malformed("tensor data is truncated");
  }
  return absl::OkStatus();
}

// Copies `to.size()` floats from `input` into `to`, in the pieces gRPC received them in. With
// `all_finite` non-null, clears it if a copied value is Inf or NaN, checking each piece as soon
// as it is copied. The floats read as bytes: they need not be aligned in gRPC's buffers.
bool ReadFloats(CodedInputStream* input, absl::Span<float> to, bool* all_finite) {
  const int bytes = static_cast<int>(to.size() * sizeof(float));  // Within the message's size.
  if (all_finite == nullptr) return input->ReadRaw(to.data(), bytes);
  char* out = reinterpret_cast<char*>(to.data());
  int copied = 0;
  size_t checked = 0;  // Floats of `to` already checked.
  while (copied < bytes) {
    const void* piece;
    int piece_bytes;
    if (!input->GetDirectBufferPointer(&piece, &piece_bytes) || piece_bytes <= 0) return false;
    const int n = std::min(piece_bytes, bytes - copied);
    std::memcpy(out + copied, piece, n);
    if (!input->Skip(n)) return false;
    copied += n;
    const size_t whole = static_cast<size_t>(copied) / sizeof(float);
    if (*all_finite && !AllFinite(to.subspan(checked, whole - checked))) *all_finite = false;
    checked = whole;
  }
  return true;
}

// Converts 16-bit values (`encoding`) into `to`, checking each converted block as ReadFloats does.
void Widen(TensorEncoding encoding, absl::Span<const uint16_t> from, absl::Span<float> to,
           bool* all_finite) {
  if (encoding == FLOAT16) {
    HalvesToFloats(from, to);
  } else {
    Bfloat16sToFloats(from, to);
  }
  if (all_finite != nullptr && *all_finite && !AllFinite(to)) *all_finite = false;
}

// Reads `to.size()` 16-bit values from `input` into `to` as floats, a cache-sized block at a time.
bool Read16BitValues(CodedInputStream* input, TensorEncoding encoding, absl::Span<float> to,
                     bool* all_finite) {
  constexpr size_t kBlock = 4096;
  uint16_t block[kBlock];
  for (size_t done = 0; done < to.size();) {
    const size_t n = std::min(kBlock, to.size() - done);
    if (!input->ReadRaw(block, static_cast<int>(n * sizeof(uint16_t)))) return false;
    Widen(encoding, absl::MakeConstSpan(block, n), to.subspan(done, n), all_finite);
    done += n;
  }
  return true;
}

}  // namespace

int EncodedValueBytes(TensorEncoding encoding) {
  return encoding == FLOAT16 || encoding == BFLOAT16 ? 2 : 4;
}

grpc::ByteBuffer EncodeTensorMessage(const MessageLite& header,
                                     absl::Span<const absl::Span<const float>> tensors,
                                     std::shared_ptr<const void> keep_alive,
                                     TensorEncoding encoding) {
  size_t values = 0;
  for (absl::Span<const float> tensor : tensors) values += tensor.size();
  const size_t data_bytes = values * EncodedValueBytes(encoding);

  std::vector<grpc::Slice> slices;
  slices.reserve(1 + tensors.size());
  slices.push_back(EncodePrefix(header, data_bytes));
  if (encoding == FLOAT16 || encoding == BFLOAT16) {
    grpc_slice data = grpc_slice_malloc(data_bytes);
    uint16_t* out = reinterpret_cast<uint16_t*>(GRPC_SLICE_START_PTR(data));
    for (absl::Span<const float> tensor : tensors) {
      if (encoding == FLOAT16) {
        FloatsToHalves(tensor, absl::MakeSpan(out, tensor.size()));
      } else {
        FloatsToBfloat16s(tensor, absl::MakeSpan(out, tensor.size()));
      }
      out += tensor.size();
    }
    slices.emplace_back(data, grpc::Slice::STEAL_REF);
    return grpc::ByteBuffer(slices.data(), slices.size());
  }
  for (absl::Span<const float> tensor : tensors) {
    if (tensor.empty()) continue;
    const size_t bytes = tensor.size() * sizeof(float);
    if (keep_alive == nullptr) {
      slices.emplace_back(tensor.data(), bytes, grpc::Slice::STATIC_SLICE);
    } else {
      // gRPC takes a mutable pointer here but only reads through it.
      slices.emplace_back(const_cast<float*>(tensor.data()), bytes, &ReleaseKeepAlive,
                          new std::shared_ptr<const void>(keep_alive));
    }
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Data that follows a header field goes straight from gRPC's slices into the destinations.
// Data that comes first is staged until the end, when every header field has been merged; a
// header field after data that was already delivered is rejected, as is a second data field
// (the generated parser would merge or replace, which cannot be undone here).
absl::Status DecodeTensorMessage(const grpc::ByteBuffer& buffer, MessageLite* header,
                                 const TensorDestinations& destinations, bool* all_finite,
                                 const TensorEncodingOf& encoding_of) {
  if (all_finite != nullptr) *all_finite = true;
  if (!buffer.Valid()) return Malformed("no payload");
  const size_t message_bytes = buffer.Length();
  if (message_bytes > static_cast<size_t>(INT_MAX)) {
    return Malformed(absl::StrCat(message_bytes, " bytes is over the 2 GiB limit"));
  }
  // ProtoBufferReader wants a mutable buffer; the copy only references the same slices.
  grpc::ByteBuffer readable(buffer);
  grpc::ProtoBufferReader reader(&readable);
  if (!reader.status().ok()) return Malformed(reader.status().error_message());
  CodedInputStream input(&reader);
  input.SetTotalBytesLimit(INT_MAX);
  header->Clear();

  bool header_before_data = false;
  bool data_seen = false;
  bool data_delivered = false;
  int data_bytes = 0;
  std::string staged_data;
  while (true) {
    const uint32_t tag = input.ReadTag();
    if (tag == 0) break;
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const bool length_delimited =
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (field == kHeaderField && length_delimited) {
      if (data_delivered) return Malformed("header field after the tensor data");
      if (!WireFormatLite::ReadMessage(&input, header)) return Malformed("bad header");
      header_before_data = !data_seen;
    } else if (field == kDataField && length_delimited) {
      if (data_seen) return Malformed("more than one tensor data field");
      data_seen = true;
      if (!input.ReadVarintSizeAsInt(&data_bytes)) return Malformed("bad tensor data length");
      // Checked before anything is written, so truncation leaves the destinations untouched.
      const int64_t remaining = static_cast<int64_t>(message_bytes) - input.CurrentPosition();
      if (data_bytes > remaining) {
        return Malformed(absl::StrCat("tensor data is ", data_bytes, " bytes but only ",
                                      remaining, " bytes follow"));
      }
      if (header_before_data) {
        const TensorEncoding encoding = encoding_of ? encoding_of(*header) : FLOAT32;
        absl::Status filled = FillDestinations(
            data_bytes, encoding, *header, destinations, [&](absl::Span<float> to) {
              return encoding == FLOAT32 ? ReadFloats(&input, to, all_finite)
                                         : Read16BitValues(&input, encoding, to, all_finite);
            });
        if (!filled.ok()) return filled;
        data_delivered = true;
      } else if (!input.ReadString(&staged_data, data_bytes)) {
        return Malformed("tensor data is truncated");
      }
    } else if (field == 0 || !WireFormatLite::SkipField(&input, tag)) {
      return Malformed(absl::StrCat("bad field with tag ", tag));
    }
  }
  if (!input.ConsumedEntireMessage()) return Malformed("bad tag");
  if (data_delivered) return absl::OkStatus();
  // The data came before the header, or there was none (zero floats).
  size_t staged_offset = 0;
  const TensorEncoding encoding = encoding_of ? encoding_of(*header) : FLOAT32;
  return FillDestinations(
      data_bytes, encoding, *header, destinations, [&](absl::Span<float> to) {
        const char* from = staged_data.data() + staged_offset;
        staged_offset += to.size() * EncodedValueBytes(encoding);
        if (encoding != FLOAT32) {
          std::vector<uint16_t> values(to.size());
          std::memcpy(values.data(), from, values.size() * sizeof(uint16_t));
          Widen(encoding, values, to, all_finite);
          return true;
        }
        std::memcpy(to.data(), from, to.size() * sizeof(float));
        if (all_finite != nullptr && *all_finite && !AllFinite(to)) *all_finite = false;
        return true;
      });
}

}  // namespace ps
