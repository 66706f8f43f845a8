// psctl status: a report of every task of a cluster and, for one job, of its shards and workers.
#ifndef PS_CTL_CLUSTER_STATUS_H_
#define PS_CTL_CLUSTER_STATUS_H_

#include <string>

#include "common/cluster_spec.h"

namespace ps {

// A report of every task (up or down, its jobs), and of `job_id` when given: each worker's
// step, each shard's version and step, the staleness summary, whom a barrier waits for, lost
// workers and checkpoints.
std::string ClusterStatus(const ClusterSpec& cluster, const std::string& job_id);

}  // namespace ps

#endif  // PS_CTL_CLUSTER_STATUS_H_
