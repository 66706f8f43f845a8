// The seam between the code and the passing of time, as LevelDB's Env: code that reads the time,
// sleeps or waits for a deadline takes a Clock, so that tests run it on a SimulatedClock
// (common/testing/simulated_clock.h) and advance time by hand instead of waiting.
#ifndef PS_COMMON_CLOCK_H_
#define PS_COMMON_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ps {

// Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;

  // The machine's clock (absl::Now and absl::SleepFor). Never null; never deleted.
  static Clock* Real();

  virtual absl::Time Now() = 0;
  virtual void SleepFor(absl::Duration duration) = 0;
  // Releases `mu` until `condition` holds or Now() reaches `deadline`, then takes it again.
  // Returns whether `condition` holds. As absl::Mutex::AwaitWithDeadline, on this clock's time.
  virtual bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& condition,
                                 absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
};

}  // namespace ps

#endif  // PS_COMMON_CLOCK_H_
