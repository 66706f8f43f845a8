// For tests that kill and restart tasks: a cluster of ps_server and ps_worker processes on free
// ports of 127.0.0.1, described by a ClusterSpec file, each start of a task logging to a file of
// its own. Ps i keeps its checkpoints in `<dir>/checkpoints-<i>`.
#ifndef PS_TESTS_DAEMON_CLUSTER_H_
#define PS_TESTS_DAEMON_CLUSTER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/process/subprocess.h"

namespace ps {

// Not thread-safe.
class DaemonCluster {
 public:
  // Starts every task ("ps:0", ..., "worker:0", ...) with files under `dir`.
  static absl::StatusOr<std::unique_ptr<DaemonCluster>> Start(const std::string& dir, int num_ps,
                                                              int num_workers);
  // Stops every task still running (SIGTERM, then SIGKILL after 20 s).
  ~DaemonCluster();

  const std::string& spec_path() const { return spec_path_; }
  const std::vector<std::string>& tasks() const { return tasks_; }
  std::string checkpoint_dir(int ps) const;

  // Adds `more` workers after the cluster's own, on free ports, listed with the others in a
  // grown ClusterSpec file (docs/elastic.md "A ClusterSpec that grows"), whose path it returns.
  // Starts none: StartTask starts each, with the grown file.
  absl::StatusOr<std::string> Grow(int more);

  // Starts `task` (again, after Kill), on its address of the ClusterSpec (a worker added by
  // Grow: of the grown one).
  absl::Status StartTask(const std::string& task);
  // kill -9 of `task`; returns once it has ended (false if it did not within 10 s).
  bool Kill(const std::string& task);
  // Sends `signal` to `task` (SIGSTOP: it hangs, holding its connections open; SIGCONT: it goes
  // on); false if it is not running.
  bool Signal(const std::string& task, int signal);
  // Stops every task with SIGTERM (and SIGCONT, for a task stopped by Signal); false, naming them in `*stuck`, for those that did not end
  // within 20 s (they are then killed).
  bool Stop(std::vector<std::string>* stuck);

 private:
  DaemonCluster(std::string dir, std::string spec_path, std::vector<std::string> tasks,
                std::vector<std::string> ps, std::vector<std::string> workers)
      : dir_(std::move(dir)),
        spec_path_(std::move(spec_path)),
        tasks_(std::move(tasks)),
        ps_(std::move(ps)),
        workers_(std::move(workers)),
        first_grown_(static_cast<int>(workers_.size())) {}

  const std::string dir_, spec_path_;
  std::vector<std::string> tasks_;
  std::vector<std::string> ps_, workers_;  // Their addresses, quoted for JSON.
  const int first_grown_;                   // The first worker Grow added.
  std::string grown_spec_path_;
  std::map<std::string, Subprocess> daemons_;
  std::map<std::string, int> starts_;
};

}  // namespace ps

#endif  // PS_TESTS_DAEMON_CLUSTER_H_
