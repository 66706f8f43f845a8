#include "server/worker_leases.h"

#include "absl/time/clock.h"

namespace ps {

WorkerLeases::WorkerLeases(int num_workers, absl::Duration lease, absl::Time start)
    : lease_(lease), last_heard_ns_(num_workers), lost_(num_workers, false) {
  for (std::atomic<int64_t>& heard : last_heard_ns_) heard = absl::ToUnixNanos(start);
}

void WorkerLeases::Heard(int worker) {
  if (!enabled()) return;
  last_heard_ns_[worker].store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed);
}

void WorkerLeases::Rejoined(int worker) {
  absl::MutexLock lock(&mu_);
  lost_[worker] = false;
  last_heard_ns_[worker].store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed);
}

bool WorkerLeases::lost(int worker) const {
  absl::MutexLock lock(&mu_);
  return lost_[worker];
}

std::vector<int> WorkerLeases::Expire(absl::Time now, const std::function<bool(int)>& skip) {
  std::vector<int> expired;
  if (!enabled()) return expired;
  absl::MutexLock lock(&mu_);
  for (int w = 0; w < static_cast<int>(lost_.size()); ++w) {
    const absl::Time heard =
        absl::FromUnixNanos(last_heard_ns_[w].load(std::memory_order_relaxed));
    if (lost_[w] || skip(w) || now - heard <= lease_) continue;
    lost_[w] = true;
    expired.push_back(w);
  }
  return expired;
}

}  // namespace ps
