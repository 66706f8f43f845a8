#include "tests/daemon_cluster.h"

#include <signal.h>

#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "tests/psctl_testing.h"

namespace ps {

absl::StatusOr<std::unique_ptr<DaemonCluster>> DaemonCluster::Start(const std::string& dir,
                                                                    int num_ps, int num_workers) {
  absl::StatusOr<std::vector<int>> ports = PickUnusedPorts(num_ps + num_workers);
  if (!ports.ok()) return ports.status();
  std::vector<std::string> tasks, ps, workers;
  for (int i = 0; i < num_ps + num_workers; ++i) {
    const std::string address = absl::StrCat("\"127.0.0.1:", (*ports)[i], "\"");
    if (i < num_ps) {
      ps.push_back(address);
      tasks.push_back(absl::StrCat("ps:", i));
    } else {
      workers.push_back(address);
      tasks.push_back(absl::StrCat("worker:", i - num_ps));
    }
  }
  const std::string spec_path = dir + "/cluster.json";
  std::ofstream(spec_path) << "{\"cluster\": {\"ps\": [" << absl::StrJoin(ps, ", ")
                           << "], \"worker\": [" << absl::StrJoin(workers, ", ") << "]}}";
  std::unique_ptr<DaemonCluster> cluster(new DaemonCluster(dir, spec_path, tasks, ps, workers));
  for (const std::string& task : tasks) {
    absl::Status started = cluster->StartTask(task);
    if (!started.ok()) return started;
  }
  return cluster;
}

DaemonCluster::~DaemonCluster() {
  std::vector<std::string> stuck;
  Stop(&stuck);
}

std::string DaemonCluster::checkpoint_dir(int ps) const {
  return absl::StrCat(dir_, "/checkpoints-", ps);
}

absl::StatusOr<std::string> DaemonCluster::Grow(int more) {
  absl::StatusOr<std::vector<int>> ports = PickUnusedPorts(more);
  if (!ports.ok()) return ports.status();
  for (int port : *ports) {
    tasks_.push_back(absl::StrCat("worker:", workers_.size()));
    workers_.push_back(absl::StrCat("\"127.0.0.1:", port, "\""));
  }
  grown_spec_path_ = dir_ + "/cluster-grown.json";
  std::ofstream(grown_spec_path_) << "{\"cluster\": {\"ps\": [" << absl::StrJoin(ps_, ", ")
                                  << "], \"worker\": [" << absl::StrJoin(workers_, ", ") << "]}}";
  return grown_spec_path_;
}

absl::Status DaemonCluster::StartTask(const std::string& task) {
  const bool is_ps = task.rfind("ps:", 0) == 0;
  const std::string index = task.substr(task.find(':') + 1);
  const bool grown = !is_ps && std::stoi(index) >= first_grown_;
  std::vector<std::string> argv = {is_ps ? kPsServer : kPsWorker,
                                   "--cluster_spec=" + (grown ? grown_spec_path_ : spec_path_),
                                   "--task=" + task};
  if (is_ps) {
    argv.push_back(absl::StrCat("--checkpoint_dir=", dir_, "/checkpoints-", index));
  } else {
    argv.push_back("--device=cpu");
  }
  absl::StatusOr<Subprocess> process = Subprocess::Start(
      argv, absl::StrCat(dir_, "/", is_ps ? "ps-" : "worker-", index, "-", starts_[task]++, ".log"));
  if (!process.ok()) return process.status();
  daemons_.insert_or_assign(task, *std::move(process));
  return absl::OkStatus();
}

bool DaemonCluster::Kill(const std::string& task) {
  auto it = daemons_.find(task);
  if (it == daemons_.end()) return false;
  it->second.Signal(SIGKILL);
  const bool ended = it->second.Wait(absl::Seconds(10)) == std::optional<int>(128 + SIGKILL);
  daemons_.erase(it);
  return ended;
}

bool DaemonCluster::Signal(const std::string& task, int signal) {
  auto it = daemons_.find(task);
  if (it == daemons_.end()) return false;
  it->second.Signal(signal);
  return true;
}

bool DaemonCluster::Stop(std::vector<std::string>* stuck) {
  for (auto& [task, daemon] : daemons_) {
    daemon.Signal(SIGTERM);
    daemon.Signal(SIGCONT);
  }
  for (auto& [task, daemon] : daemons_) {
    if (!daemon.Wait(absl::Seconds(20)).has_value()) stuck->push_back(task);
  }
  daemons_.clear();  // Kills and reaps any still running.
  return stuck->empty();
}

}  // namespace ps
