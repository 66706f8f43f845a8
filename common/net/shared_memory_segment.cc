#include "common/net/shared_memory_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace ps {
namespace {

constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;

absl::Status ErrnoError(absl::string_view what) {
  const int error = errno;
  std::string message = absl::StrCat(what, ": ", std::strerror(error));
  if (error == ENOMEM || error == ENOSPC || error == EMFILE || error == ENFILE) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

absl::StatusOr<void*> MapShared(int fd, int64_t bytes) {
  void* address = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED,
                       fd, 0);
  if (address == MAP_FAILED) return ErrnoError("mmap of a shared memory segment");
  return address;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemorySegment>> SharedMemorySegment::Create(
    int64_t bytes, const char* name) {
  if (bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("a shared memory segment of ", bytes,
                                                   " bytes: its size must be positive"));
  }
  const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return ErrnoError("memfd_create");
  absl::Status status;
  if (ftruncate(fd, bytes) != 0) {
    status = ErrnoError(absl::StrCat("sizing a shared memory segment to ", bytes, " bytes"));
  } else if (fcntl(fd, F_ADD_SEALS, kSizeSeals | F_SEAL_SEAL) != 0) {
    status = ErrnoError("sealing a shared memory segment's size");
  }
  return MapOrClose(fd, bytes, status, /*created=*/true);
}

absl::StatusOr<std::unique_ptr<SharedMemorySegment>> SharedMemorySegment::Map(int fd,
                                                                              int64_t bytes) {
  struct stat info;
  absl::Status status;
  const int seals = fcntl(fd, F_GET_SEALS);
  if (fstat(fd, &info) != 0) {
    status = ErrnoError("fstat of a shared memory segment");
  } else if (seals < 0 || (seals & kSizeSeals) != kSizeSeals) {
    status = absl::FailedPreconditionError(
        "the shared memory segment's size is not sealed: its creator could cut it short under "
        "this process; not mapped");
  } else if (bytes <= 0 || info.st_size < bytes) {
    status = absl::FailedPreconditionError(absl::StrCat(
        "the shared memory segment holds ", info.st_size, " bytes, not the ", bytes, " expected"));
  }
  return MapOrClose(fd, bytes, status, /*created=*/false);
}

absl::StatusOr<std::unique_ptr<SharedMemorySegment>> SharedMemorySegment::MapOrClose(
    int fd, int64_t bytes, const absl::Status& status, bool created) {
  absl::StatusOr<void*> address = status.ok() ? MapShared(fd, bytes) : status;
  if (!address.ok()) {
    close(fd);
    return address.status();
  }
  return std::unique_ptr<SharedMemorySegment>(
      new SharedMemorySegment(fd, *address, bytes, created));
}

SharedMemorySegment::~SharedMemorySegment() {
  PCHECK(munmap(address_, static_cast<size_t>(size_)) == 0);
  // The creator frees the pages even where the peer still maps them (it reads zeros then), so
  // that a peer cannot keep memory the creator let go.
  if (created_) fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, size_);
  close(fd_);
}

bool SharedMemorySegment::Holds(int64_t offset, int64_t count) const {
  const int64_t floats = size_ / static_cast<int64_t>(sizeof(float));
  return offset >= 0 && count >= 0 && offset <= floats && count <= floats - offset;
}

absl::Span<float> SharedMemorySegment::Floats(int64_t offset, int64_t count) const {
  CHECK(Holds(offset, count)) << "floats [" << offset << ", +" << count << ") of a segment of "
                              << size_ << " bytes";
  return absl::MakeSpan(static_cast<float*>(address_) + offset, static_cast<size_t>(count));
}

}  // namespace ps
