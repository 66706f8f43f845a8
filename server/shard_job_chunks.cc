// ShardJob's chunked pushes: assembling a push that arrives in several calls, then applying it
// whole through Push. The rules are written beside PushRequestHeader.total_chunks.
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/shard_job.h"

namespace ps {
namespace {

PushResponse Received() {
  PushResponse response;
  response.set_outcome(PushResponse::RECEIVED);
  return response;
}

// Whether two chunks' headers agree on everything but the chunk fields.
bool SamePush(const PushRequestHeader& a, const PushRequestHeader& b) {
  return a.job_id() == b.job_id() && a.worker() == b.worker() && a.push_id() == b.push_id() &&
         a.read_version() == b.read_version() && a.step() == b.step() &&
         a.clock() == b.clock() && a.total_chunks() == b.total_chunks();
}

std::string ChunkName(const PushRequestHeader& header) {
  return absl::StrCat("chunk ", ShardJob::RangeText(header.chunk_offset(), header.chunk_size()),
                      " of push ", header.push_id(), " from worker ", header.worker());
}

}  // namespace

int64_t ShardJob::NewPushBufferBytes(const PushRequestHeader& header) {
  const int64_t bytes = num_elements_ * static_cast<int64_t>(sizeof(float));
  if (!IsChunk(header)) return bytes;
  absl::MutexLock lock(&chunks_mu_);
  // A worker out of range is refused as the chunk is decoded, before any buffer.
  if (header.worker() < 0 || header.worker() >= static_cast<int>(assemblies_.size())) return 0;
  const std::unique_ptr<Assembly>& assembly = assemblies_[header.worker()];
  const bool assembling = assembly != nullptr &&
                          assembly->header.incarnation() == header.incarnation() &&
                          assembly->header.push_id() == header.push_id();
  return assembling ? 0 : bytes;
}

void ShardJob::DropAssembly(int worker, std::optional<int> incarnation) {
  absl::MutexLock lock(&chunks_mu_);
  if (worker < 0 || worker >= static_cast<int>(assemblies_.size())) return;
  std::unique_ptr<Assembly>& assembly = assemblies_[worker];
  if (assembly == nullptr) return;
  if (incarnation.has_value() && assembly->header.incarnation() > *incarnation) return;
  assembly.reset();
}

absl::StatusOr<ShardJob::ChunkTarget> ShardJob::PushChunkBuffer(const PushRequestHeader& header) {
  const std::string prefix = JobPrefix(spec().job_id());
  absl::Status status = CheckPushSender(header);
  if (status.ok()) status = CheckPushSlices(header);
  if (!status.ok()) return status;
  if (!header.sparse().empty()) {
    CountRejected("shape");
    return absl::InvalidArgumentError(
        prefix + "a chunked push carries dense values only: push sparse rows unchunked");
  }
  const int64_t offset = header.chunk_offset();
  const int64_t size = header.chunk_size();
  if (size < 1 || offset < 0 || offset > num_elements_ - size ||
      header.total_chunks() > num_elements_) {
    CountRejected("chunk");
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, ChunkName(header), " (one of ", header.total_chunks(),
        ") does not fit the shard's gradient of ", num_elements_,
        " floats; split the gradient into non-empty chunks inside it"));
  }
  absl::MutexLock chunks_lock(&chunks_mu_);
  std::unique_ptr<Assembly>& assembly = assemblies_[header.worker()];
  {
    absl::MutexLock lock(&mu_);
    absl::Status incarnation = CheckIncarnationLocked(header.worker(), header.incarnation());
    if (!incarnation.ok()) return incarnation;
    // An earlier incarnation's assembly is dropped; the incarnation is taken when the whole
    // push is admitted.
    if (assembly != nullptr && assembly->header.incarnation() < header.incarnation()) {
      assembly.reset();
    }
    if (header.push_id() <= LastPushIdLocked(header.worker(), header.incarnation())) {
      ChunkTarget target;
      target.answer = DuplicateLocked(/*count=*/header.chunk_offset() == 0);
      return target;
    }
  }
  if (assembly != nullptr && assembly->header.push_id() > header.push_id()) {
    CountRejected("chunk");
    return absl::AbortedError(absl::StrCat(prefix, ChunkName(header),
                                           " is too late: the worker has since started push ",
                                           assembly->header.push_id()));
  }
  if (assembly == nullptr || assembly->header.push_id() < header.push_id()) {
    assembly = std::make_unique<Assembly>();  // Abandons an older, incomplete push.
    assembly->header = header;
    assembly->header.clear_chunk_offset();
    assembly->header.clear_chunk_size();
    assembly->header.clear_bulk_stream();
    assembly->header.clear_bulk_frame();
    assembly->buffer = AcquirePushBuffer(num_elements_, PushGroup(header));
  } else if (!SamePush(assembly->header, header)) {
    CountRejected("chunk");
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "the chunks of push ", header.push_id(), " from worker ", header.worker(),
        " disagree on read_version, step, clock or total_chunks; send every chunk of a push "
        "with the same header"));
  }
  auto [it, inserted] = assembly->chunks.emplace(offset, size);
  if (!inserted && it->second == size && assembly->on_streams.count(offset) > 0) {
    // Its first attempt's values are still coming on a bulk stream, and may not come.
    return absl::UnavailableError(absl::StrCat(
        prefix, ChunkName(header), " is still coming on its bulk stream: retry shortly"));
  }
  if (!inserted && it->second == size) {
    ChunkTarget target;  // A retry of a chunk that is in, or being decoded.
    target.answer = Received();
    return target;
  }
  const bool overlaps_before = it != assembly->chunks.begin() &&
                               std::prev(it)->first + std::prev(it)->second > offset;
  const bool overlaps_after =
      std::next(it) != assembly->chunks.end() && std::next(it)->first < offset + size;
  if (!inserted || overlaps_before || overlaps_after) {
    if (inserted) assembly->chunks.erase(it);
    CountRejected("chunk");
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, ChunkName(header), " overlaps another chunk of the push; chunks must cover the "
        "gradient exactly once"));
  }
  if (header.bulk_stream() != 0) assembly->on_streams.insert(offset);
  ChunkTarget target;
  target.buffer = assembly->buffer;
  target.destination = absl::MakeSpan(assembly->buffer->data() + offset, size);
  return target;
}

absl::StatusOr<PushResponse> ShardJob::PushChunkDone(const PushRequestHeader& header,
                                                     bool finite) {
  absl::StatusOr<std::variant<PushResponse, ReadyPush>> done = ChunkDone(header, finite);
  if (!done.ok()) return done.status();
  if (PushResponse* answer = std::get_if<PushResponse>(&*done)) return *answer;
  const ReadyPush& ready = std::get<ReadyPush>(*done);
  return Push(ready.header, *ready.buffer, ready.known_finite);
}

absl::StatusOr<std::variant<PushResponse, ShardJob::ReadyPush>> ShardJob::ChunkDone(
    const PushRequestHeader& header, bool finite) {
  std::unique_ptr<Assembly> complete;
  {
    absl::MutexLock chunks_lock(&chunks_mu_);
    std::unique_ptr<Assembly>& assembly = assemblies_[header.worker()];
    if (assembly == nullptr || assembly->header.push_id() != header.push_id()) {
      return absl::AbortedError(absl::StrCat(
          JobPrefix(spec().job_id()), ChunkName(header),
          " was abandoned while it was decoded: the worker has since started another push"));
    }
    assembly->on_streams.erase(header.chunk_offset());
    assembly->floats_in += header.chunk_size();
    ++assembly->chunks_in;
    assembly->all_finite = assembly->all_finite && finite;
    if (assembly->floats_in < num_elements_) return Received();
    complete = std::move(assembly);
  }
  if (complete->chunks_in != complete->header.total_chunks()) {
    CountRejected("chunk");
    return absl::InvalidArgumentError(absl::StrCat(
        JobPrefix(spec().job_id()), "push ", header.push_id(), " from worker ", header.worker(),
        " came in ", complete->chunks_in, " chunks but says total_chunks is ",
        complete->header.total_chunks(), "; nothing was applied"));
  }
  return ReadyPush{complete->header, complete->buffer, complete->all_finite};
}

void ShardJob::AbandonChunk(const PushRequestHeader& header, bool malformed) {
  if (malformed) CountRejected("malformed");
  absl::MutexLock chunks_lock(&chunks_mu_);
  std::unique_ptr<Assembly>& assembly = assemblies_[header.worker()];
  if (assembly != nullptr && assembly->header.push_id() == header.push_id()) {
    assembly->on_streams.erase(header.chunk_offset());
    assembly->chunks.erase(header.chunk_offset());  // A retry may send it again.
  }
}

}  // namespace ps
