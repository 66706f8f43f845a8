#include "server/worker_leases.h"

#include <algorithm>


namespace ps {

WorkerLeases::WorkerLeases(int num_workers, absl::Duration lease, Clock* clock)
    : lease_(lease), clock_(clock), last_heard_ns_(num_workers), lost_(num_workers, false) {
  const int64_t start = absl::ToUnixNanos(clock_->Now());
  for (std::atomic<int64_t>& heard : last_heard_ns_) heard = start;
}

void WorkerLeases::Heard(int worker) {
  if (!enabled()) return;
  last_heard_ns_[worker].store(absl::ToUnixNanos(clock_->Now()), std::memory_order_relaxed);
}

void WorkerLeases::Rejoined(int worker) {
  absl::MutexLock lock(&mu_);
  lost_[worker] = false;
  last_heard_ns_[worker].store(absl::ToUnixNanos(clock_->Now()), std::memory_order_relaxed);
}

void WorkerLeases::HeardAll() {
  if (!enabled()) return;
  const int64_t now = absl::ToUnixNanos(clock_->Now());
  for (std::atomic<int64_t>& heard : last_heard_ns_) heard.store(now, std::memory_order_relaxed);
}

void WorkerLeases::Forgive(absl::Duration pause) {
  if (!enabled()) return;
  const int64_t now = absl::ToUnixNanos(clock_->Now());
  const int64_t pause_ns = absl::ToInt64Nanoseconds(pause);
  for (std::atomic<int64_t>& heard : last_heard_ns_) {
    int64_t last = heard.load(std::memory_order_relaxed);
    // A sign heard meanwhile (Heard) is kept: the exchange fails and is made again from it.
    while (!heard.compare_exchange_weak(last, std::min(last + pause_ns, now),
                                        std::memory_order_relaxed)) {
    }
  }
}

bool WorkerLeases::lost(int worker) const {
  absl::MutexLock lock(&mu_);
  return lost_[worker];
}

void WorkerLeases::MarkLost(int worker) {
  absl::MutexLock lock(&mu_);
  lost_[worker] = true;
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
