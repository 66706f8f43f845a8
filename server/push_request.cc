#include "server/push_request.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "absl/strings/str_cat.h"
#include "common/job/job_schema.h"
#include "common/tensor/finite.h"
#include "common/tensor/tensor_coding.h"
#include "common/tensor/topk_compression.h"

namespace ps {
namespace {

// Copies a shared memory push's dense gradient out of its segment into `destinations` (the
// job's buffer, one span per slice), checking finiteness piece by piece while it is in cache.
// The worker may change the segment meanwhile: what is checked and applied is the copy.
absl::Status CopyFromSegment(const PushRequestHeader& header,
                             const std::vector<absl::Span<float>>& destinations,
                             const SegmentLookup& find_segment, bool* all_finite) {
  const std::string prefix = JobPrefix(header.job_id());
  if (ShardJob::IsChunk(header) || !header.topk_index_gaps().empty() ||
      !header.sparse().empty() || header.encoding() != FLOAT32) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "a push through shared memory carries one whole dense float32 gradient: no "
        "chunks, top-k positions, sparse rows or 16-bit encoding"));
  }
  if (find_segment == nullptr) {
    return absl::UnavailableError(
        absl::StrCat(prefix, "this ps serves no shared memory: send the gradient in the request"));
  }
  absl::StatusOr<SharedMemoryRegistry::Region> region = find_segment(header);
  if (!region.ok()) return region.status();
  size_t total = 0;
  for (absl::Span<float> destination : destinations) total += destination.size();
  if (total > region->push.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "the push's ", total, " floats do not fit its segment's ", region->push.size()));
  }
  constexpr size_t kPiece = 16384;  // 64 KiB: copied, then checked while in cache.
  const float* from = region->push.data();
  *all_finite = true;
  for (absl::Span<float> destination : destinations) {
    for (size_t done = 0; done < destination.size(); done += kPiece) {
      const size_t n = std::min(kPiece, destination.size() - done);
      std::memcpy(destination.data() + done, from, n * sizeof(float));
      from += n;
      if (*all_finite && !AllFinite(destination.subspan(done, n))) *all_finite = false;
    }
  }
  return absl::OkStatus();
}

// Why a push naming a bulk stream cannot take its values from it, or OK.
absl::Status CheckBulkPush(const PushRequestHeader& header, bool allow_chunks) {
  const std::string prefix = JobPrefix(header.job_id());
  if (!allow_chunks) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "PushPull takes its gradient in the request, not on a bulk stream: use Push"));
  }
  if (header.shared_memory() != 0 || !header.topk_index_gaps().empty() ||
      !header.sparse().empty() || header.encoding() != FLOAT32) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "a push on a bulk stream carries a dense float32 gradient: no shared memory, "
        "top-k positions, sparse rows or 16-bit encoding"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PushResponse> DecodeAndApplyPush(const grpc::ByteBuffer& request,
                                                bool allow_chunks, const JobLookup& find_job,
                                                PushRequestHeader* header_out) {
  std::shared_ptr<ShardJob> job;
  absl::StatusOr<DecodedPush> decoded =
      DecodePush(request, allow_chunks, find_job, header_out, &job);
  if (!decoded.ok()) return decoded.status();
  if (PushResponse* answer = std::get_if<PushResponse>(&*decoded)) return *answer;
  if (std::holds_alternative<AwaitedFrame>(*decoded)) {
    return absl::InvalidArgumentError("this path takes no push on a bulk stream");
  }
  const ShardJob::ReadyPush& ready = std::get<ShardJob::ReadyPush>(*decoded);
  return job->Push(ready.header, *ready.buffer, ready.known_finite);
}

absl::StatusOr<DecodedPush> DecodePush(const grpc::ByteBuffer& request, bool allow_chunks,
                                       const JobLookup& find_job, PushRequestHeader* header_out,
                                       std::shared_ptr<ShardJob>* job_out,
                                       const SegmentLookup& find_segment) {
  PushRequestHeader& header = *header_out;
  std::shared_ptr<ShardJob>& job = *job_out;
  std::shared_ptr<std::vector<float>> gradient;  // Where the data goes, kept alive.
  std::optional<PushResponse> answer;            // A chunk answered without decoding it.
  std::vector<float> topk_values;                // A top-k push's values, expanded after.
  absl::Span<float> topk_dense;                  // Where they expand to: the dense gradient.
  bool all_finite = false;
  bool segment_finite = true;  // A shared memory push's gradient, as copied out.
  std::vector<absl::Span<float>> on_stream;  // Where a bulk push's frame goes.
  const auto bulk = [&header] { return header.bulk_stream() != 0; };
  absl::Status status = DecodeTensorMessage(
      request, &header,
      [&](const google::protobuf::MessageLite&) -> absl::StatusOr<std::vector<absl::Span<float>>> {
        absl::StatusOr<std::shared_ptr<ShardJob>> found = find_job(header);
        if (!found.ok()) return found.status();
        job = *found;
        std::vector<absl::Span<float>> destinations;
        if (ShardJob::IsChunk(header) && header.shared_memory() != 0) {
          job->CountRejected("shared_memory");
          return absl::InvalidArgumentError(absl::StrCat(
              JobPrefix(header.job_id()),
              "a push through shared memory comes whole, not in chunks"));
        }
        if (ShardJob::IsChunk(header) && !allow_chunks) {
          return absl::InvalidArgumentError(
              "PushPull takes a whole push, not a chunk: push large gradients with Push");
        }
        if (bulk()) {
          absl::Status bulk_allowed = CheckBulkPush(header, allow_chunks);
          if (!bulk_allowed.ok()) {
            job->CountRejected("bulk");
            return bulk_allowed;
          }
        }
        if (ShardJob::IsChunk(header) && !header.topk_index_gaps().empty()) {
          job->CountRejected("topk");
          return absl::InvalidArgumentError(
              "a top-k push comes whole, not in chunks: send its values in one message");
        }
        if (ShardJob::IsChunk(header)) {
          absl::StatusOr<ShardJob::ChunkTarget> target = job->PushChunkBuffer(header);
          if (!target.ok()) return target.status();
          if (target->answer.has_value()) {
            answer = target->answer;
            return absl::CancelledError("no decoding needed");  // Stops the decoder.
          }
          gradient = target->buffer;
          destinations.push_back(target->destination);
          if (bulk()) {
            on_stream = std::move(destinations);
            return std::vector<absl::Span<float>>();  // The data carries nothing.
          }
          return destinations;
        }
        absl::StatusOr<std::shared_ptr<std::vector<float>>> buffer =
            job->PushBuffer(header, &destinations);
        if (!buffer.ok()) return buffer.status();
        gradient = *std::move(buffer);
        if (bulk()) {
          on_stream = std::move(destinations);
          return std::vector<absl::Span<float>>();  // The data carries nothing.
        }
        if (header.shared_memory() != 0) {
          absl::Status copied =
              CopyFromSegment(header, destinations, find_segment, &segment_finite);
          if (!copied.ok()) {
            // A segment the ps no longer holds is no fault: the client retries in the request.
            if (!absl::IsUnavailable(copied)) job->CountRejected("shared_memory");
            gradient = nullptr;
            return copied;
          }
          return std::vector<absl::Span<float>>();  // The data carries nothing.
        }
        if (!header.topk_index_gaps().empty()) {
          // The dense gradient's destinations (one per slice, then the sparse rows') become
          // one for the values sent; they are expanded once decoded.
          const size_t slices = header.slices_size();  // One destination each, checked.
          size_t dense_floats = 0;
          for (size_t i = 0; i < slices; ++i) dense_floats += destinations[i].size();
          topk_dense = absl::MakeSpan(gradient->data(), dense_floats);
          absl::Status positions = CheckTopKGaps(header.topk_index_gaps(), dense_floats);
          if (!positions.ok()) {
            job->CountRejected("topk");
            gradient = nullptr;
            return absl::InvalidArgumentError(
                absl::StrCat(JobPrefix(header.job_id()), positions.message()));
          }
          topk_values.resize(header.topk_index_gaps_size());
          std::vector<absl::Span<float>> topk = {absl::MakeSpan(topk_values)};
          if (destinations.size() > slices) topk.push_back(destinations.back());  // Rows.
          return topk;
        }
        return destinations;
      },
      &all_finite,
      [](const google::protobuf::MessageLite& decoded) {
        return static_cast<const PushRequestHeader&>(decoded).encoding();
      });
  if (answer.has_value()) return *answer;
  if (!status.ok()) {
    if (job != nullptr && gradient != nullptr) {
      if (ShardJob::IsChunk(header)) {
        job->AbandonChunk(header);
      } else {
        job->CountRejected("malformed");
      }
    }
    return status;
  }
  if (bulk()) {
    AwaitedFrame awaited{std::move(on_stream), gradient, nullptr};
    awaited.finish = [job, header, gradient](absl::Status received, bool finite)
        -> absl::StatusOr<std::variant<PushResponse, ShardJob::ReadyPush>> {
      if (ShardJob::IsChunk(header)) {
        if (!received.ok()) {
          job->AbandonChunk(header, /*malformed=*/false);
          return received;
        }
        return job->ChunkDone(header, finite);
      }
      if (!received.ok()) return received;
      ShardJob::ReadyPush ready{header, gradient, /*known_finite=*/finite};
      ready.header.clear_bulk_stream();
      ready.header.clear_bulk_frame();
      return ready;
    };
    return awaited;
  }
  if (ShardJob::IsChunk(header)) {
    absl::StatusOr<std::variant<PushResponse, ShardJob::ReadyPush>> done =
        job->ChunkDone(header, all_finite);
    if (!done.ok()) return done.status();
    if (PushResponse* received = std::get_if<PushResponse>(&*done)) return *received;
    return std::get<ShardJob::ReadyPush>(*std::move(done));
  }
  if (!topk_dense.empty()) ExpandTopK(header.topk_index_gaps(), topk_values, topk_dense);
  return ShardJob::ReadyPush{header, std::move(gradient), all_finite && segment_finite};
}

}  // namespace ps
