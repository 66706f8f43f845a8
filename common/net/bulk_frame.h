// The frames of a bulk stream (docs/bulk_streams.md): a TCP connection from a ps to one worker
// session over which the ps sends the dense values of large pulls outside gRPC's messages, so
// that they go from the shard's memory into the socket and out of it into the worker's
// variables, with no copy of their own on either side.
//
// A frame is a header, then `bytes` bytes of float32 values (the hosts' byte order, as in the
// gRPC messages' tensors). The header's `frame` is the number the pull named
// (PullRequest.bulk_frame), so that the worker puts the values where that pull wants them.
#ifndef PS_COMMON_NET_BULK_FRAME_H_
#define PS_COMMON_NET_BULK_FRAME_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace ps {

struct BulkFrameHeader {
  static constexpr uint32_t kMagic = 0x4b425350;  // "PSBK".
  uint32_t magic = kMagic;
  uint32_t reserved = 0;
  uint64_t frame = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(BulkFrameHeader) == 24, "the header's wire size");

// Writes one frame of `pieces`, one after another, to the blocking socket `fd` (its send
// timeout, SO_SNDTIMEO, bounds each write), giving up past `deadline` between writes (so at
// most one write's timeout after it).
// UNAVAILABLE naming the error where the socket fails or times out (the frame may then be cut
// short: the caller closes the socket).
absl::Status SendBulkFrame(int fd, uint64_t frame, absl::Span<const absl::Span<const float>> pieces,
                           absl::Time deadline = absl::InfiniteFuture());

// Reads the next frame's header from the blocking socket `fd`. UNAVAILABLE where the stream
// ends or fails; DATA_LOSS where the header is not one (a stream out of step).
absl::StatusOr<BulkFrameHeader> ReadBulkFrameHeader(int fd);
// Reads exactly the bytes `destinations` hold, into them in order.
absl::Status ReadBulkValues(int fd, absl::Span<const absl::Span<float>> destinations);
// Reads `bytes` bytes and drops them (a frame no one waits for any more).
absl::Status SkipBulkBytes(int fd, uint64_t bytes);

}  // namespace ps

#endif  // PS_COMMON_NET_BULK_FRAME_H_
