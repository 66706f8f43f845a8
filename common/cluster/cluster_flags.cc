#include "common/cluster/cluster_flags.h"

#include <limits.h>
#include <unistd.h>

#include <gflags/gflags.h>

DEFINE_string(cluster_resolver, "",
              "where the cluster comes from instead of --cluster_spec or TF_CONFIG: \"slurm\" "
              "for the Slurm job this runs in (its node list; the task from SLURM_PROCID)");
DEFINE_int32(slurm_num_ps, 1,
             "--cluster_resolver=slurm: how many of the job's tasks are ps tasks (the first "
             "ranks; the rest are workers)");
DEFINE_int32(slurm_base_port, 8888,
             "--cluster_resolver=slurm: a node's k-th task (SLURM_LOCALID k) listens on this "
             "port + k");

DEFINE_bool(task_from_hostname, false,
            "the task from this host's name, a StatefulSet pod's <name>-<ordinal>: ps-3 is ps:3, "
            "worker-0 (or mnist-worker-0) worker:0; instead of --task (deploy/kubernetes/)");
DEFINE_string(task_hostname, "",
              "--task_from_hostname: read this name instead of the host's (for tests)");

namespace ps {
namespace {

// gethostname(2), or "" when it fails (TaskFromHostname then says the name lacks an ordinal).
std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

ClusterSource ClusterSourceFromFlags(const std::string& cluster_spec, const std::string& task) {
  ClusterSource source;
  source.cluster_spec_path = cluster_spec;
  source.task_flag = task;
  source.resolver = FLAGS_cluster_resolver;
  source.slurm.num_ps = FLAGS_slurm_num_ps;
  source.slurm.base_port = FLAGS_slurm_base_port;
  source.task_from_hostname = FLAGS_task_from_hostname;
  if (source.task_from_hostname) {
    source.hostname = FLAGS_task_hostname.empty() ? HostName() : FLAGS_task_hostname;
  }
  return source;
}

}  // namespace ps
