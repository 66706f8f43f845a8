#include "server/worker_leases.h"

#include "absl/time/clock.h"

namespace ps {

WorkerLeases::WorkerLeases(int num_workers, absl::Duration lease, absl::Time start)
    : lease_(lease), last_heard_(num_workers, start), lost_(num_workers, false) {}

void WorkerLeases::Heard(int worker) {
  if (!enabled()) return;
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  last_heard_[worker] = now;
}

void WorkerLeases::Rejoined(int worker) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  lost_[worker] = false;
  last_heard_[worker] = now;
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
    if (lost_[w] || skip(w) || now - last_heard_[w] <= lease_) continue;
    lost_[w] = true;
    expired.push_back(w);
  }
  return expired;
}

}  // namespace ps
