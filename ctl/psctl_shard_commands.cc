// psctl's command that moves a running job's shard to another ps: move-shard
// (ctl/psctl_commands.h; docs/replication.md, "A live move to another ps").
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/cluster/cluster_spec.h"
#include "ctl/cluster/cluster_client.h"
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

}  // namespace ps
