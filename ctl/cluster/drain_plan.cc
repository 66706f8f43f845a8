#include "ctl/cluster/drain_plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

// Whether `listed` records job `job_id`'s shard `shard` as moved away from that ps.
bool MovedAway(const ListJobsResponse& listed, const std::string& job_id, int shard) {
  return std::any_of(listed.moved().begin(), listed.moved().end(),
                     [&](const ListJobsResponse::MovedShard& moved) {
                       return moved.job_id() == job_id && moved.shard() == shard;
                     });
}

// The shards (job, shard) that ps `ps` serves, by its ListJobs answer `listed`: the copies
// moved there, then its own.
std::vector<std::pair<std::string, int>> ServedShards(int ps, const ListJobsResponse& listed) {
  std::vector<std::pair<std::string, int>> served;
  for (const ListJobsResponse::ShardCopy& copy : listed.copies()) {
    if (copy.moved() && copy.serving()) served.emplace_back(copy.job_id(), copy.shard());
  }
  for (const std::string& job_id : listed.job_ids()) {
    if (!MovedAway(listed, job_id, ps)) served.emplace_back(job_id, ps);
  }
  return served;
}

}  // namespace

absl::StatusOr<DrainPlan> PlanDrain(int ps,
                                    const std::vector<absl::StatusOr<ListJobsResponse>>& listed,
                                    std::optional<int> to) {
  const int num_ps = static_cast<int>(listed.size());
  if (to.has_value() && (*to == ps || *to < 0 || *to >= num_ps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--to=ps:", *to, " cannot take ps:", ps,
                     "'s shards: give another ps of the ClusterSpec, or none to spread them"));
  }
  if (!listed[ps].ok()) return listed[ps].status();
  std::vector<int> load(num_ps, 0);  // Shards each ps that answered serves; -1: no answer.
  for (int other = 0; other < num_ps; ++other) {
    load[other] = listed[other].ok() ? static_cast<int>(ServedShards(other, *listed[other]).size())
                                     : -1;
  }
  // Jobs with replicas: a backup copy listed anywhere.
  std::set<std::string> replicated;
  for (const absl::StatusOr<ListJobsResponse>& answer : listed) {
    if (!answer.ok()) continue;
    for (const ListJobsResponse::ShardCopy& copy : answer->copies()) {
      if (!copy.moved()) replicated.insert(copy.job_id());
    }
  }
  DrainPlan plan;
  std::set<std::string> refused;
  auto refuse = [&](const std::string& job_id) {
    if (!refused.insert(job_id).second) return;
    plan.refused.push_back(absl::StrCat(
        "job ", job_id, " has replicas: each of its shards stays on its two homes, ps:", ps,
        " among them (only a job without replicas moves)"));
  };
  for (const ListJobsResponse::ShardCopy& copy : listed[ps]->copies()) {
    if (!copy.moved()) refuse(copy.job_id());
  }
  for (const auto& [job_id, shard] : ServedShards(ps, *listed[ps])) {
    if (replicated.count(job_id) > 0) {
      refuse(job_id);
      continue;
    }
    // A shard moved here goes home where its own ps answered.
    int target = to.value_or(shard != ps && load[shard] >= 0 ? shard : -1);
    const bool chosen = target >= 0;
    for (int other = 0; other < num_ps && !chosen; ++other) {
      if (other == ps || load[other] < 0) continue;
      if (target < 0 || load[other] < load[target]) target = other;
    }
    if (target < 0) {
      return absl::UnavailableError(absl::StrCat(
          "no other ps answered ListJobs: ps:", ps, "'s shards have nowhere to go (start them, "
          "or give --to=ps:M)"));
    }
    if (load[target] >= 0) ++load[target];
    plan.moves.push_back({job_id, shard, target});
  }
  return plan;
}

absl::StatusOr<UndrainPlan> PlanUndrain(
    int ps, const std::vector<absl::StatusOr<ListJobsResponse>>& listed) {
  if (!listed[ps].ok()) return listed[ps].status();
  UndrainPlan plan;
  for (int other = 0; other < static_cast<int>(listed.size()); ++other) {
    if (other == ps) continue;
    if (!listed[other].ok()) {
      plan.unasked.push_back(other);
      continue;
    }
    for (const ListJobsResponse::ShardCopy& copy : listed[other]->copies()) {
      if (copy.shard() == ps && copy.moved() && copy.serving()) {
        plan.moves.push_back({copy.job_id(), ps, ps});
      }
    }
  }
  return plan;
}

}  // namespace ps
