// Memory that a worker and a ps on one host both map, so that a tensor crosses between them with
// one copy in and one copy out instead of gRPC's and the kernel's (docs/shared_memory.md).
//
// The segment is an anonymous memory file (memfd): it has no name any other process could open;
// its creator hands its descriptor to the one peer it chose (descriptor_handout.h). Its size is
// sealed at creation, so that neither side can shrink it under the other, whose reads and writes
// would then fault (SIGBUS): a peer may write any bytes into the segment, never take it away.
#ifndef PS_COMMON_NET_SHARED_MEMORY_SEGMENT_H_
#define PS_COMMON_NET_SHARED_MEMORY_SEGMENT_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ps {

// Thread-compatible; the bytes themselves are shared with another process, which may change
// them at any time: read each value once, or copy out before checking.
class SharedMemorySegment {
 public:
  // A new segment of `bytes` (> 0) zeroed, its size sealed. `name` shows in /proc/PID/fd.
  // RESOURCE_EXHAUSTED where the kernel has no room, INVALID_ARGUMENT for a size <= 0.
  static absl::StatusOr<std::unique_ptr<SharedMemorySegment>> Create(int64_t bytes,
                                                                     const char* name);
  // Maps `fd` (taken over, closed on every path), a segment another process created: at least
  // `bytes` long and sealed against shrinking and growing, else FAILED_PRECONDITION (an
  // unsealed file could be cut short under this process).
  static absl::StatusOr<std::unique_ptr<SharedMemorySegment>> Map(int fd, int64_t bytes);

  // Unmaps it; a segment this process created also gives its pages back, even those the peer
  // still maps (the peer reads zeros from then on, and never faults).
  ~SharedMemorySegment();
  SharedMemorySegment(const SharedMemorySegment&) = delete;
  SharedMemorySegment& operator=(const SharedMemorySegment&) = delete;

  int fd() const { return fd_; }
  int64_t size() const { return size_; }
  // `count` floats from float `offset`. REQUIRES: within the segment.
  absl::Span<float> Floats(int64_t offset, int64_t count) const;
  // Whether floats [offset, offset + count) lie within the segment.
  bool Holds(int64_t offset, int64_t count) const;

 private:
  // The segment of `fd` mapped where `status` (of the checks before) is OK; else `fd` closed
  // and the error.
  static absl::StatusOr<std::unique_ptr<SharedMemorySegment>> MapOrClose(
      int fd, int64_t bytes, const absl::Status& status, bool created);
  SharedMemorySegment(int fd, void* address, int64_t size, bool created)
      : fd_(fd), address_(address), size_(size), created_(created) {}

  const int fd_;
  void* const address_;
  const int64_t size_;
  const bool created_;
};

}  // namespace ps

#endif  // PS_COMMON_NET_SHARED_MEMORY_SEGMENT_H_
