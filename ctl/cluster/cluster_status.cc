#include "ctl/cluster/cluster_status.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/job/consistency_modes.h"
#include "ctl/cluster/cluster_client.h"

namespace ps {
namespace {

// The one-line status of a task: "ps:0 (h:2222): up, ..." or why it is down.
std::string TaskLine(const ClusterClient& client, absl::string_view job, int index,
                     const absl::Status& status, const std::string& up) {
  if (absl::IsUnauthenticated(status) || absl::IsPermissionDenied(status)) {
    return absl::StrCat(client.TaskName(job, index), ": REFUSED (", ClusterClient::Detail(status),
                        ")\n");
  }
  if (!status.ok()) {
    return absl::StrCat(client.TaskName(job, index), ": DOWN (", ClusterClient::Detail(status),
                        ")\n");
  }
  absl::StatusOr<TaskInfo> info = client.GetTaskInfo(job, index);
  const bool insecure = info.ok() && info->insecure();
  return absl::StrCat(client.TaskName(job, index), ": ", up,
                      insecure ? " (INSECURE: plaintext off loopback, --insecure)" : "", "\n");
}

// The report line of a job on the ps task whose statistics `stats` are.
std::string ShardReport(const JobStats& stats) {
  const std::string& job_id = stats.job_id();
  std::vector<std::string> clocks, dropped;
  for (const WorkerStats& worker : stats.workers()) clocks.push_back(absl::StrCat(worker.clock()));
  for (const auto& [reason, count] : stats.dropped()) {
    dropped.push_back(absl::StrCat(reason, "=", count));
  }
  std::string report = absl::StrCat(
      "  ", job_id, ": ", ConsistencyConfig::Mode_Name(stats.mode()), " version ", stats.version(),
      ", step ", stats.step(), ", gradients applied ", stats.applied_gradients(),
      ", staleness mean ", absl::StrFormat("%.2f", stats.staleness().mean()), " max ",
      stats.staleness().max(), ", worker clocks [", absl::StrJoin(clocks, ", "), "], dropped [",
      absl::StrJoin(dropped, ", "), "]");
  std::vector<std::string> lost;
  for (const WorkerStats& worker : stats.workers()) {
    if (worker.lost()) lost.push_back(absl::StrCat(worker.worker()));
  }
  if (!lost.empty()) {
    absl::StrAppend(&report, ", lost workers [", absl::StrJoin(lost, ", "),
                    "] (no request within worker_lease_s)");
  }
  if (stats.duplicate_pushes() > 0) {
    absl::StrAppend(&report, ", duplicate pushes ", stats.duplicate_pushes());
  }
  if (stats.has_replication()) {
    const ReplicationStats& replication = stats.replication();
    absl::StrAppend(&report, stats.replication().took_over() ? ", took the shard over" : "",
                    ", backup ", replication.backup(), " ",
                    ReplicationStats::State_Name(replication.state()), " (",
                    replication.inputs_replicated(), " updates replicated");
    if (replication.inputs_unreplicated() > 0) {
      absl::StrAppend(&report, ", ", replication.inputs_unreplicated(), " applied alone");
    }
    if (replication.state() != ReplicationStats::REPLICATING &&
        !replication.last_error().empty()) {
      absl::StrAppend(&report, "; ", replication.last_error());
    }
    absl::StrAppend(&report, ")");
  }
  if (stats.has_handout()) {
    const DataHandoutStats& handout = stats.handout();
    absl::StrAppend(&report, ", data handed out: ", handout.epochs_completed(), " of ",
                    handout.epochs() > 0 ? absl::StrCat(handout.epochs()) : "unlimited",
                    " epochs done, ", handout.batches_trained(), " batches trained (",
                    handout.batches_per_epoch(), " an epoch), ", handout.batches_held(),
                    " held by workers, ", handout.batches_waiting(), " given back and waiting (",
                    handout.batches_given_back(), " given back in all)");
  }
  if (stats.checkpoints_size() > 0) {
    const ShardCheckpoint& latest = stats.checkpoints(stats.checkpoints_size() - 1);
    absl::StrAppend(
        &report, ", checkpoint ", latest.seq(),
        latest.error().empty() ? absl::StrCat(" written at clock ", latest.clock()) : " FAILED");
  }
  if (stats.failed_checkpoints() > 0) {
    absl::StrAppend(&report, ", failed checkpoints ", stats.failed_checkpoints());
    for (const ShardCheckpoint& checkpoint : stats.checkpoints()) {
      if (!checkpoint.error().empty()) {
        absl::StrAppend(&report, " (last: ", checkpoint.error(), ")");
      }
    }
  }
  if (const ModeTraits* mode = FindModeTraits(stats.mode());
      mode != nullptr && mode->barrier && stats.parked_pulls() > 0) {
    absl::StrAppend(&report, ", barrier waiting for workers [",
                    absl::StrJoin(stats.waiting_for(), ", "), "]");
  }
  return absl::StrCat(report, "\n");
}

// The jobs `listed` (ps `ps`'s ListJobs) names, each whose shard of this ps moved away
// (psctl move-shard, drain-ps) marked with where it went: "a, b (its shard on ps:2)".
std::string ListedJobs(int ps, const ListJobsResponse& listed) {
  return absl::StrJoin(listed.job_ids(), ", ", [&](std::string* out, const std::string& job_id) {
    absl::StrAppend(out, job_id);
    for (const ListJobsResponse::MovedShard& moved : listed.moved()) {
      if (moved.job_id() == job_id && moved.shard() == ps) {
        absl::StrAppend(out, " (its shard on ps:", moved.to_ps(), ")");
      }
    }
  });
}

// "run R, restored from checkpoint C at step S", or "run R" for a run created afresh.
std::string RunDescription(const JobStats& shard) {
  std::string run = absl::StrCat("run ", shard.spec().run_id());
  if (!shard.restored_from().empty()) {
    absl::StrAppend(&run, ", restored from checkpoint ", shard.restored_from(), " at step ",
                    shard.restored_step());
  }
  return run;
}

}  // namespace

std::string JobState(const std::string& job_id, const JobSightings& seen) {
  const std::string prefix = absl::StrCat("job ", job_id, ": ");
  if (seen.shards.empty() && seen.workers.empty()) {
    return absl::StrCat(prefix, "UNKNOWN (no task knows it)");
  }
  auto count = [&seen](JobProgress::State state) {
    return std::count_if(seen.workers.begin(), seen.workers.end(),
                         [state](const JobProgress& p) { return p.state() == state; });
  };
  // Those that left (psctl remove-worker) ended as asked.
  const bool all_done = count(JobProgress::DONE) > 0 &&
                        count(JobProgress::DONE) + count(JobProgress::LEFT) ==
                            static_cast<long>(seen.workers.size());
  if (!all_done && !seen.shards.empty() && !seen.shards_lost.empty()) {
    return absl::StrCat(prefix, "RECOVERING (", absl::StrJoin(seen.shards_lost, "; "),
                        "; the psctl that submitted the job rolls it back to its latest complete "
                        "checkpoint once every ps is up)");
  }
  const bool restored_untouched =
      static_cast<int>(seen.shards.size()) == seen.num_ps && !seen.shards.empty() &&
      std::all_of(seen.shards.begin(), seen.shards.end(), [](const JobStats& shard) {
        return !shard.restored_from().empty() && shard.version() == shard.restored_version();
      });
  const std::string run = seen.shards.empty() ? "" : RunDescription(seen.shards[0]);
  if (!all_done && restored_untouched) {
    return absl::StrCat(prefix, "RECOVERING (", run, "; waiting for the workers' first step)");
  }
  const char* state = count(JobProgress::RUNNING) > 0   ? "RUNNING"
                      : count(JobProgress::FAILED) > 0  ? "FAILED"
                      : count(JobProgress::STOPPED) > 0 ? "STOPPED"
                      : all_done                        ? "DONE"
                                                        : "CREATED (no worker has started it)";
  return absl::StrCat(prefix, state, run.empty() ? "" : absl::StrCat(" (", run, ")"));
}

std::string ClusterStatus(const ClusterSpec& cluster, const std::string& job_id,
                          std::vector<absl::Status>* unanswered) {
  absl::StatusOr<std::unique_ptr<ClusterClient>> created = ClusterClient::Create(cluster);
  if (!created.ok()) {
    unanswered->push_back(created.status());
    return absl::StrCat(created.status().message(), "\n");
  }
  const ClusterClient& client = **created;
  std::string report;
  JobSightings seen;
  seen.num_ps = client.num_ps();
  for (int ps = 0; ps < client.num_ps(); ++ps) {
    absl::StatusOr<ListJobsResponse> jobs = client.ListJobs(ps);
    if (!jobs.ok()) unanswered->push_back(jobs.status());
    absl::StrAppend(&report,
                    TaskLine(client, kPsJob, ps, jobs.status(),
                             jobs.ok() ? absl::StrCat("up, jobs: [", ListedJobs(ps, *jobs), "]")
                                       : ""));
    if (job_id.empty()) continue;
    // Asked where it moved, if it did (psctl move-shard): a ps down since is asked of the others.
    absl::StatusOr<JobStats> stats = client.GetShardStats(ps, job_id, /*replicated=*/false);
    if (stats.ok() && stats->moved_in()) {
      absl::StrAppend(&report, "  shard ", ps, " of ", job_id,
                      " was moved to another ps (psctl move-shard), which serves it:\n");
    }
    if (!stats.ok()) {
      // Shard `ps` of a replicated job, served by its backup copy since this ps went down or
      // was started again (docs/replication.md).
      absl::StatusOr<JobStats> copy = client.GetShardStats(ps, job_id, /*replicated=*/true);
      if (copy.ok()) {
        absl::StrAppend(&report, "  shard ", ps, " of ", job_id,
                        " is served by its backup copy, which took it over:\n");
        stats = *std::move(copy);
      }
    }
    if (stats.ok()) {
      seen.shards.push_back(*stats);
      absl::StrAppend(&report, ShardReport(*stats));
    } else if (!jobs.ok()) {
      seen.shards_lost.push_back(
          absl::StrCat("ps:", ps, " is down (", ClusterClient::Detail(jobs.status()), ")"));
    } else {
      seen.shards_lost.push_back(absl::StrCat("ps:", ps, " does not hold it"));
      absl::StrAppend(&report, "  ", job_id, ": ", stats.status().message(), "\n");
    }
  }
  for (int w = 0; w < client.num_workers(); ++w) {
    absl::StatusOr<WorkerStatus> status = client.GetWorkerStatus(w);
    if (!status.ok()) unanswered->push_back(status.status());
    absl::StrAppend(&report, TaskLine(client, kWorkerJob, w, status.status(),
                                      status.ok() ? absl::StrCat("up on ", status->device()) : ""));
    if (!status.ok()) continue;
    for (const JobProgress& job : status->jobs()) {
      if (!job_id.empty() && job.job_id() != job_id) continue;
      seen.workers.push_back(job);
      absl::StrAppend(&report, "  ", job.job_id(), ": ", JobProgress::State_Name(job.state()),
                      " step ", job.step(), ", loss ", absl::StrFormat("%.4f", job.loss()),
                      ", staleness ", absl::StrFormat("%.2f", job.staleness()),
                      job.error().empty() ? "" : absl::StrCat(", error: ", job.error()), "\n");
    }
  }
  if (!job_id.empty()) absl::StrAppend(&report, JobState(job_id, seen), "\n");
  return report;
}

}  // namespace ps
