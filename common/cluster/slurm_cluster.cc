#include "common/cluster/slurm_cluster.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cluster/slurm_hostlist.h"

namespace ps {
namespace {

constexpr char kOutsideSlurm[] =
    "--cluster_resolver=slurm runs inside a Slurm job (sbatch, salloc or srun; "
    "deploy/slurm/ps_job.sbatch), or give --cluster_spec instead";

// The non-negative integer `name` holds, when it is set.
absl::StatusOr<std::optional<int>> ReadIndex(const Environment& environment,
                                             absl::string_view name) {
  const std::string* text = FindVariable(environment, name);
  if (text == nullptr) return std::optional<int>();
  int value = -1;
  bool digits = !text->empty();
  for (char c : *text) digits = digits && absl::ascii_isdigit(c);
  if (!digits || !absl::SimpleAtoi(*text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=\"", *text, "\" is not a non-negative integer"));
  }
  return std::optional<int>(value);
}

}  // namespace

absl::StatusOr<SlurmStep> ReadSlurmStep(const Environment& environment) {
  const bool in_step = FindVariable(environment, "SLURM_STEP_NODELIST") != nullptr;
  const absl::string_view nodelist_name = in_step ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
  const absl::string_view tasks_name =
      in_step ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  const std::string* nodelist = FindVariable(environment, nodelist_name);
  if (nodelist == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("SLURM_STEP_NODELIST and SLURM_JOB_NODELIST are unset: ", kOutsideSlurm));
  }
  const std::string* tasks_per_node = FindVariable(environment, tasks_name);
  if (tasks_per_node == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(nodelist_name, " is set but ", tasks_name,
                                                      " is not: Slurm sets both; ", kOutsideSlurm));
  }
  SlurmStep step;
  step.source = absl::StrCat(nodelist_name, "=", *nodelist, ", ", tasks_name, "=", *tasks_per_node);

  absl::StatusOr<std::vector<std::string>> nodes = ExpandSlurmHostlist(*nodelist);
  if (!nodes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(nodelist_name, ": ", nodes.status().message()));
  }
  absl::StatusOr<std::vector<int>> counts = ExpandSlurmTasksPerNode(*tasks_per_node);
  if (!counts.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(tasks_name, ": ", counts.status().message()));
  }
  if (nodes->size() != counts->size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        step.source, ": the node list names ", nodes->size(), " nodes but the task counts are for ",
        counts->size(), "; Slurm writes one count per node"));
  }
  for (size_t node = 0; node < nodes->size(); ++node) {
    for (int local_id = 0; local_id < (*counts)[node]; ++local_id) {
      step.tasks.push_back(SlurmTask{(*nodes)[node], local_id});
    }
  }

  absl::StatusOr<std::optional<int>> rank = ReadIndex(environment, "SLURM_PROCID");
  if (!rank.ok()) return rank.status();
  step.rank = *rank;
  if (!step.rank.has_value()) return step;
  if (*step.rank >= static_cast<int>(step.tasks.size())) {
    return absl::InvalidArgumentError(absl::StrCat("SLURM_PROCID=", *step.rank,
                                                   " is not a rank of the ", step.tasks.size(),
                                                   " tasks of ", step.source));
  }
  const SlurmTask& expected = step.tasks[*step.rank];
  absl::StatusOr<std::optional<int>> local_id = ReadIndex(environment, "SLURM_LOCALID");
  if (!local_id.ok()) return local_id.status();
  const std::string* node = FindVariable(environment, "SLURMD_NODENAME");
  if ((local_id->has_value() && **local_id != expected.local_id) ||
      (node != nullptr && *node != expected.node)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "SLURM_PROCID=", *step.rank, " runs on ", node == nullptr ? "?" : *node, " as local task ",
        local_id->has_value() ? absl::StrCat(**local_id) : "?",
        " (SLURMD_NODENAME, SLURM_LOCALID), but Slurm's block distribution of ", step.source,
        " puts it on ", expected.node, " as local task ", expected.local_id,
        ": launch the tasks with srun's default --distribution=block"));
  }
  return step;
}

absl::StatusOr<std::vector<std::string>> SlurmTaskAddresses(const SlurmStep& step, int base_port) {
  std::vector<std::string> addresses;
  addresses.reserve(step.tasks.size());
  for (const SlurmTask& task : step.tasks) {
    const int64_t port = int64_t{base_port} + task.local_id;
    if (base_port < 1 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slurm_base_port=", base_port, " gives local task ", task.local_id,
                       " of node ", task.node, " port ", port,
                       "; a node's tasks listen on the base port and the ports "
                       "after it, which must lie between 1 and 65535"));
    }
    addresses.push_back(absl::StrCat(task.node, ":", port));
  }
  return addresses;
}

int NodeWorkerIndex(const SlurmStep& step, int rank, int num_ps) {
  int index = 0;
  for (int other = num_ps; other < rank; ++other) {
    if (step.tasks[other].node == step.tasks[rank].node) ++index;
  }
  return index;
}

std::string SlurmWorkerDevice(int node_worker_index, int visible_gpus) {
  if (visible_gpus <= 0) return "auto";
  return absl::StrCat("cuda:", node_worker_index % visible_gpus);
}

}  // namespace ps
