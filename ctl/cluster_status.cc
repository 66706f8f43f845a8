#include "ctl/cluster_status.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ctl/cluster_client.h"

namespace ps {
namespace {

// The one-line status of a task: "ps:0 (h:2222): up, ..." or why it is down.
std::string TaskLine(const ClusterClient& client, absl::string_view job, int index,
                     const absl::Status& status, const std::string& up) {
  if (!status.ok()) {
    return absl::StrCat(client.TaskName(job, index), ": DOWN (", ClusterClient::Detail(status),
                        ")\n");
  }
  return absl::StrCat(client.TaskName(job, index), ": ", up, "\n");
}

// The report lines of `job_id` on ps task `ps`.
std::string ShardReport(const ClusterClient& client, int ps, const std::string& job_id) {
  absl::StatusOr<JobStats> stats = client.GetJobStats(ps, job_id);
  if (!stats.ok()) return absl::StrCat("  ", job_id, ": ", stats.status().message(), "\n");
  std::vector<std::string> clocks, dropped;
  for (const WorkerStats& worker : stats->workers()) clocks.push_back(absl::StrCat(worker.clock()));
  for (const auto& [reason, count] : stats->dropped()) {
    dropped.push_back(absl::StrCat(reason, "=", count));
  }
  std::string report = absl::StrCat(
      "  ", job_id, ": ", ConsistencyConfig::Mode_Name(stats->mode()), " version ",
      stats->version(), ", step ", stats->step(), ", gradients applied ",
      stats->applied_gradients(), ", staleness mean ",
      absl::StrFormat("%.2f", stats->staleness().mean()), " max ", stats->staleness().max(),
      ", worker clocks [", absl::StrJoin(clocks, ", "), "], dropped [",
      absl::StrJoin(dropped, ", "), "]");
  std::vector<std::string> lost;
  for (const WorkerStats& worker : stats->workers()) {
    if (worker.lost()) lost.push_back(absl::StrCat(worker.worker()));
  }
  if (!lost.empty()) {
    absl::StrAppend(&report, ", lost workers [", absl::StrJoin(lost, ", "),
                    "] (no request within worker_lease_s)");
  }
  if (stats->duplicate_pushes() > 0) {
    absl::StrAppend(&report, ", duplicate pushes ", stats->duplicate_pushes());
  }
  if (stats->checkpoints_size() > 0) {
    const ShardCheckpoint& latest = stats->checkpoints(stats->checkpoints_size() - 1);
    absl::StrAppend(&report, ", checkpoint ", latest.seq(),
                    latest.error().empty() ? absl::StrCat(" written at clock ", latest.clock())
                                           : " FAILED");
  }
  if (stats->failed_checkpoints() > 0) {
    absl::StrAppend(&report, ", failed checkpoints ", stats->failed_checkpoints());
    for (const ShardCheckpoint& checkpoint : stats->checkpoints()) {
      if (!checkpoint.error().empty()) {
        absl::StrAppend(&report, " (last: ", checkpoint.error(), ")");
      }
    }
  }
  if (stats->mode() == ConsistencyConfig::SYNC && stats->parked_pulls() > 0) {
    absl::StrAppend(&report, ", barrier waiting for workers [",
                    absl::StrJoin(stats->waiting_for(), ", "), "]");
  }
  return absl::StrCat(report, "\n");
}

}  // namespace

std::string ClusterStatus(const ClusterSpec& cluster, const std::string& job_id) {
  absl::StatusOr<std::unique_ptr<ClusterClient>> created = ClusterClient::Create(cluster);
  if (!created.ok()) return absl::StrCat(created.status().message(), "\n");
  const ClusterClient& client = **created;
  std::string report;
  for (int ps = 0; ps < client.num_ps(); ++ps) {
    absl::StatusOr<ListJobsResponse> jobs = client.ListJobs(ps);
    absl::StrAppend(&report,
                    TaskLine(client, kPsJob, ps, jobs.status(),
                             jobs.ok() ? absl::StrCat("up, jobs: [",
                                                      absl::StrJoin(jobs->job_ids(), ", "), "]")
                                       : ""));
    if (jobs.ok() && !job_id.empty()) absl::StrAppend(&report, ShardReport(client, ps, job_id));
  }
  for (int w = 0; w < client.num_workers(); ++w) {
    absl::StatusOr<WorkerStatus> status = client.GetWorkerStatus(w);
    absl::StrAppend(&report, TaskLine(client, kWorkerJob, w, status.status(),
                                      status.ok() ? absl::StrCat("up on ", status->device()) : ""));
    if (!status.ok()) continue;
    for (const JobProgress& job : status->jobs()) {
      if (!job_id.empty() && job.job_id() != job_id) continue;
      absl::StrAppend(&report, "  ", job.job_id(), ": ", JobProgress::State_Name(job.state()),
                      " step ", job.step(), ", loss ", absl::StrFormat("%.4f", job.loss()),
                      ", staleness ", absl::StrFormat("%.2f", job.staleness()),
                      job.error().empty() ? "" : absl::StrCat(", error: ", job.error()), "\n");
    }
  }
  return report;
}

}  // namespace ps
