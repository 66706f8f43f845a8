// Float32 tensors on the wire without copies.
//
// Messages that carry tensors (PullResponse, PushRequest in proto/ps_service.proto) have the
// layout {HEADER header = 1; bytes data = 2;}: a small header message, then the values of one
// or more tensors concatenated as raw little-endian float32. This file writes and reads that
// protobuf encoding directly:
//  - EncodeTensorMessage hands gRPC a ByteBuffer made of one slice holding the encoded header
//    and field tags, plus one slice per tensor that points at the tensor's own memory (no
//    copy); gRPC releases those slices when it has sent them.
//  - DecodeTensorMessage parses the header, asks the caller where the data goes, and copies it
//    from gRPC's receive buffers straight into those destinations (one copy, no intermediate
//    std::string or repeated field).
// The bytes are exactly what the generated PushRequest/PullResponse would serialize, so other
// clients may use the generated classes.
//
// The data may also carry the values as 16-bit floats (TensorEncoding FLOAT16 or BFLOAT16, named
// by the message's header; common/tensor/float16.h): the encoder then converts them into one buffer
// of its own (half the bytes, one copy), and the decoder converts them back to float32 as it
// copies them into the destinations.
#ifndef PS_COMMON_TENSOR_TENSOR_CODING_H_
#define PS_COMMON_TENSOR_TENSOR_CODING_H_

#include <functional>
#include <memory>
#include <vector>

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/parameter.pb.h"

namespace ps {

// Bytes a value takes in a message's data: 4 for FLOAT32, 2 for the 16-bit encodings.
int EncodedValueBytes(TensorEncoding encoding);

// Encodes {header = 1, data = 2} where data is `tensors` concatenated.
//
// Lifetime: the tensors' memory is referenced, not copied. If `keep_alive` is non-null, each
// reference holds a copy of it and gRPC drops them when done, so the memory may be owned by
// `keep_alive`. If it is null, the caller must keep every tensor alive and unchanged until the
// RPC that sends the buffer has completed.
// With a 16-bit `encoding` the values are converted into a buffer the ByteBuffer owns, and the
// tensors need not outlive the call. `header` must name the same encoding to its receiver.
// REQUIRES: the encoded message is smaller than 2 GiB (protobuf's and gRPC's reader's limit).
grpc::ByteBuffer EncodeTensorMessage(const google::protobuf::MessageLite& header,
                                     absl::Span<const absl::Span<const float>> tensors,
                                     std::shared_ptr<const void> keep_alive,
                                     TensorEncoding encoding = FLOAT32);

// Given the parsed header, returns the spans the data must fill, in order; their sizes must
// add up to the data's length in values (else the message is rejected).
using TensorDestinations =
    std::function<absl::StatusOr<std::vector<absl::Span<float>>>(
        const google::protobuf::MessageLite& header)>;
// Given the parsed header, how its data carries the values.
using TensorEncodingOf = std::function<TensorEncoding(const google::protobuf::MessageLite& header)>;

// Decodes a message of the layout above into `header` and the destinations. Fields may come in
// either order (if data comes first it is staged, then copied), but data at most once and header
// fields not on both sides of it. INVALID_ARGUMENT for malformed bytes, a data length that is not
// a whole number of values or does not match the destinations, or an encoding this code does not
// know; a destinations error is passed through as is. On error, `header` and the destinations may
// have been partly written. `encoding_of` null: the data is FLOAT32.
//
// With `all_finite` non-null, it is set to whether every float of the data is finite (no Inf
// or NaN), checked piece by piece right after each is copied, while it is in cache: much
// cheaper than a pass of its own over a large tensor.
absl::Status DecodeTensorMessage(const grpc::ByteBuffer& buffer,
                                 google::protobuf::MessageLite* header,
                                 const TensorDestinations& destinations,
                                 bool* all_finite = nullptr,
                                 const TensorEncodingOf& encoding_of = nullptr);

}  // namespace ps

#endif  // PS_COMMON_TENSOR_TENSOR_CODING_H_
