#include "server/io_thread.h"

#include <utility>

namespace ps {

IoThread::IoThread() : thread_([this] { Run(); }) {}

IoThread::~IoThread() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void IoThread::Schedule(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(work));
}

int IoThread::pending() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size()) + running_;
}

void IoThread::Run() {
  while (true) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // Stopping, and all given has run.
      work = std::move(queue_.front());
      queue_.pop_front();
      running_ = 1;
    }
    work();
    absl::MutexLock lock(&mu_);
    running_ = 0;
  }
}

}  // namespace ps
