#include "common/net/proto_byte_buffer.h"

#include <string>

#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_writer.h>

namespace ps {

grpc::ByteBuffer SerializeToByteBuffer(const google::protobuf::MessageLite& message) {
  grpc::ByteBuffer buffer;
  bool own_buffer;
  // Serializing an in-memory message into a fresh buffer cannot fail.
  grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::MessageLite>(
      message, &buffer, &own_buffer)
      .IgnoreError();
  return buffer;
}

absl::Status ParseFromByteBuffer(const grpc::ByteBuffer& buffer,
                                 google::protobuf::MessageLite* message) {
  grpc::ByteBuffer copy(buffer);  // Shares the slices; the reader needs a mutable buffer.
  grpc::ProtoBufferReader reader(&copy);
  if (!reader.status().ok() || !message->ParseFromZeroCopyStream(&reader)) {
    return absl::InvalidArgumentError("malformed message: the bytes do not parse as " +
                                      message->GetTypeName());
  }
  return absl::OkStatus();
}

}  // namespace ps
