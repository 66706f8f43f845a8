// One thread that runs file work (checkpoint writes, restores) in the order it is given, off
// the threads that serve RPCs.
#ifndef PS_SERVER_IO_THREAD_H_
#define PS_SERVER_IO_THREAD_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ps {

// Thread-safe.
class IoThread {
 public:
  IoThread();
  // Runs what was given before, then ends the thread.
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  void Schedule(std::function<void()> work) ABSL_LOCKS_EXCLUDED(mu_);
  // Works given and not yet finished.
  int pending() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run();

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: starts once the members above exist.
};

}  // namespace ps

#endif  // PS_SERVER_IO_THREAD_H_
