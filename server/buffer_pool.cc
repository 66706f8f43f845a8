#include "server/buffer_pool.h"

namespace ps {

std::shared_ptr<BufferPool> BufferPool::Create(size_t max_free) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_free));
}

std::shared_ptr<std::vector<float>> BufferPool::Acquire(size_t size) {
  std::unique_ptr<std::vector<float>> buffer;
  {
    absl::MutexLock lock(&mu_);
    // Prefer a buffer that already has the capacity, so that no page is touched afresh.
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i]->capacity() >= size) {
        buffer = std::move(free_[i]);
        free_[i] = std::move(free_.back());
        free_.pop_back();
        break;
      }
    }
  }
  if (buffer == nullptr) buffer = std::make_unique<std::vector<float>>();
  buffer->resize(size);
  std::weak_ptr<BufferPool> pool = weak_from_this();
  return std::shared_ptr<std::vector<float>>(buffer.release(), [pool](std::vector<float>* b) {
    if (std::shared_ptr<BufferPool> owner = pool.lock()) {
      owner->Release(b);
    } else {
      delete b;
    }
  });
}

void BufferPool::Release(std::vector<float>* buffer) {
  std::unique_ptr<std::vector<float>> owned(buffer);
  absl::MutexLock lock(&mu_);
  if (free_.size() < max_free_) free_.push_back(std::move(owned));
}

}  // namespace ps
