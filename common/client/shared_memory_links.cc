#include "common/client/shared_memory_links.h"

#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/net/descriptor_handout.h"
#include "common/net/proto_byte_buffer.h"
#include "glog/logging.h"

namespace ps {

SharedMemoryLinks::SharedMemoryLinks(PsConnections* connections,
                                     OpenSharedMemoryRequest identity,
                                     std::vector<int64_t> shard_floats)
    : connections_(connections),
      identity_(std::move(identity)),
      shard_floats_(std::move(shard_floats)),
      links_(shard_floats_.size()),
      refused_(shard_floats_.size(), false),
      stale_(shard_floats_.size(), false) {}

SharedMemoryLinks::Link* SharedMemoryLinks::For(int ps) {
  if (links_[ps] != nullptr) return links_[ps].get();
  if (refused_[ps] || shard_floats_[ps] == 0) return nullptr;
  // A call made again in the requests (FirstThroughMemory) carries the whole shard in one
  // message, headers and all: a shard that would not fit keeps to the chunked requests.
  const int64_t bytes = shard_floats_[ps] * static_cast<int64_t>(sizeof(float));
  if (!connections_->FitsOneMessage(bytes)) {
    refused_[ps] = true;
    LOG(INFO) << connections_->ShardName(ps) << ": job " << identity_.job_id()
              << "'s tensors go in the requests, in chunks, not through shared memory: the "
              << "shard's " << bytes << " bytes would not fit one message of max_message_bytes ("
              << connections_->options().max_message_bytes << ") were a call through memory "
              << "made again in the requests";
    return nullptr;
  }
  bool lasting = true;
  absl::StatusOr<std::unique_ptr<Link>> opened = Open(ps, &lasting);
  if (!opened.ok() && !lasting) return nullptr;  // This use's own call meets the same trouble.
  if (!opened.ok()) {
    refused_[ps] = true;
    LOG(INFO) << connections_->ShardName(ps) << ": job " << identity_.job_id()
              << "'s tensors go in the requests, not through shared memory: "
              << opened.status().message();
    return nullptr;
  }
  links_[ps] = *std::move(opened);
  return links_[ps].get();
}

void SharedMemoryLinks::Drop(int ps) {
  if (links_[ps] == nullptr) return;
  if (keep_dropped_) dropped_.push_back(std::move(links_[ps]));
  links_[ps].reset();
}

void SharedMemoryLinks::DropAll() {
  for (int ps = 0; ps < static_cast<int>(links_.size()); ++ps) Drop(ps);
}

void SharedMemoryLinks::DropStale() {
  for (int ps = 0; ps < static_cast<int>(links_.size()); ++ps) {
    if (stale_[ps]) Drop(ps);
    stale_[ps] = false;
  }
}

void SharedMemoryLinks::KeepDroppedMappings() {
  keep_dropped_ = true;
  dropped_.clear();
}

std::function<grpc::ByteBuffer()> SharedMemoryLinks::FirstThroughMemory(
    int ps, grpc::ByteBuffer through_memory, std::function<grpc::ByteBuffer()> in_requests) {
  auto attempts = std::make_shared<int>(0);
  return [this, ps, through_memory = std::move(through_memory),
          in_requests = std::move(in_requests), attempts] {
    if ((*attempts)++ == 0) return through_memory;
    MarkStale(ps);
    return in_requests();
  };
}

absl::StatusOr<std::unique_ptr<SharedMemoryLinks::Link>> SharedMemoryLinks::Open(int ps,
                                                                                bool* lasting) {
  OpenSharedMemoryResponse response;
  std::vector<PsConnections::Call> calls;
  calls.push_back(PsConnections::Call{
      ps, "OpenSharedMemory", [this] { return SerializeToByteBuffer(identity_); },
      [&response](const grpc::ByteBuffer& bytes) { return ParseFromByteBuffer(bytes, &response); },
      connections_->options().call_timeout, 0});
  absl::Status status = connections_->RunCalls(std::move(calls));
  // The job not there yet, or the ps not reachable: worth another try at the next use.
  *lasting = !(absl::IsNotFound(status) || absl::IsUnavailable(status) ||
               absl::IsDeadlineExceeded(status));
  if (!status.ok()) return status;
  const int64_t floats = shard_floats_[ps];
  if (response.push_floats() != floats || response.pull_floats() != floats) {
    return absl::InternalError(absl::StrCat(
        "the ps opened a segment of ", response.push_floats(), " + ", response.pull_floats(),
        " floats for a shard of ", floats, ": the ps and this worker place the job differently"));
  }
  absl::StatusOr<int> fd = DescriptorHandout::Fetch(response.socket_path(), response.ticket(),
                                                    connections_->options().call_timeout);
  // A busy handout is worth another try; no socket (another host) or a refusal is not.
  *lasting = !(absl::IsUnavailable(fd.status()) || absl::IsDeadlineExceeded(fd.status()));
  if (!fd.ok()) return fd.status();
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> mapping =
      SharedMemorySegment::Map(*fd, 2 * floats * static_cast<int64_t>(sizeof(float)));
  if (!mapping.ok()) return mapping.status();
  auto link = std::make_unique<Link>();
  link->segment = response.segment();
  link->push = (*mapping)->Floats(0, floats);
  link->pull = (*mapping)->Floats(floats, floats);
  link->mapping = *std::move(mapping);
  return link;
}

void SharedMemoryLinks::Gather(absl::Span<const absl::Span<const float>> tensors,
                               absl::Span<float> region) {
  size_t offset = 0;
  for (absl::Span<const float> tensor : tensors) {
    CHECK_LE(offset + tensor.size(), region.size());
    if (tensor.data() != region.data() + offset) {  // Else computed in place (PushRegions).
      std::memcpy(region.data() + offset, tensor.data(), tensor.size() * sizeof(float));
    }
    offset += tensor.size();
  }
}

void SharedMemoryLinks::Scatter(absl::Span<const float> region,
                                absl::Span<const absl::Span<float>> destinations) {
  size_t offset = 0;
  for (absl::Span<float> destination : destinations) {
    CHECK_LE(offset + destination.size(), region.size());
    std::memcpy(destination.data(), region.data() + offset, destination.size() * sizeof(float));
    offset += destination.size();
  }
}

}  // namespace ps
