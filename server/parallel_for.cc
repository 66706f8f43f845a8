#include "server/parallel_for.h"

#include <algorithm>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"

namespace ps {
namespace {

// Helper threads that run queued tasks, one fewer than the cores. Never destroyed: its threads
// live as long as the process.
class Pool {
 public:
  static Pool& Get() {
    static Pool* pool = new Pool(std::max(1u, std::thread::hardware_concurrency()) - 1);
    return *pool;
  }

  int size() const { return static_cast<int>(threads_.size()); }

  void Run(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }

 private:
  explicit Pool(unsigned threads) {
    for (unsigned i = 0; i < threads; ++i) {
      threads_.emplace_back([this] { Loop(); });
      threads_.back().detach();
    }
  }

  void Loop() ABSL_LOCKS_EXCLUDED(mu_) {
    while (true) {
      std::function<void()> task;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](std::deque<std::function<void()>>* tasks) { return !tasks->empty(); }, &tasks_));
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

void ParallelFor(int64_t n, int64_t min_grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  Pool& pool = Pool::Get();
  const int64_t parts =
      std::max<int64_t>(1, std::min<int64_t>(pool.size() + 1, n / std::max<int64_t>(1, min_grain)));
  if (parts == 1) {
    fn(0, n);
    return;
  }
  // Ranges of whole 16-float blocks (64 bytes: a cache line each), so that no two threads
  // write one line.
  const int64_t block = 16;
  const int64_t blocks = (n + block - 1) / block;
  const int64_t per_part = (blocks + parts - 1) / parts * block;
  absl::BlockingCounter done(static_cast<int>(parts - 1));
  for (int64_t part = 1; part < parts; ++part) {
    const int64_t begin = std::min(n, part * per_part);
    const int64_t end = std::min(n, begin + per_part);
    pool.Run([&fn, &done, begin, end] {
      if (begin < end) fn(begin, end);
      done.DecrementCount();
    });
  }
  fn(0, std::min(n, per_part));
  done.Wait();
}

}  // namespace ps
