// Runs callbacks at deadlines on one thread of its own: how parked pulls end at their wait
// timeout without any gRPC thread blocking.
#ifndef PS_SERVER_DEADLINE_TIMER_H_
#define PS_SERVER_DEADLINE_TIMER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ps {

struct DeadlineTimerOptions {
  // Whose time the deadlines are on; a test passes a SimulatedClock and expires them by hand.
  Clock* clock = Clock::Real();
};

// Thread-safe. Callbacks run on the timer's thread, one at a time, and must not block.
class DeadlineTimer {
 public:
  explicit DeadlineTimer(const DeadlineTimerOptions& options = {});
  // Drops callbacks that have not run yet; waits for a running one.
  ~DeadlineTimer();

  // Runs `callback` when the clock reaches `deadline` (at once if it has passed). Returns a
  // handle for Cancel.
  uint64_t Schedule(absl::Time deadline, std::function<void()> callback);
  // Forgets a callback that has not started; no-op otherwise.
  void Cancel(uint64_t handle);

 private:
  void Run();

  Clock* const clock_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::pair<absl::Time, uint64_t>, std::function<void()>> pending_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, absl::Time> deadline_by_handle_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ps

#endif  // PS_SERVER_DEADLINE_TIMER_H_
