// psctl's commands that move running jobs' shards to other ps: move-shard; drain-ps, which
// moves every shard off one ps; and undrain-ps, which brings a ps's shards home
// (ctl/psctl_commands.h; docs/replication.md, "A live move to another ps" and "Removing a ps").
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cluster/cluster_spec.h"
#include "ctl/cluster/cluster_client.h"
#include "ctl/cluster/drain_plan.h"
#include "ctl/psctl_commands.h"
#include "ctl/psctl_flags.h"
#include "proto/ps_service.pb.h"

namespace ps {
namespace {

// The ps task of `flag` (--task or --to), checked against `cluster`.
absl::StatusOr<int> PsOfFlag(const ClusterSpec& cluster, const std::string& name,
                             const std::string& flag) {
  if (flag.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, "=ps:N is required"));
  }
  absl::StatusOr<TaskId> task = ParseTaskFlag(flag);
  if (!task.ok()) return task.status();
  if (task->type() != kPsJob) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", flag, " is not a ps task; shards live on ps tasks (give ",
                     "--", name, "=ps:N)"));
  }
  if (absl::Status in = cluster.CheckTask(*task); !in.ok()) return in;
  return task->index();
}

// Moves one shard as planned (drain-ps, undrain-ps).
absl::StatusOr<MoveShardResponse> Make(const ClusterClient& client, const ShardMove& move) {
  MoveShardRequest request;
  request.set_job_id(move.job_id);
  request.set_shard(move.shard);
  request.set_to_ps(move.to_ps);
  return client.MoveShard(request);
}

}  // namespace

int MoveShard() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return Fail(cluster.status());
  if (FLAGS_job.empty()) return Fail(absl::InvalidArgumentError("--job=ID is required"));
  absl::StatusOr<int> from = PsOfFlag(*cluster, "task", FLAGS_task);
  if (!from.ok()) return Fail(from.status());
  absl::StatusOr<int> to = PsOfFlag(*cluster, "to", FLAGS_to);
  if (!to.ok()) return Fail(to.status());
  absl::StatusOr<std::unique_ptr<ClusterClient>> client = ClusterClient::Create(*cluster);
  if (!client.ok()) return Fail(client.status());
  MoveShardRequest request;
  request.set_job_id(FLAGS_job);
  request.set_shard(*from);
  request.set_to_ps(*to);
  absl::StatusOr<MoveShardResponse> moved = (*client)->MoveShard(request);
  if (!moved.ok()) return Fail(moved.status());
  std::cout << "shard " << *from << " of job " << FLAGS_job << " moved to ps:" << *to
            << " at version " << moved->version() << "; ps:" << *to << " serves it now\n";
  return 0;
}

int DrainPs() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return Fail(cluster.status());
  absl::StatusOr<int> drained = PsOfFlag(*cluster, "task", FLAGS_task);
  if (!drained.ok()) return Fail(drained.status());
  std::optional<int> to;
  if (!FLAGS_to.empty()) {
    absl::StatusOr<int> given = PsOfFlag(*cluster, "to", FLAGS_to);
    if (!given.ok()) return Fail(given.status());
    to = *given;
  }
  absl::StatusOr<std::unique_ptr<ClusterClient>> client = ClusterClient::Create(*cluster);
  if (!client.ok()) return Fail(client.status());
  absl::StatusOr<DrainPlan> plan = PlanDrain(*drained, (*client)->ListEveryPs(), to);
  if (!plan.ok()) return Fail(plan.status());
  std::vector<std::string> stayed = plan->refused;
  std::vector<std::pair<std::string, int>> failed;  // Moves that did not happen.
  for (const std::string& why : plan->refused) std::cout << why << "\n";
  for (const ShardMove& move : plan->moves) {
    absl::StatusOr<MoveShardResponse> moved = Make(**client, move);
    if (!moved.ok()) {
      failed.emplace_back(move.job_id, move.shard);
      stayed.push_back(absl::StrCat("shard ", move.shard, " of job ", move.job_id, ": ",
                                    moved.status().message()));
      std::cout << stayed.back() << "\n";
      continue;
    }
    std::cout << "shard " << move.shard << " of job " << move.job_id << " moved to ps:"
              << move.to_ps << " at version " << moved->version() << "\n";
  }
  // A shard moved to it meanwhile (another psctl's move) stays: asked afresh.
  absl::StatusOr<DrainPlan> left = PlanDrain(*drained, (*client)->ListEveryPs(), to);
  if (left.ok()) {
    for (const ShardMove& move : left->moves) {
      if (std::find(failed.begin(), failed.end(), std::make_pair(move.job_id, move.shard)) !=
          failed.end()) {
        continue;  // Said above.
      }
      stayed.push_back(absl::StrCat("shard ", move.shard, " of job ", move.job_id,
                                    " came to ps:", *drained, " while it was drained"));
      std::cout << stayed.back() << "\n";
    }
  }
  if (!stayed.empty()) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "ps:", *drained, " still holds ", stayed.size(), " shard copies (above); do not stop it "
        "yet: stop or finish those jobs, or ask again once the cause is fixed")));
  }
  // ListJobs lists the caller's jobs only (an admin's: every job).
  std::cout << "ps:" << *drained << " serves no shard of the jobs it lists to you now ("
            << plan->moves.size() << " moved): it may be stopped, unless another user's jobs "
            << "are on it (an admin's psctl sees and moves every job)\n";
  return 0;
}

int UndrainPs() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return Fail(cluster.status());
  absl::StatusOr<int> home = PsOfFlag(*cluster, "task", FLAGS_task);
  if (!home.ok()) return Fail(home.status());
  absl::StatusOr<std::unique_ptr<ClusterClient>> client = ClusterClient::Create(*cluster);
  if (!client.ok()) return Fail(client.status());
  absl::StatusOr<UndrainPlan> plan = PlanUndrain(*home, (*client)->ListEveryPs());
  if (!plan.ok()) {
    return Fail(absl::Status(plan.status().code(),
                             absl::StrCat(plan.status().message(), " (ps:", *home,
                                          " must be up to take its shards home)")));
  }
  std::vector<std::string> stayed;
  for (const ShardMove& move : plan->moves) {
    absl::StatusOr<MoveShardResponse> moved = Make(**client, move);
    if (!moved.ok()) {
      stayed.push_back(absl::StrCat("shard ", move.shard, " of job ", move.job_id, ": ",
                                    moved.status().message()));
      std::cout << stayed.back() << "\n";
      continue;
    }
    std::cout << "shard " << move.shard << " of job " << move.job_id << " moved home to ps:"
              << *home << " at version " << moved->version() << "\n";
  }
  for (int ps : plan->unasked) {
    stayed.push_back(absl::StrCat("ps:", ps, " could not be asked: a copy of shard ", *home,
                                  " it serves stays there"));
    std::cout << stayed.back() << "\n";
  }
  if (!stayed.empty()) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        stayed.size(), " of ps:", *home, "'s shards may be away still (above); ask again once "
        "the cause is fixed")));
  }
  std::cout << "ps:" << *home << " serves its own shard of every job it lists to you ("
            << plan->moves.size() << " moved home); their checkpoints resume\n";
  return 0;
}

}  // namespace ps
