// One task at a time on a thread of its own: the trainer's communication for a step runs here
// while the next step computes (DownpourSpec.overlap_communication).
#ifndef PS_WORKER_BACKGROUND_TASK_H_
#define PS_WORKER_BACKGROUND_TASK_H_

#include <functional>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace ps {

// Not thread-safe: one owner calls Start and Wait. The thread starts with the object and
// lives until it is destroyed; the destructor waits for a task in flight.
class BackgroundTask {
 public:
  BackgroundTask();
  ~BackgroundTask();
  BackgroundTask(const BackgroundTask&) = delete;
  BackgroundTask& operator=(const BackgroundTask&) = delete;

  // Runs `task` on the background thread. REQUIRES: !busy() (Wait for the previous one first).
  void Start(std::function<absl::Status()> task);
  // Whether a task was started and not yet waited for.
  bool busy() const { return busy_; }
  // Blocks until the started task has returned, and returns its status; OK when none was
  // started.
  absl::Status Wait();

 private:
  void Loop();

  bool busy_ = false;  // The owner's view: Start called, Wait not yet.
  absl::Mutex mu_;
  std::function<absl::Status()> task_ ABSL_GUARDED_BY(mu_);  // Set while one waits to run.
  std::optional<absl::Status> result_ ABSL_GUARDED_BY(mu_);  // Set when it has returned.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ps

#endif  // PS_WORKER_BACKGROUND_TASK_H_
