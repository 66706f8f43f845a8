#include "server/push_request.h"

#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "absl/strings/str_cat.h"
#include "common/job/job_schema.h"
#include "common/tensor/tensor_coding.h"
#include "common/tensor/topk_compression.h"

namespace ps {

absl::StatusOr<PushResponse> DecodeAndApplyPush(const grpc::ByteBuffer& request,
                                                bool allow_chunks, const JobLookup& find_job,
                                                PushRequestHeader* header_out) {
  std::shared_ptr<ShardJob> job;
  absl::StatusOr<DecodedPush> decoded = DecodePush(request, allow_chunks, find_job, header_out, &job);
  if (!decoded.ok()) return decoded.status();
  if (PushResponse* answer = std::get_if<PushResponse>(&*decoded)) return *answer;
  const ShardJob::ReadyPush& ready = std::get<ShardJob::ReadyPush>(*decoded);
  return job->Push(ready.header, *ready.buffer, ready.known_finite);
}

absl::StatusOr<DecodedPush> DecodePush(const grpc::ByteBuffer& request, bool allow_chunks,
                                       const JobLookup& find_job, PushRequestHeader* header_out,
                                       std::shared_ptr<ShardJob>* job_out) {
  PushRequestHeader& header = *header_out;
  std::shared_ptr<ShardJob>& job = *job_out;
  std::shared_ptr<std::vector<float>> gradient;  // Where the data goes, kept alive.
  std::optional<PushResponse> answer;            // A chunk answered without decoding it.
  std::vector<float> topk_values;                // A top-k push's values, expanded after.
  absl::Span<float> topk_dense;                  // Where they expand to: the dense gradient.
  bool all_finite = false;
  absl::Status status = DecodeTensorMessage(
      request, &header,
      [&](const google::protobuf::MessageLite&) -> absl::StatusOr<std::vector<absl::Span<float>>> {
        absl::StatusOr<std::shared_ptr<ShardJob>> found = find_job(header);
        if (!found.ok()) return found.status();
        job = *found;
        std::vector<absl::Span<float>> destinations;
        if (ShardJob::IsChunk(header) && !allow_chunks) {
          return absl::InvalidArgumentError(
              "PushPull takes a whole push, not a chunk: push large gradients with Push");
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
          return destinations;
        }
        absl::StatusOr<std::shared_ptr<std::vector<float>>> buffer =
            job->PushBuffer(header, &destinations);
        if (!buffer.ok()) return buffer.status();
        gradient = *std::move(buffer);
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
  if (ShardJob::IsChunk(header)) {
    absl::StatusOr<std::variant<PushResponse, ShardJob::ReadyPush>> done =
        job->ChunkDone(header, all_finite);
    if (!done.ok()) return done.status();
    if (PushResponse* received = std::get_if<PushResponse>(&*done)) return *received;
    return std::get<ShardJob::ReadyPush>(*std::move(done));
  }
  if (!topk_dense.empty()) ExpandTopK(header.topk_index_gaps(), topk_values, topk_dense);
  return ShardJob::ReadyPush{header, std::move(gradient), all_finite};
}

}  // namespace ps
