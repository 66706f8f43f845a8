// A whole cluster on this machine (psctl local): ps_server and ps_worker processes on free
// ports of 127.0.0.1, their ClusterSpec and logs in a directory. Every process it started is
// stopped by Stop() or the destructor, whatever happened before.
#ifndef PS_CTL_CLUSTER_LOCAL_CLUSTER_H_
#define PS_CTL_CLUSTER_LOCAL_CLUSTER_H_

#include <filesystem>
#include <map>
#include <ostream>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/cluster/cluster_spec.h"
#include "common/process/subprocess.h"
#include "common/security/transport_security.h"
#include "proto/job.pb.h"

namespace ps {

struct LocalClusterOptions {
  int num_ps = 2;
  int num_workers = 2;
  std::string dir;             // cluster.json and one log per daemon go here.
  std::string ps_server_path;  // The daemons' binaries.
  std::string ps_worker_path;
  std::string device = "auto";  // Each worker's --device.
  // Each worker's --compute_threads; 0: the machine's cores split evenly between the workers.
  int compute_threads = 0;
  // Each ps's --checkpoint_dir is "<checkpoint_dir>/ps-<i>" (a disk of its own, as on
  // separate hosts), or with `shared_checkpoint_dir` <checkpoint_dir> itself (a file system
  // every host mounts: a job then resumes on another number of ps); "": none.
  std::string checkpoint_dir;
  bool shared_checkpoint_dir = false;
  // The daemons' --tls_* flags: psctl's own (each host is this one).
  TransportSecurity security = ProcessTransportSecurity();
  // More flags for every daemon: psctl's token files (TokenFileArgs).
  std::vector<std::string> daemon_args;
  // Each worker's --data_root: the directories its jobs' data files are in (DataDirectories).
  std::vector<std::string> data_roots;
  // Every daemon serves /metrics on a free port of its own (--metrics_port=0); see metrics_port().
  bool metrics = false;
  // A daemon that dies (killed, or a non-zero exit) while the cluster runs is started again on
  // its address, up to this many times each, as a supervisor would (so that a job survives the
  // loss of a task: recovery for a ps, rejoining for a worker); said on `out`. 0: never.
  int max_restarts = 3;
  std::ostream* out = nullptr;  // Where restarts are said; null: nowhere.
};

// A ClusterSpec of `num_ps` ps and `num_workers` worker tasks on 127.0.0.1, the tasks on
// `ports` in that order (ps first). REQUIRES: ports.size() == num_ps + num_workers.
absl::StatusOr<ClusterSpec> LoopbackCluster(int num_ps, int num_workers,
                                            const std::vector<int>& ports);

// The directories, absolute, of the data files `spec` names: what a local cluster's workers
// may read to run it.
std::vector<std::string> DataDirectories(const JobSpec& spec);

class LocalCluster {
 public:
  // Starts the daemons and waits until each listens; on failure stops those started and says
  // which one failed, with the end of its log.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  ~LocalCluster();

  const ClusterSpec& cluster() const { return cluster_; }
  std::string spec_path() const { return options_.dir + "/cluster.json"; }
  // The /metrics port of task `index` of `job` (kPsJob, kWorkerJob), on 127.0.0.1; 0 without
  // LocalClusterOptions::metrics. REQUIRES: the task is in cluster().
  int metrics_port(absl::string_view job, int index) const;

  // Ends the supervision, then SIGTERM to every daemon, then SIGKILL to those still running
  // after `grace`. Idempotent.
  void Stop(absl::Duration grace = absl::Seconds(10)) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  LocalCluster(LocalClusterOptions options, ClusterSpec cluster)
      : options_(std::move(options)), cluster_(std::move(cluster)) {}

  // Every 200 ms until Stop: starts again each daemon that died (LocalClusterOptions).
  void Supervise() ABSL_LOCKS_EXCLUDED(mu_);

  const LocalClusterOptions options_;
  const ClusterSpec cluster_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  struct Daemon {
    Subprocess process;
    std::string task;               // "ps:0".
    std::vector<std::string> argv;  // To start it again.
    int restarts = 0;
  };
  std::vector<Daemon> daemons_ ABSL_GUARDED_BY(mu_);
  std::thread supervisor_;
  // By job, in index order; empty without LocalClusterOptions::metrics.
  std::map<std::string, std::vector<int>, std::less<>> metrics_ports_;
};

// The path of a daemon binary beside this program: in Bazel's layout (bazel-bin/ctl/psctl ->
// bazel-bin/server/ps_server for "server/ps_server"), else in the same directory, as a release
// installs them (/usr/bin/psctl -> /usr/bin/ps_server); `relative_path` unchanged when neither
// exists.
std::string SiblingBinary(const std::string& relative_path);
// The same for a program at `self`.
std::string SiblingBinaryOf(const std::filesystem::path& self, const std::string& relative_path);

}  // namespace ps

#endif  // PS_CTL_CLUSTER_LOCAL_CLUSTER_H_
