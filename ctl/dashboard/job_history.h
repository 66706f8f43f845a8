// What the status page charts: for each job in psctl dashboard's snapshots, each worker's
// training loss and examples per second at each snapshot, over the last `points` snapshots (ten
// minutes at one a second), so that a page opened mid-run draws what came before it. A worker
// that has run no step has no values yet; one that has ended shows its last values once, then
// none (its line ends where it finished); a job no longer in a snapshot is forgotten.
// Thread-safe.
#ifndef PS_CTL_DASHBOARD_JOB_HISTORY_H_
#define PS_CTL_DASHBOARD_JOB_HISTORY_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/optional.h"
#include "ctl/cluster/cluster_snapshot.h"

namespace ps {

class JobHistory {
 public:
  explicit JobHistory(size_t points = 600) : points_(points) {}

  void Record(const ClusterSnapshot& snapshot) ABSL_LOCKS_EXCLUDED(mu_);

  // {"JOB": {"times": [seconds since the epoch, ...], "workers": {"0": {"loss": [...],
  // "examples_per_second": [...]}, ...}}, ...}: each worker's values at each time, null where it
  // had none.
  nlohmann::json Json() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Series {
    std::vector<absl::optional<double>> loss, examples_per_second;
    bool ended = false;  // Its last values are recorded: none from now on.
  };
  struct Job {
    std::vector<double> times;
    std::map<int, Series> workers;
  };

  const size_t points_;
  mutable absl::Mutex mu_;
  std::map<std::string, Job> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_CTL_DASHBOARD_JOB_HISTORY_H_
