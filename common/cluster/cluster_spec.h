// The cluster description, in TensorFlow's ClusterSpec JSON:
//
//   {"cluster": {"ps": ["h1:2222", "h2:2222"], "worker": ["h3:2222"]},
//    "task": {"type": "ps", "index": 0}}
//
// The bare form {"ps": [...], "worker": [...]} is accepted too, and TF_CONFIG holds the same
// JSON. Jobs are "ps" and "worker", both required and non-empty; every address is distinct.
// Every error names its source (the file, or TF_CONFIG), the field, and the fix.
//
// Kubeflow's TFJob: the training operator writes each replica's TF_CONFIG in TensorFlow's form,
// with a job per replica type in lower case, "chief", "master" and "evaluator" included, and
// "environment": "cloud". Those jobs run no daemon here: the form's "cluster" may list them and
// its "task" may name them (so psctl, run as the chief, reads its TF_CONFIG), but the cluster is
// its ps and worker jobs alone, and a daemon refuses to run as one (ResolveClusterConfig).
#ifndef PS_COMMON_CLUSTER_CLUSTER_SPEC_H_
#define PS_COMMON_CLUSTER_CLUSTER_SPEC_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cluster/environment.h"
#include "common/file_system.h"
#include "common/cluster/slurm_cluster.h"
#include "proto/cluster.pb.h"

namespace ps {

inline constexpr absl::string_view kPsJob = "ps";
inline constexpr absl::string_view kWorkerJob = "worker";
// A TFJob's replica types that run no daemon here (see above). The chief (TF 1's "master") is the
// replica that runs `psctl submit`; there is no evaluator: worker 0 evaluates (eval_interval).
inline constexpr absl::string_view kChiefJob = "chief";
inline constexpr absl::string_view kMasterJob = "master";
inline constexpr absl::string_view kEvaluatorJob = "evaluator";

// "ps:0".
std::string TaskName(const TaskId& task);

// Parses the --task flag's "TYPE:INDEX" form ("ps:0", "worker:3"). Checks the syntax and the
// job name only; ClusterSpec::CheckTask checks the index against a cluster.
absl::StatusOr<TaskId> ParseTaskFlag(absl::string_view value);

// The task of a StatefulSet's pod from its host name, `<name>-<ordinal>`: the ordinal is the
// index, and the name (or its last "-" part: "mnist-ps-3") is the job, "ps" or "worker". So
// "ps-3" is ps:3 and "mnist-worker-0" worker:0. A domain after the first "." is ignored. Errors
// (INVALID_ARGUMENT) say what the name lacks and how the StatefulSets must be named.
absl::StatusOr<TaskId> TaskFromHostname(absl::string_view hostname);

// An immutable, validated cluster. Cheap to copy for the sizes clusters have.
class ClusterSpec {
 public:
  // Parses and validates JSON text. `source` names where it came from ("cluster.json",
  // "TF_CONFIG") and starts every error message. Errors are INVALID_ARGUMENT.
  static absl::StatusOr<ClusterSpec> Parse(absl::string_view json_text, absl::string_view source);

  // Reads and parses a file through `fs`; a missing file is NOT_FOUND, naming the path.
  static absl::StatusOr<ClusterSpec> FromFile(const std::string& path,
                                              FileSystem* fs = FileSystem::Default());

  // Validates a cluster received over the wire, by the same rules as Parse.
  static absl::StatusOr<ClusterSpec> FromProto(const ClusterDef& cluster);

  // The task named by the JSON's "task" field, if it had one: a ps or worker task of this
  // cluster, or a TFJob's chief, master or evaluator (see above).
  const std::optional<TaskId>& task() const { return task_; }

  // The addresses of `job`'s tasks in index order; empty for a job the cluster lacks.
  const std::vector<std::string>& Tasks(absl::string_view job) const;
  int NumTasks(absl::string_view job) const { return static_cast<int>(Tasks(job).size()); }

  // OK when `task` names a job of this cluster and an index in range; else INVALID_ARGUMENT
  // saying what the cluster has.
  absl::Status CheckTask(const TaskId& task) const;

  // The address of `task`. REQUIRES: CheckTask(task).ok().
  const std::string& Address(const TaskId& task) const;

  ClusterDef ToProto() const;

  // OK when `grown` is this cluster, or this cluster with workers added after its own (a
  // ClusterSpec that grows: docs/elastic.md): the same ps tasks at the same addresses, and each of
  // this cluster's workers at its own address in `grown`. INVALID_ARGUMENT naming the first task
  // that differs otherwise.
  absl::Status CheckGrownInto(const ClusterSpec& grown) const;

  // TensorFlow's form, with a "task" field when `task` is given; parses back to an equal spec.
  // The cluster lists the ps and worker jobs, and the replicas of a TFJob's job when `task`
  // names one (a chief's TF_CONFIG).
  // Indented by `indent` spaces a level, or on one line when `indent` is negative.
  std::string ToJson(const std::optional<TaskId>& task = std::nullopt, int indent = 2) const;

 private:
  ClusterSpec() = default;

  std::map<std::string, std::vector<std::string>, std::less<>> jobs_;
  // The replicas TF_CONFIG lists for each of a TFJob's other jobs (chief, master, evaluator),
  // each as its JSON text: to check a "task" that names one, and for ToJson to write them back.
  std::map<std::string, std::vector<std::string>, std::less<>> tfjob_replicas_;
  std::optional<TaskId> task_;
};

// Where a process finds its cluster: the flags ps_server, ps_worker and psctl share
// (common/cluster/cluster_flags.h).
struct ClusterSource {
  std::string cluster_spec_path;  // --cluster_spec: a ClusterSpec file.
  std::string task_flag;          // --task ("ps:0"): overrides the task the cluster names.
  // --cluster_resolver: empty for the file, else TF_CONFIG; "slurm" for the Slurm job step this
  // process runs in (common/cluster/slurm_cluster.h), which excludes --cluster_spec.
  std::string resolver;
  SlurmClusterOptions slurm;  // --slurm_num_ps, --slurm_base_port: for "slurm".
  // --task_from_hostname: the task from `hostname` (TaskFromHostname), for a StatefulSet's pods;
  // excludes --task and --cluster_resolver=slurm.
  bool task_from_hostname = false;
  std::string hostname;  // This host's name (gethostname), or --task_hostname in tests.
};

// What a daemon runs as: the whole cluster and its own task in it.
struct ClusterConfig {
  ClusterSpec cluster;
  TaskId task;
  // Where the cluster and the task came from, for the log and messages: the file, "TF_CONFIG",
  // or the Slurm rank and the variables read.
  std::string origin;
  // Under Slurm, for a worker: which of its node's workers it is (0 for the first), by which it
  // picks a GPU (SlurmWorkerDevice).
  std::optional<int> node_worker_index;
};

// Loads the cluster `source` names, reading TF_CONFIG and Slurm's variables from `environment`:
// from the file source.cluster_spec_path when it is non-empty, else from TF_CONFIG; or with
// source.resolver "slurm", from the Slurm job step (the first source.slurm.num_ps ranks are the
// ps tasks, the rest the workers; common/cluster/slurm_cluster.h says how ranks get addresses).
absl::StatusOr<ClusterSpec> LoadClusterSpec(const ClusterSource& source,
                                            const Environment& environment);

// Resolves a daemon's configuration, the TensorFlow way: the cluster comes as LoadClusterSpec
// says. The task comes from source.task_flag ("ps:0") when it is non-empty, or from
// source.hostname with source.task_from_hostname ("ps-3" is ps:3), else from the JSON's "task"
// field, or under Slurm from SLURM_PROCID (ranks 0 to num_ps-1 are ps:0 and on, the rest worker:0
// and on). The task is checked against the cluster. A TFJob's chief or evaluator runs no daemon:
// naming one is FAILED_PRECONDITION, saying what the replica should run instead.
absl::StatusOr<ClusterConfig> ResolveClusterConfig(const ClusterSource& source,
                                                   const Environment& environment);

}  // namespace ps

#endif  // PS_COMMON_CLUSTER_CLUSTER_SPEC_H_
