#include "server/deadline_timer.h"

namespace ps {

DeadlineTimer::DeadlineTimer(const DeadlineTimerOptions& options)
    : clock_(options.clock), thread_([this] { Run(); }) {}

DeadlineTimer::~DeadlineTimer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

uint64_t DeadlineTimer::Schedule(absl::Time deadline, std::function<void()> callback) {
  absl::MutexLock lock(&mu_);
  uint64_t handle = next_handle_++;
  pending_.emplace(std::make_pair(deadline, handle), std::move(callback));
  deadline_by_handle_.emplace(handle, deadline);
  return handle;
}

void DeadlineTimer::Cancel(uint64_t handle) {
  absl::MutexLock lock(&mu_);
  auto it = deadline_by_handle_.find(handle);
  if (it == deadline_by_handle_.end()) return;
  pending_.erase(std::make_pair(it->second, handle));
  deadline_by_handle_.erase(it);
}

void DeadlineTimer::Run() {
  absl::MutexLock lock(&mu_);
  while (true) {
    absl::Time wake = pending_.empty() ? absl::InfiniteFuture() : pending_.begin()->first.first;
    // Also wakes when Schedule adds an earlier deadline than `wake`, so that it is waited for.
    auto due_earlier_or_stopping = [this, wake]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (stopping_) return true;
      if (pending_.empty()) return false;
      absl::Time first = pending_.begin()->first.first;
      return first < wake || first <= clock_->Now();
    };
    clock_->AwaitWithDeadline(&mu_, absl::Condition(&due_earlier_or_stopping), wake);
    if (stopping_) return;
    if (pending_.empty() || pending_.begin()->first.first > clock_->Now()) continue;
    auto due = pending_.begin();
    std::function<void()> callback = std::move(due->second);
    deadline_by_handle_.erase(due->first.second);
    pending_.erase(due);
    // Released by hand (clang's analysis checks the pair, --config=thread_safety).
    mu_.Unlock();
    callback();  // It may arm or cancel deadlines.
    mu_.Lock();
  }
}

}  // namespace ps
