// The cluster description, in TensorFlow's ClusterSpec JSON:
//
//   {"cluster": {"ps": ["h1:2222", "h2:2222"], "worker": ["h3:2222"]},
//    "task": {"type": "ps", "index": 0}}
//
// The bare form {"ps": [...], "worker": [...]} is accepted too, and TF_CONFIG holds the same
// JSON. Jobs are "ps" and "worker", both required and non-empty; every address is distinct.
// Every error names its source (the file, or TF_CONFIG), the field, and the fix.
#ifndef PS_COMMON_CLUSTER_SPEC_H_
#define PS_COMMON_CLUSTER_SPEC_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/file_system.h"
#include "proto/cluster.pb.h"

namespace ps {

inline constexpr absl::string_view kPsJob = "ps";
inline constexpr absl::string_view kWorkerJob = "worker";

// "ps:0".
std::string TaskName(const TaskId& task);

// Parses the --task flag's "TYPE:INDEX" form ("ps:0", "worker:3"). Checks the syntax and the
// job name only; ClusterSpec::CheckTask checks the index against a cluster.
absl::StatusOr<TaskId> ParseTaskFlag(absl::string_view value);

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

  // The task named by the JSON's "task" field, if it had one.
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

  // TensorFlow's form, with a "task" field when `task` is given; parses back to an equal spec.
  std::string ToJson(const std::optional<TaskId>& task = std::nullopt) const;

 private:
  ClusterSpec() = default;

  std::map<std::string, std::vector<std::string>, std::less<>> jobs_;
  std::optional<TaskId> task_;
};

// What a daemon runs as: the whole cluster and its own task in it.
struct ClusterConfig {
  ClusterSpec cluster;
  TaskId task;
};

// Loads the cluster from the file `cluster_spec_path` when it is non-empty, else from
// `tf_config` (the value of the TF_CONFIG environment variable, or null).
absl::StatusOr<ClusterSpec> LoadClusterSpec(const std::string& cluster_spec_path,
                                            const char* tf_config);

// Resolves a daemon's configuration from its flags, the TensorFlow way: the cluster comes
// as LoadClusterSpec says. The task comes from `task_flag` ("ps:0") when
// it is non-empty, else from the JSON's "task" field. The task is checked against the cluster.
absl::StatusOr<ClusterConfig> ResolveClusterConfig(const std::string& cluster_spec_path,
                                                   const std::string& task_flag,
                                                   const char* tf_config);

}  // namespace ps

#endif  // PS_COMMON_CLUSTER_SPEC_H_
