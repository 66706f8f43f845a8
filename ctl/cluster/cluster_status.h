// psctl status: a report of every task of a cluster and, for one job, of its shards and workers.
#ifndef PS_CTL_CLUSTER_CLUSTER_STATUS_H_
#define PS_CTL_CLUSTER_CLUSTER_STATUS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/cluster/cluster_spec.h"
#include "proto/ps_service.pb.h"
#include "proto/worker_service.pb.h"

namespace ps {

// A report of every task (up or down, its jobs), and of `job_id` when given: each worker's
// step, each shard's version and step, the staleness summary, whom a barrier waits for, lost
// workers and checkpoints, and last the job's state across the cluster (JobState).
// `*unanswered`: why each task that did not answer did not (down, unreachable, or refusing this
// caller), or why no client could be made.
std::string ClusterStatus(const ClusterSpec& cluster, const std::string& job_id,
                          std::vector<absl::Status>* unanswered);

// What the tasks of a cluster say of one job.
struct JobSightings {
  int num_ps = 0;
  std::vector<std::string> shards_lost;  // "ps:1 is down (...)", "ps:0 does not hold it".
  std::vector<JobStats> shards;          // Of every ps that holds it.
  std::vector<JobProgress> workers;      // Of every worker that has run it.
};

// The job's state across the cluster, one line: "job J: STATE (why)". RECOVERING while some ps
// holds the job and another does not (it is down, or was started again and lost the job: the
// psctl that submitted the job rolls it back to its latest complete checkpoint once every ps
// is up), and while a run restored from a checkpoint has not yet applied an update. Else the
// workers': RUNNING while any runs, then FAILED if any failed, STOPPED if any was stopped,
// DONE when every one is. UNKNOWN when no task knows the job.
std::string JobState(const std::string& job_id, const JobSightings& seen);

}  // namespace ps

#endif  // PS_CTL_CLUSTER_CLUSTER_STATUS_H_
