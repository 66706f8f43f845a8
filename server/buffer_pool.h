// Reusable float buffers for the ps hot path (push scratch space, pull snapshots), so that
// large transfers do not page-fault on freshly allocated memory every time.
#ifndef PS_SERVER_BUFFER_POOL_H_
#define PS_SERVER_BUFFER_POOL_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ps {

// Thread-safe. Buffers handed out return to the pool when their last shared_ptr goes, even
// after the pool itself is gone (then they are freed).
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Keeps at most `max_free` idle buffers.
  static std::shared_ptr<BufferPool> Create(size_t max_free = 8);

  // A buffer of exactly `size` floats with unspecified contents.
  std::shared_ptr<std::vector<float>> Acquire(size_t size);

 private:
  explicit BufferPool(size_t max_free) : max_free_(max_free) {}
  void Release(std::vector<float>* buffer);

  const size_t max_free_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<std::vector<float>>> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_BUFFER_POOL_H_
