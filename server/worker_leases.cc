#include "server/worker_leases.h"

#include <algorithm>

namespace ps {

WorkerLeases::WorkerLeases(int num_workers, absl::Duration lease, Clock* clock)
    : lease_(lease), clock_(clock) {
  absl::MutexLock lock(&mu_);
  last_heard_ns_.assign(num_workers, absl::ToUnixNanos(clock_->Now()));
  lost_.assign(num_workers, false);
}

void WorkerLeases::Heard(int worker) {
  if (!enabled()) return;
  const int64_t now = absl::ToUnixNanos(clock_->Now());
  absl::MutexLock lock(&mu_);
  last_heard_ns_[worker] = now;
}

void WorkerLeases::Rejoined(int worker) {
  const int64_t now = absl::ToUnixNanos(clock_->Now());
  absl::MutexLock lock(&mu_);
  lost_[worker] = false;
  last_heard_ns_[worker] = now;
}

void WorkerLeases::HeardAll() {
  if (!enabled()) return;
  const int64_t now = absl::ToUnixNanos(clock_->Now());
  absl::MutexLock lock(&mu_);
  std::fill(last_heard_ns_.begin(), last_heard_ns_.end(), now);
}

void WorkerLeases::Forgive(absl::Duration pause) {
  if (!enabled()) return;
  const int64_t now = absl::ToUnixNanos(clock_->Now());
  const int64_t pause_ns = absl::ToInt64Nanoseconds(pause);
  absl::MutexLock lock(&mu_);
  for (int64_t& heard : last_heard_ns_) heard = std::min(heard + pause_ns, now);
}

bool WorkerLeases::lost(int worker) const {
  absl::MutexLock lock(&mu_);
  return lost_[worker];
}

void WorkerLeases::MarkLost(int worker) {
  absl::MutexLock lock(&mu_);
  lost_[worker] = true;
}

void WorkerLeases::AddWorkers(int num_workers) {
  const int64_t now = absl::ToUnixNanos(clock_->Now());
  absl::MutexLock lock(&mu_);
  last_heard_ns_.resize(num_workers, now);
  lost_.resize(num_workers, true);
}

std::vector<int> WorkerLeases::Expire(absl::Time now, const std::function<bool(int)>& skip) {
  std::vector<int> expired;
  if (!enabled()) return expired;
  absl::MutexLock lock(&mu_);
  for (int w = 0; w < static_cast<int>(lost_.size()); ++w) {
    const absl::Time heard = absl::FromUnixNanos(last_heard_ns_[w]);
    if (lost_[w] || skip(w) || now - heard <= lease_) continue;
    lost_[w] = true;
    expired.push_back(w);
  }
  return expired;
}

}  // namespace ps
