// WorkerSession's pulls whose values come on bulk streams, and pushes whose gradients go on them
// (docs/bulk_streams.md, common/client/bulk_links.h).
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "common/client/worker_session.h"
#include "common/net/proto_byte_buffer.h"
#include "common/tensor/tensor_coding.h"

namespace ps {

absl::Status WorkerSession::TakeBulkValues(BulkLink* link, uint64_t frame,
                                           const PullResponseHeader& header, int64_t bytes) {
  if (!header.on_bulk_stream()) {
    if (frame != 0) link->Forget(frame);  // The ps put the values in the answer.
    return absl::OkStatus();
  }
  absl::Status status = link->Await(frame, absl::Now() + BulkLink::FrameTimeout(bytes));
  if (status.ok()) bytes_received_.fetch_add(bytes, std::memory_order_relaxed);
  return status;
}

absl::Status WorkerSession::AddBulkPullCalls(int ps, const PullOptions& options,
                                             const MutableVariables& out, PullState* state,
                                             std::vector<PsConnections::Call>* calls) {
  std::vector<std::pair<int, BulkLink*>> links;  // (stream index, link) of the streams open.
  for (int k = 0; k < bulk_->streams_per_ps(); ++k) {
    if (BulkLink* link = BulkFor(ps, k); link != nullptr) links.emplace_back(k, link);
  }
  if (links.empty()) return absl::FailedPreconditionError("no bulk stream");
  // The shard's rows in as many parts of about equal size as there are streams (a row each at
  // least), one pull on each stream.
  const int64_t per_part = (ShardFloats(ps) + static_cast<int64_t>(links.size()) - 1) /
                           static_cast<int64_t>(links.size());
  std::vector<std::vector<SliceRef>> parts(1);
  std::vector<int64_t> part_floats(1, 0);
  for (const SliceRef& slice : ShardSlices(ps)) {
    const int64_t row_size = variable_row_size_.at(slice.variable());
    int64_t row = slice.row_begin();
    const int64_t end = slice.row_begin() + slice.row_count();
    while (row < end) {
      if (part_floats.back() >= per_part && parts.size() < links.size()) {
        parts.emplace_back();
        part_floats.push_back(0);
      }
      const int64_t rows =
          std::min(end - row, std::max<int64_t>(1, (per_part - part_floats.back()) / row_size));
      SliceRef ref = slice;
      ref.set_row_begin(row);
      ref.set_row_count(parts.size() < links.size() ? rows : end - row);
      parts.back().push_back(ref);
      part_floats.back() += ref.row_count() * row_size;
      row += ref.row_count();
    }
  }
  const PsClientOptions& client_options = connections_->options();
  for (size_t part = 0; part < parts.size(); ++part) {
    const int k = links[part].first;
    BulkLink* const link = links[part].second;
    absl::StatusOr<std::vector<absl::Span<float>>> destinations = Destinations(out, parts[part]);
    if (!destinations.ok()) return destinations.status();
    const int64_t bytes = part_floats[part] * static_cast<int64_t>(sizeof(float));
    PullRequest request = MakePullRequest(ps, options);
    for (const SliceRef& ref : parts[part]) *request.add_slices() = ref;
    auto frame = std::make_shared<uint64_t>(0);  // The attempt's, set by its request.
    BulkLinks::EncodeRequest encode = [request = std::move(request)](uint64_t stream,
                                                                      uint64_t frame) {
      PullRequest attempt = request;
      attempt.set_bulk_stream(stream);
      attempt.set_bulk_frame(frame);
      return SerializeToByteBuffer(attempt);
    };
    calls->push_back(PsConnections::Call{
        ps, "Pull",
        bulk_->FirstOnStream(ps, k, link, std::move(encode), *std::move(destinations), frame),
        [this, expected = parts[part], ps, &out, state, link, frame,
         bytes](const grpc::ByteBuffer& answer) {
          PullResponseHeader header;
          absl::Status status =
              DecodeValues(answer, expected, out, &header, {}, nullptr, false, *frame);
          if (status.ok()) status = TakeBulkValues(link, *frame, header, bytes);
          if (status.ok()) state->Record(ps, header);
          return status;
        },
        client_options.wait_timeout + client_options.call_timeout, k});
  }
  return absl::OkStatus();
}

bool WorkerSession::AddBulkPushCalls(int ps, const ShardPush& push, PushState* state,
                                     std::vector<PsConnections::Call>* calls) {
  std::vector<std::pair<int, BulkLink*>> links;  // (stream index, link) of the streams open.
  for (int k = 0; k < bulk_->streams_per_ps(); ++k) {
    if (BulkLink* link = BulkFor(ps, k); link != nullptr) links.emplace_back(k, link);
  }
  const int64_t total = ShardFloats(ps);
  if (links.empty() || total == 0) return false;
  const int64_t streams = static_cast<int64_t>(links.size());
  const int64_t per_chunk = (total + streams - 1) / streams;
  const int64_t num_chunks = (total + per_chunk - 1) / per_chunk;
  for (int64_t chunk = 0; chunk < num_chunks; ++chunk) {
    const int k = links[chunk].first;
    BulkLink* const link = links[chunk].second;
    PushRequestHeader header = push.header;
    std::vector<absl::Span<const float>> pieces = push.tensors;
    if (num_chunks > 1) {
      const int64_t offset = chunk * per_chunk;
      const int64_t size = std::min(per_chunk, total - offset);
      header.set_total_chunks(static_cast<int32_t>(num_chunks));
      header.set_chunk_offset(offset);
      header.set_chunk_size(size);
      pieces = Subspans(push.tensors, offset, size);
    }
    int64_t bytes = 0;
    for (absl::Span<const float> piece : pieces) bytes += piece.size() * sizeof(float);
    // The gradients stay alive and unchanged until Push returns (after FinishSends).
    BulkLinks::EncodeRequest encode = [header, pieces](uint64_t stream, uint64_t frame) {
      PushRequestHeader attempt = header;
      attempt.set_bulk_stream(stream);
      attempt.set_bulk_frame(frame);
      return stream != 0 ? EncodeTensorMessage(attempt, {}, nullptr, attempt.encoding())
                         : EncodeTensorMessage(attempt, pieces, nullptr, attempt.encoding());
    };
    auto frame = std::make_shared<uint64_t>(0);  // The attempt's, set by its request.
    calls->push_back(PsConnections::Call{
        ps, "Push",
        [this, frame, bytes,
         make = bulk_->FirstPushOnStream(ps, k, link, std::move(encode), pieces, frame)] {
          grpc::ByteBuffer request = make();
          if (*frame != 0) bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
          return request;
        },
        [state, ps](const grpc::ByteBuffer& answer) {
          PushResponse response;
          absl::Status status = ParseFromByteBuffer(answer, &response);
          if (status.ok()) state->Record(ps, std::move(response));
          return status;
        },
        connections_->options().call_timeout, k});
  }
  return true;
}

}  // namespace ps
