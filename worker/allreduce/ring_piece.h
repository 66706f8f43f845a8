// A ring message on the wire (proto/ring.proto's RingPiece): encoded from the sender's floats
// without a copy, and decoded from gRPC's buffers straight into the receiver's, through
// common/tensor/tensor_coding.
#ifndef PS_WORKER_ALLREDUCE_RING_PIECE_H_
#define PS_WORKER_ALLREDUCE_RING_PIECE_H_

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/ring.pb.h"

namespace ps {

// `header` (num_floats set from `data`) and `data`. The buffer references `data`: it must stay
// alive and unchanged until the call that sends the buffer has completed.
grpc::ByteBuffer EncodeRingPiece(RingPieceHeader header, absl::Span<const float> data);

// The header alone, without reading the data. INVALID_ARGUMENT for a malformed message.
absl::StatusOr<RingPieceHeader> PeekRingPieceHeader(const grpc::ByteBuffer& piece);

// Copies the piece's data into `out`. INVALID_ARGUMENT for a malformed message, or when its
// length is not out.size() (saying both).
absl::Status DecodeRingPiece(const grpc::ByteBuffer& piece, absl::Span<float> out);

}  // namespace ps

#endif  // PS_WORKER_ALLREDUCE_RING_PIECE_H_
