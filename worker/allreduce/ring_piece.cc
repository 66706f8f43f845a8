#include "worker/allreduce/ring_piece.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/tensor/tensor_coding.h"

namespace ps {

grpc::ByteBuffer EncodeRingPiece(RingPieceHeader header, absl::Span<const float> data) {
  header.set_num_floats(static_cast<int64_t>(data.size()));
  const absl::Span<const float> tensors[] = {data};
  return EncodeTensorMessage(header, tensors, nullptr);
}

absl::StatusOr<RingPieceHeader> PeekRingPieceHeader(const grpc::ByteBuffer& piece) {
  // DecodeTensorMessage asks where the data goes once it has the header, before it copies
  // anything: refusing to say stops it there.
  RingPieceHeader header;
  bool have_header = false;
  absl::Status decoded = DecodeTensorMessage(
      piece, &header,
      [&](const google::protobuf::MessageLite&) -> absl::StatusOr<std::vector<absl::Span<float>>> {
        have_header = true;
        return absl::CancelledError("header only");
      });
  if (!have_header) return decoded;
  return header;
}

absl::Status DecodeRingPiece(const grpc::ByteBuffer& piece, absl::Span<float> out) {
  RingPieceHeader header;
  return DecodeTensorMessage(
      piece, &header,
      [&](const google::protobuf::MessageLite&) -> absl::StatusOr<std::vector<absl::Span<float>>> {
        if (header.num_floats() != static_cast<int64_t>(out.size())) {
          return absl::InvalidArgumentError(absl::StrCat(
              "ring message ", header.tag(), " from worker:", header.from_worker(), " has ",
              header.num_floats(), " floats where ", out.size(), " were expected"));
        }
        return std::vector<absl::Span<float>>{out};
      });
}

}  // namespace ps
