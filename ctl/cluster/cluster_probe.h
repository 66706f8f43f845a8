// Checks a running cluster against its ClusterSpec before psctl sends it work: every task
// reachable, healthy (grpc.health.v1), and of the role the spec gives it.
#ifndef PS_CTL_CLUSTER_CLUSTER_PROBE_H_
#define PS_CTL_CLUSTER_CLUSTER_PROBE_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/cluster/cluster_spec.h"

namespace ps {

// One line per problem, naming the task and its address and saying what to do; empty when
// the cluster is ready. Tasks are probed in parallel, each within `timeout`. With
// `workers_not_ready`, the workers with a problem are listed there too, in order. With
// `wrong_roles`, how many problems are a daemon of the other role at a task's address (a
// ps_server where the spec says a worker, or the other way): the spec or the daemons' placement
// is wrong, which waiting does not mend.
std::vector<std::string> ProbeCluster(const ClusterSpec& cluster,
                                      absl::Duration timeout = absl::Seconds(5),
                                      std::vector<int>* workers_not_ready = nullptr,
                                      int* wrong_roles = nullptr);

}  // namespace ps

#endif  // PS_CTL_CLUSTER_CLUSTER_PROBE_H_
