#include "server/shared_memory_registry.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ps {
namespace {

std::string KibText(int64_t bytes) { return absl::StrCat((bytes + 1023) >> 10, " KiB"); }

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemoryRegistry>> SharedMemoryRegistry::Create(
    const std::string& directory, int64_t max_bytes) {
  absl::StatusOr<std::unique_ptr<DescriptorHandout>> handout = DescriptorHandout::Start(directory);
  if (!handout.ok()) return handout.status();
  return std::unique_ptr<SharedMemoryRegistry>(
      new SharedMemoryRegistry(*std::move(handout), max_bytes));
}

absl::Status SharedMemoryRegistry::CheckRoomLocked(int64_t bytes) const {
  if (bytes > max_bytes_ - bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "shared memory: a segment of ", KibText(bytes), " would pass this ps's ",
        KibText(max_bytes_), " for all segments (--shared_memory_mb), ", KibText(bytes_),
        " in use; this worker's tensors go in its requests instead"));
  }
  if (segments_.size() >= static_cast<size_t>(kMaxSegments)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "shared memory: this ps holds ", kMaxSegments,
        " segments, its most; this worker's tensors go in its requests instead"));
  }
  return absl::OkStatus();
}

uint64_t SharedMemoryRegistry::DropMark() const {
  absl::MutexLock lock(&mu_);
  return drops_;
}

absl::Status SharedMemoryRegistry::CheckJobLocked(const std::string& job_id,
                                                  uint64_t drop_mark) const {
  auto it = dropped_jobs_.find(job_id);
  if (it == dropped_jobs_.end() || it->second.number <= drop_mark) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "shared memory: job \"", job_id, "\" was deleted while its segment was being opened"));
}

absl::StatusOr<SharedMemoryRegistry::Opened> SharedMemoryRegistry::Open(const std::string& job_id,
                                                                       uint64_t drop_mark,
                                                                       int worker,
                                                                       int64_t push_floats,
                                                                       int64_t pull_floats) {
  const int64_t bytes = (push_floats + pull_floats) * static_cast<int64_t>(sizeof(float));
  std::random_device random;
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    absl::Status allowed = CheckJobLocked(job_id, drop_mark);
    if (!allowed.ok()) return allowed;
    absl::Status room = CheckRoomLocked(bytes);
    if (!room.ok()) return room;
    while (id == 0 || segments_.contains(id)) {
      id = (static_cast<uint64_t>(random()) << 32) | random();
    }
  }
  absl::StatusOr<std::string> ticket = handout_->Offer(
      [this, id, job_id, drop_mark, worker, push_floats, pull_floats] {
        return Make(id, job_id, drop_mark, worker, push_floats, pull_floats);
      },
      kTicketLifetime);
  if (!ticket.ok()) return ticket.status();
  return Opened{id, *std::move(ticket), handout_->socket_path()};
}

absl::StatusOr<int> SharedMemoryRegistry::Make(uint64_t segment, const std::string& job_id,
                                               uint64_t drop_mark, int worker,
                                               int64_t push_floats, int64_t pull_floats) {
  const int64_t bytes = (push_floats + pull_floats) * static_cast<int64_t>(sizeof(float));
  {
    absl::MutexLock lock(&mu_);
    if (segments_.contains(segment)) return absl::AlreadyExistsError("segment id taken");
    absl::Status allowed = CheckJobLocked(job_id, drop_mark);
    if (!allowed.ok()) return allowed;
    DropOldestLocked(job_id, worker);
    absl::Status room = CheckRoomLocked(bytes);
    if (!room.ok()) return room;
    bytes_ += bytes;  // Reserved before the segment exists, so that two makes cannot both pass.
  }
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> created =
      SharedMemorySegment::Create(bytes, "ps-shared-memory");
  const int fd = created.ok() ? fcntl((*created)->fd(), F_DUPFD_CLOEXEC, 0) : -1;
  absl::MutexLock lock(&mu_);
  // The job may have been deleted while the segment was made, outside mu_.
  const absl::Status allowed = fd < 0 ? absl::OkStatus() : CheckJobLocked(job_id, drop_mark);
  if (fd < 0 || !allowed.ok()) {
    bytes_ -= bytes;
    if (fd >= 0) close(fd);
    if (!allowed.ok()) return allowed;
    return created.ok() ? absl::InternalError("duplicating a segment's descriptor")
                        : created.status();
  }
  DropOldestLocked(job_id, worker);  // Concurrent makes for the worker may have filled its room.
  segments_[segment] = Entry{job_id, worker, push_floats,
                             std::shared_ptr<const SharedMemorySegment>(*std::move(created))};
  by_worker_[std::make_pair(job_id, worker)].push_back(segment);
  return fd;
}

absl::StatusOr<SharedMemoryRegistry::Region> SharedMemoryRegistry::Find(uint64_t segment,
                                                                       const std::string& job_id,
                                                                       int worker) const {
  absl::MutexLock lock(&mu_);
  auto it = segments_.find(segment);
  if (it == segments_.end()) {
    return absl::UnavailableError(absl::StrCat(
        "shared memory segment ", segment,
        " is not open on this ps (it restarted, the job or worker left, or the worker opened "
        "others since): send the tensor in the request, or open a segment again "
        "(OpenSharedMemory)"));
  }
  const Entry& entry = it->second;
  if (entry.job_id != job_id || entry.worker != worker) {
    return absl::PermissionDeniedError(absl::StrCat(
        "shared memory segment ", segment, " belongs to another worker: a worker names only "
        "the segment this ps opened for it"));
  }
  const int64_t floats = entry.segment->size() / static_cast<int64_t>(sizeof(float));
  return Region{entry.segment, entry.segment->Floats(0, entry.push_floats),
                entry.segment->Floats(entry.push_floats, floats - entry.push_floats)};
}

void SharedMemoryRegistry::DropWorker(const std::string& job_id, int worker) {
  absl::MutexLock lock(&mu_);
  auto it = by_worker_.find(std::make_pair(job_id, worker));
  if (it == by_worker_.end()) return;
  const std::deque<uint64_t> doomed = it->second;
  for (uint64_t id : doomed) EraseLocked(id);
}

void SharedMemoryRegistry::DropJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  for (auto it = dropped_jobs_.begin(); it != dropped_jobs_.end();) {
    if (now - it->second.at > kDropsKept) {
      dropped_jobs_.erase(it++);
    } else {
      ++it;
    }
  }
  dropped_jobs_[job_id] = Dropped{++drops_, now};
  std::vector<uint64_t> doomed;
  for (const auto& [id, entry] : segments_) {
    if (entry.job_id == job_id) doomed.push_back(id);
  }
  for (uint64_t id : doomed) EraseLocked(id);
}

int64_t SharedMemoryRegistry::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

int SharedMemoryRegistry::segments() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(segments_.size());
}

void SharedMemoryRegistry::DropOldestLocked(const std::string& job_id, int worker) {
  auto it = by_worker_.find(std::make_pair(job_id, worker));
  while (it != by_worker_.end() && it->second.size() >= kSegmentsPerWorker) {
    EraseLocked(it->second.front());
    it = by_worker_.find(std::make_pair(job_id, worker));
  }
}

void SharedMemoryRegistry::EraseLocked(uint64_t segment) {
  auto it = segments_.find(segment);
  if (it == segments_.end()) return;
  bytes_ -= it->second.segment->size();
  auto owned = by_worker_.find(std::make_pair(it->second.job_id, it->second.worker));
  if (owned != by_worker_.end()) {
    std::deque<uint64_t>& ids = owned->second;
    ids.erase(std::find(ids.begin(), ids.end(), segment));
    if (ids.empty()) by_worker_.erase(owned);
  }
  segments_.erase(it);
}

}  // namespace ps
