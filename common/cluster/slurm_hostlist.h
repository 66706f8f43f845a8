// Slurm's compressed host lists and task counts, as Slurm writes them into a job's environment
// (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST, SLURM_TASKS_PER_NODE, SLURM_STEP_TASKS_PER_NODE).
//
// A hostlist is names separated by commas; a name may hold bracket groups of comma-separated
// numbers and ranges, expanded as `scontrol show hostnames` expands them:
//
//   gpu[01-04,07],cpu-a[1-2]  ->  gpu01 gpu02 gpu03 gpu04 gpu07 cpu-a1 cpu-a2
//   n[008-011]                ->  n008 n009 n010 n011   (a range's width is its first number's)
//   rack[1-2]-n[1-2]          ->  rack1-n1 rack1-n2 rack2-n1 rack2-n2   (a cartesian product)
//
// With two bracket groups the leftmost varies slowest; with more, Slurm's order: the last
// fastest, then the first, the second, and so on (a[1-2]b[1-2]c[1-2]: a1b1c1 a1b1c2 a2b1c1 ...).
// Order is kept and duplicates stay, as Slurm keeps them. Where scontrol guesses at a malformed
// list ("n[1-2" prints "n]", "n[1-]" prints "n1", "n1,,n2" skips the empty name) these functions
// refuse it: Slurm never writes such lists, so one is a hand-made mistake.
#ifndef PS_COMMON_CLUSTER_SLURM_HOSTLIST_H_
#define PS_COMMON_CLUSTER_SLURM_HOSTLIST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// The most hosts (and tasks) a list may expand to; larger lists are refused before anything is
// allocated. Slurm's own limit is 65536 per bracket range.
inline constexpr int kMaxSlurmHosts = 65536;

// The host names of `hostlist`, in order. Errors are INVALID_ARGUMENT quoting the list and
// naming the offending part and its character position (1-based): unbalanced or nested
// brackets, an empty name or range, a range that is not N or N-M in digits, a reversed range,
// text after the last bracket group, whitespace, or more than kMaxSlurmHosts hosts. Callers
// prefix the variable the list came from.
absl::StatusOr<std::vector<std::string>> ExpandSlurmHostlist(absl::string_view hostlist);

// The task count of each node from SLURM_TASKS_PER_NODE's form, a comma-separated list of
// counts where "N(xR)" stands for R nodes with N tasks each: "2(x3),1" -> {2, 2, 2, 1}. Counts
// and repetitions are at least 1; more than kMaxSlurmHosts nodes or tasks in all are refused.
// Errors are INVALID_ARGUMENT, as ExpandSlurmHostlist's.
absl::StatusOr<std::vector<int>> ExpandSlurmTasksPerNode(absl::string_view tasks_per_node);

}  // namespace ps

#endif  // PS_COMMON_CLUSTER_SLURM_HOSTLIST_H_
