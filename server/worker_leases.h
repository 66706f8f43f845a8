// Each worker's lease on a job (JobSpec.worker_lease_s): a worker the shard has not heard from
// for longer than the lease is lost, once, until it rejoins. ShardJob owns one and decides what
// a lost worker means for its consistency mode; this class only keeps the times. Thread-safe.
#ifndef PS_SERVER_WORKER_LEASES_H_
#define PS_SERVER_WORKER_LEASES_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ps {

class WorkerLeases {
 public:
  // `lease` <= 0: none (no worker is ever lost, and Heard reads no clock). Every lease runs
  // from now on `clock`, which must outlive this.
  WorkerLeases(int num_workers, absl::Duration lease, Clock* clock);

  bool enabled() const { return lease_ > absl::ZeroDuration(); }
  // A sign of `worker`'s life (a pull or push) now; it runs on every pull and push,
  // so it reads the clock and locks only when there are leases.
  void Heard(int worker) ABSL_LOCKS_EXCLUDED(mu_);
  // `worker` came back (a new incarnation): no longer lost, heard from now.
  void Rejoined(int worker) ABSL_LOCKS_EXCLUDED(mu_);
  // Every worker heard from now (the lost stay lost): a full lease each, from a copy of the
  // shard that starts serving it again after others served it (their signs never came here).
  void HeardAll() ABSL_LOCKS_EXCLUDED(mu_);
  // This process did not run for `pause` (stopped, its host paused): no worker could be heard
  // meanwhile, so that time counts as no worker's silence. Each worker's last sign moves
  // forward by `pause`, up to now.
  void Forgive(absl::Duration pause) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `worker`'s lease ran out and it has not rejoined.
  bool lost(int worker) const ABSL_LOCKS_EXCLUDED(mu_);
  // The workers not heard from for longer than the lease at `now`, lost from now on, in order;
  // each once. `skip(w)`: a worker not to judge (it left the job).
  std::vector<int> Expire(absl::Time now, const std::function<bool(int)>& skip)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Marks `worker` lost as Expire would (a replica applying its primary's decision).
  void MarkLost(int worker) ABSL_LOCKS_EXCLUDED(mu_);
  // The job grew to `num_workers`: each new worker is lost (out of the job) until it rejoins.
  // REQUIRES: num_workers >= the workers it has.
  void AddWorkers(int num_workers) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const absl::Duration lease_;
  Clock* const clock_;
  mutable absl::Mutex mu_;
  // Per worker: when it was last heard from, in Unix nanoseconds.
  std::vector<int64_t> last_heard_ns_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> lost_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_WORKER_LEASES_H_
