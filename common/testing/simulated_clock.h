// A Clock for tests whose time moves only when the test advances it: deadlines expire at once,
// with no real waiting.
#ifndef PS_COMMON_TESTING_SIMULATED_CLOCK_H_
#define PS_COMMON_TESTING_SIMULATED_CLOCK_H_

#include <atomic>
#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ps {

// Thread-safe.
class SimulatedClock : public Clock {
 public:
  explicit SimulatedClock(absl::Time start = absl::UnixEpoch() + absl::Hours(24));

  // Moves the time forward by `duration` and wakes the waiters whose deadline it reaches.
  // REQUIRES: `duration` >= 0; no mutex waiting on this clock is destroyed while Advance runs.
  void Advance(absl::Duration duration) ABSL_LOCKS_EXCLUDED(waiters_mu_);

  absl::Time Now() override;
  // Advances the clock by `duration` itself: a sleeper on a simulated clock never blocks.
  void SleepFor(absl::Duration duration) override;
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& condition, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_LOCKS_EXCLUDED(waiters_mu_) override;

 private:
  std::atomic<int64_t> now_ns_;  // Nanoseconds since the Unix epoch.
  // Taken after a waiter's mutex, never before it.
  absl::Mutex waiters_mu_;
  // The mutexes of the threads in AwaitWithDeadline, with how many wait on each.
  std::map<absl::Mutex*, int> waiters_ ABSL_GUARDED_BY(waiters_mu_);
};

}  // namespace ps

#endif  // PS_COMMON_TESTING_SIMULATED_CLOCK_H_
