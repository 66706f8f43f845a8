// Protocol Buffers messages to and from grpc::ByteBuffer, for the calls that handle raw
// buffers (the generic client stub, the raw server methods).
#ifndef PS_COMMON_NET_PROTO_BYTE_BUFFER_H_
#define PS_COMMON_NET_PROTO_BYTE_BUFFER_H_

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"

namespace ps {

grpc::ByteBuffer SerializeToByteBuffer(const google::protobuf::MessageLite& message);

// INVALID_ARGUMENT naming the message type when the bytes do not parse.
absl::Status ParseFromByteBuffer(const grpc::ByteBuffer& buffer,
                                 google::protobuf::MessageLite* message);

}  // namespace ps

#endif  // PS_COMMON_NET_PROTO_BYTE_BUFFER_H_
