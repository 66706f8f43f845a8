#include "common/testing/simulated_clock.h"

#include <vector>

namespace ps {

SimulatedClock::SimulatedClock(absl::Time start) : now_ns_(absl::ToUnixNanos(start)) {}

absl::Time SimulatedClock::Now() { return absl::FromUnixNanos(now_ns_.load()); }

void SimulatedClock::SleepFor(absl::Duration duration) { Advance(duration); }

void SimulatedClock::Advance(absl::Duration duration) {
  std::vector<absl::Mutex*> waiters;
  {
    absl::MutexLock lock(&waiters_mu_);
    now_ns_ += absl::ToInt64Nanoseconds(duration);
    for (const auto& [mu, count] : waiters_) waiters.push_back(mu);
  }
  // absl::Mutex evaluates its waiters' conditions when it is released: taking and releasing
  // each waiter's mutex makes it see the new time.
  for (absl::Mutex* mu : waiters) {
    mu->Lock();
    mu->Unlock();
  }
}

bool SimulatedClock::AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& condition,
                                       absl::Time deadline) {
  {
    absl::MutexLock lock(&waiters_mu_);
    ++waiters_[mu];
  }
  auto done = [this, &condition, deadline] { return condition.Eval() || Now() >= deadline; };
  mu->Await(absl::Condition(&done));
  {
    absl::MutexLock lock(&waiters_mu_);
    if (--waiters_[mu] == 0) waiters_.erase(mu);
  }
  return condition.Eval();
}

}  // namespace ps
