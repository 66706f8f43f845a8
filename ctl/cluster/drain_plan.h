// Which shards leave a ps that is drained (psctl drain-ps), and where each goes: every shard
// of a job without replicas that the ps serves moves to another ps (docs/replication.md,
// "Removing a ps"), so that the ps may then be stopped with nothing of any job on it.
#ifndef PS_CTL_CLUSTER_DRAIN_PLAN_H_
#define PS_CTL_CLUSTER_DRAIN_PLAN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps_service.pb.h"

namespace ps {

// Shard `shard` of job `job_id` to move to ps `to_ps`.
struct ShardMove {
  std::string job_id;
  int shard = -1;
  int to_ps = -1;
};

struct DrainPlan {
  std::vector<ShardMove> moves;
  // Why the shards of each job that cannot move stay: a job with replicas (a backup copy
  // listed on some ps), whose shards live on their two homes.
  std::vector<std::string> refused;
};

// The plan that drains ps `ps`, from each ps's ListJobs answer (`listed`, by ps): its own
// shard of every job it lists, unless that shard moved away (ListJobsResponse.moved), and each
// moved copy it serves, each to `to` where given, else (a moved copy) home where its own ps
// answered, else to the ps that answered and serves the fewest shards, counting those the plan
// sends there already (ties: the lowest index).
// INVALID_ARGUMENT when `to` is `ps` or out of range; UNAVAILABLE when `ps` did not answer
// (its error) or, without `to`, no other ps did.
absl::StatusOr<DrainPlan> PlanDrain(int ps,
                                    const std::vector<absl::StatusOr<ListJobsResponse>>& listed,
                                    std::optional<int> to);

// The plan that brings ps `ps`'s shards home (psctl undrain-ps): every copy of shard `ps` of a
// job that another ps lists as moved there and serving, each to `ps`. UNAVAILABLE when `ps`
// did not answer (its error): it must be up to take them. The ps that did not answer are
// named in `unasked` (their copies, if any, stay where they are).
struct UndrainPlan {
  std::vector<ShardMove> moves;
  std::vector<int> unasked;
};
absl::StatusOr<UndrainPlan> PlanUndrain(
    int ps, const std::vector<absl::StatusOr<ListJobsResponse>>& listed);

}  // namespace ps

#endif  // PS_CTL_CLUSTER_DRAIN_PLAN_H_
