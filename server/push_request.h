// The server side of a push on the wire: decoding a Push (or PushPull's push) request straight
// into the buffer its job hands out, then handing it to the job (whole, or chunk by chunk).
// Kept apart from the gRPC service so that server/push_request_fuzz.cc reaches the same code
// with any bytes.
#ifndef PS_SERVER_PUSH_REQUEST_H_
#define PS_SERVER_PUSH_REQUEST_H_

#include <functional>
#include <memory>
#include <variant>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/statusor.h"
#include "proto/ps_service.pb.h"
#include "server/shard_job.h"
#include "server/shared_memory_registry.h"

namespace ps {

// The job a push's header names, or the error to answer with: NOT_FOUND, UNAVAILABLE, or
// PERMISSION_DENIED when the caller may not push as the header's worker. Called once the
// header is decoded and before any of the gradient is.
using JobLookup =
    std::function<absl::StatusOr<std::shared_ptr<ShardJob>>(const PushRequestHeader& header)>;

// Decodes `request` (PushRequest's layout, common/tensor/tensor_coding.h), finds its job through
// `find_job`, and applies the push there (ShardJob::Push) or takes it as one chunk
// (PushChunkBuffer, PushChunkDone). `header` receives the decoded header, also on error when it
// got that far. A chunk (total_chunks >= 2) is INVALID_ARGUMENT unless `allow_chunks`.
// A push whose header names a shared memory segment carries its dense gradient there, not in
// the data: it is copied out of the segment (found by `find_segment`) into the job's buffer, and
// checked there, before anything else reads it.
// A push whose header names a bulk stream (Push only: INVALID_ARGUMENT unless `allow_chunks`)
// gives an AwaitedFrame: its buffer taken, its values to come.
// Malformed bytes are INVALID_ARGUMENT and change nothing but the job's rejection count.
// What decoding a push request gives: its answer already (a chunk taken in, a chunk of a push
// applied before), or a whole push for its job to apply.
// A push whose dense values come as a frame on a bulk stream (PushRequestHeader.bulk_stream):
// where they go, and what the push is once they are in.
struct AwaitedFrame {
  std::vector<absl::Span<float>> destinations;
  std::shared_ptr<std::vector<float>> buffer;  // Keeps the destinations alive.
  // Called once with the frame's outcome (BulkStream::Received: whether it came, and whether
  // its values are all finite): the push's answer or the whole push to apply, or the error to
  // answer with (the push then changed nothing).
  std::function<absl::StatusOr<std::variant<PushResponse, ShardJob::ReadyPush>>(
      absl::Status received, bool finite)>
      finish;
};
// What decoding a push request gives: its answer already (a chunk taken in, a chunk of a push
// applied before), a whole push for its job to apply, or a push waiting for its frame.
using DecodedPush = std::variant<PushResponse, ShardJob::ReadyPush, AwaitedFrame>;
// The shared memory segment a push names (PushRequestHeader.shared_memory), found for the
// header's job and worker (SharedMemoryRegistry::Find), or the error to answer with. Null: this
// ps serves none, and a push naming a segment is UNAVAILABLE (the client retries it with the
// gradient in the request).
using SegmentLookup =
    std::function<absl::StatusOr<SharedMemoryRegistry::Region>(const PushRequestHeader& header)>;
// DecodeAndApplyPush without the apply (a replicated shard applies once its backup holds the
// push); `job` receives the job the header names once found.
absl::StatusOr<DecodedPush> DecodePush(const grpc::ByteBuffer& request, bool allow_chunks,
                                       const JobLookup& find_job, PushRequestHeader* header,
                                       std::shared_ptr<ShardJob>* job,
                                       const SegmentLookup& find_segment = nullptr);

absl::StatusOr<PushResponse> DecodeAndApplyPush(const grpc::ByteBuffer& request,
                                                bool allow_chunks, const JobLookup& find_job,
                                                PushRequestHeader* header);

}  // namespace ps

#endif  // PS_SERVER_PUSH_REQUEST_H_
