// The flags ps_server, ps_worker and psctl share for finding the cluster, beside each one's own
// --cluster_spec and --task: --cluster_resolver, --slurm_num_ps, --slurm_base_port,
// --task_from_hostname and --task_hostname (common/cluster/cluster_spec.h's ClusterSource says what
// each means).
#ifndef PS_COMMON_CLUSTER_CLUSTER_FLAGS_H_
#define PS_COMMON_CLUSTER_CLUSTER_FLAGS_H_

#include <string>

#include "common/cluster/cluster_spec.h"

namespace ps {

// The flags' values, with the binary's own --cluster_spec and --task; with --task_from_hostname,
// this host's name (gethostname) unless --task_hostname gives one.
ClusterSource ClusterSourceFromFlags(const std::string& cluster_spec, const std::string& task);

}  // namespace ps

#endif  // PS_COMMON_CLUSTER_CLUSTER_FLAGS_H_
