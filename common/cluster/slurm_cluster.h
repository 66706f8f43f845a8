// The tasks of a Slurm job step and their addresses, read from the environment Slurm gives each
// task, as TensorFlow's SlurmClusterResolver reads them. common/cluster/cluster_spec.h's
// ResolveClusterConfig turns them into a ClusterSpec (--cluster_resolver=slurm).
//
// - Nodes and task counts: SLURM_STEP_NODELIST with SLURM_STEP_TASKS_PER_NODE inside a job step
//   (srun); elsewhere in a job (the batch script, salloc) SLURM_JOB_NODELIST with
//   SLURM_TASKS_PER_NODE. Node names are used as host names.
// - Ranks: Slurm's default block distribution, as TensorFlow assumes: the first node's n tasks
//   are ranks 0 to n-1, the next node's follow, and so on. A node's k-th task (SLURM_LOCALID k)
//   listens on NODE:(base port + k).
// - This process's task is SLURM_PROCID. Where Slurm also says which node and local task it is
//   (SLURMD_NODENAME, SLURM_LOCALID), they must agree with the block distribution, so that a
//   step launched otherwise (srun --distribution=cyclic) fails instead of serving the wrong
//   address.
//
// Unlike TensorFlow, which sorts the node names, the node list's order is kept: it is the order
// Slurm numbers ranks in (sorting puts n10 before n9).
#ifndef PS_COMMON_CLUSTER_SLURM_CLUSTER_H_
#define PS_COMMON_CLUSTER_SLURM_CLUSTER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cluster/environment.h"

namespace ps {

// The --slurm_* flags.
struct SlurmClusterOptions {
  // The first num_ps ranks are the ps tasks, the rest the workers (TensorFlow's resolver assigns
  // jobs by rank order too). At least 1, and fewer than the step's tasks.
  int num_ps = 1;
  // A node's k-th task listens on base_port + k (TensorFlow's default base).
  int base_port = 8888;
};

struct SlurmTask {
  std::string node;
  int local_id = 0;  // Its index among its node's tasks (SLURM_LOCALID).
};

// A job step's tasks as its environment describes them.
struct SlurmStep {
  std::vector<SlurmTask> tasks;  // By rank.
  std::optional<int> rank;       // SLURM_PROCID, when set: this process's rank.
  // The variables the tasks came from, for messages: "SLURM_STEP_NODELIST=n[1-2],
  // SLURM_STEP_TASKS_PER_NODE=2(x2)".
  std::string source;
};

// Reads the step from `environment`. FAILED_PRECONDITION outside a Slurm job (no node list, or
// a node list without its task counts) and when SLURMD_NODENAME or SLURM_LOCALID disagree with
// SLURM_PROCID's place under block distribution; INVALID_ARGUMENT for malformed values (a bad
// host list, as many task counts as nodes, a rank out of range). Every message names the
// variables and says what to do.
absl::StatusOr<SlurmStep> ReadSlurmStep(const Environment& environment);

// "node:port" of each rank, the port being base_port + local id. INVALID_ARGUMENT, naming
// --slurm_base_port, when a port falls outside 1 to 65535.
absl::StatusOr<std::vector<std::string>> SlurmTaskAddresses(const SlurmStep& step, int base_port);

// Which of its node's workers rank `rank` is (0 for the first), the first `num_ps` ranks being
// ps tasks. REQUIRES: num_ps <= rank < step.tasks.size().
int NodeWorkerIndex(const SlurmStep& step, int rank, int num_ps);

// The --device a worker takes under Slurm when told "auto": with `visible_gpus` GPUs visible to
// it (those CUDA_VISIBLE_DEVICES names, when Slurm sets it, numbered from 0 by CUDA), the k-th
// worker of a node takes "cuda:(k mod visible_gpus)". A step that binds one GPU to each task
// (srun --gpus-per-task=1) thus gives each worker its own, and workers that see all of their
// node's GPUs spread over them. "auto" (the CPU, saying why) when no GPU is visible.
std::string SlurmWorkerDevice(int node_worker_index, int visible_gpus);

}  // namespace ps

#endif  // PS_COMMON_CLUSTER_SLURM_CLUSTER_H_
