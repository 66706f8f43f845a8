// One look at a whole running cluster: every task (up or not, and what it says of its process)
// and every job any task holds (each shard's statistics, each worker's latest progress). psctl
// top draws it in a terminal; psctl dashboard serves it as JSON to its status page.
#ifndef PS_CTL_CLUSTER_CLUSTER_SNAPSHOT_H_
#define PS_CTL_CLUSTER_CLUSTER_SNAPSHOT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ctl/cluster/cluster_client.h"
#include "ctl/cluster/job_timeline.h"
#include "ctl/job/job_figures.h"
#include "proto/ps_service.pb.h"
#include "proto/task.pb.h"
#include "proto/worker_service.pb.h"

namespace ps {

struct TaskSnapshot {
  std::string task;     // "ps:0".
  std::string address;  // "host:port", as the ClusterSpec has it.
  bool up = false;
  std::string error;    // Why it is not up (the daemon's or the transport's message).
  TaskInfo info;        // When up.
};

struct JobSnapshot {
  std::string job_id;
  std::string state;       // "RUNNING", "DONE", ... (the word of JobState).
  std::string state_line;  // JobState's whole line (ctl/cluster/cluster_status.h).
  std::vector<JobStats> shards;       // Of every ps that holds it, in ps order.
  std::vector<JobProgress> workers;   // Of every worker that has run it, in worker order.
  // A running traced job (JobSpec.trace), in a snapshot taken with timelines: the last seconds
  // of each task's trace (job_timeline.h); unset for any other.
  std::optional<std::vector<TaskTrace>> timeline;
};

struct ClusterSnapshot {
  int64_t time_ms = 0;  // When it was taken (Unix time).
  std::vector<TaskSnapshot> tasks;  // ps tasks, then workers, each in index order.
  std::vector<JobSnapshot> jobs;    // By job id.
};

// The job's figures as psctl's progress line has them (ctl/job/job_figures.h), over the time of
// the worker that has trained longest: the daemons do not know when psctl started the job.
JobFigures FiguresOf(const JobSnapshot& job);

// A worker's staleness over every shard of a job: counts[i] gradients applied with staleness i
// (the last: that many or more; trailing zeros cut), their sum, total and max.
struct WorkerStaleness {
  std::vector<int64_t> counts;
  int64_t max = 0;
  int64_t sum = 0;
  int64_t total = 0;
  double mean() const {
    return total > 0 ? static_cast<double>(sum) / static_cast<double>(total) : 0.0;
  }
};

// By worker, every worker any shard lists.
std::map<int, WorkerStaleness> StalenessByWorker(const std::vector<JobStats>& shards);

// Asks every task (one call each for its process, its jobs; one per job per ps for its
// statistics), each with the client's status_timeout. A task that does not answer is down, not
// an error.
// `timelines`: also the last seconds of each running traced job's trace (JobSnapshot.timeline),
// for the status page.
ClusterSnapshot TakeClusterSnapshot(const ClusterClient& client, bool timelines = false);

// The snapshot as JSON, for the status page:
//   {"time_ms", "tasks": [{"task", "address", "up", "error", "version", "pid", "uptime_seconds",
//    "cpu_seconds", "resident_bytes", "threads", "metrics_port", "device"}],
//    "jobs": [{"job_id", "state", "state_line", "mode",
//      "shards": [{"ps", "version", "step", "parked_pulls", "waiting_for": [worker...],
//                  "oldest_wait_seconds", "staleness_mean", "staleness_max", "bytes_received",
//                  "bytes_sent"}],
//      "workers": [{"worker", "state", "step", "global_step", "epoch", "loss",
//                   "examples_per_second", "compute_seconds", "pull_seconds", "push_seconds",
//                   "wait_seconds", "staleness_mean", "staleness_max",
//                   "staleness_counts": [n0, n1, ...]}],
//      "timeline": TimelineJson's, for a running traced job in a snapshot with timelines}]}
// A worker's staleness figures are its gradients' over every shard; staleness_counts[i] counts
// those applied with staleness i (the last entry: that many or more; trailing zeros cut).
std::string ClusterSnapshotJson(const ClusterSnapshot& snapshot);

}  // namespace ps

#endif  // PS_CTL_CLUSTER_CLUSTER_SNAPSHOT_H_
