#include "ctl/cluster/cluster_snapshot.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "ctl/cluster/cluster_status.h"

namespace ps {
namespace {

TaskSnapshot AskTask(const ClusterClient& client, absl::string_view job, int index) {
  TaskSnapshot task;
  task.task = absl::StrCat(job, ":", index);
  task.address = client.cluster().Tasks(job)[index];
  absl::StatusOr<TaskInfo> info = client.GetTaskInfo(job, index);
  task.up = info.ok();
  if (info.ok()) {
    task.info = *std::move(info);
  } else {
    task.error = ClusterClient::Detail(info.status());
  }
  return task;
}

// The word JobState's line says the job is in: "job j: RUNNING (...)" -> "RUNNING".
std::string StateWord(const std::string& line, const std::string& job_id) {
  std::string rest = line.substr(std::min(line.size(), absl::StrCat("job ", job_id, ": ").size()));
  return rest.substr(0, rest.find(' '));
}

nlohmann::json TaskJson(const TaskSnapshot& task, int64_t now_ms) {
  nlohmann::json json = {{"task", task.task}, {"address", task.address}, {"up", task.up},
                         {"error", task.error}};
  const TaskInfo& info = task.info;
  json["version"] = info.version();
  json["pid"] = info.pid();
  json["uptime_seconds"] =
      task.up ? std::max<int64_t>(0, now_ms - info.start_time_ms()) / 1000.0 : 0.0;
  json["cpu_seconds"] = info.cpu_seconds();
  json["resident_bytes"] = info.resident_bytes();
  json["threads"] = info.threads();
  json["metrics_port"] = info.metrics_port();
  json["device"] = info.device();
  return json;
}

nlohmann::json ShardJson(const JobStats& shard) {
  return {{"ps", shard.ps_index()},
          {"version", shard.version()},
          {"step", shard.step()},
          {"parked_pulls", shard.parked_pulls()},
          {"waiting_for", std::vector<int>(shard.waiting_for().begin(), shard.waiting_for().end())},
          {"oldest_wait_seconds", shard.oldest_parked_pull_ms() / 1000.0},
          {"staleness_mean", shard.staleness().mean()},
          {"staleness_max", shard.staleness().max()},
          {"bytes_received", shard.bytes_received()},
          {"bytes_sent", shard.bytes_sent()}};
}

nlohmann::json JobJson(const JobSnapshot& job) {
  nlohmann::json json = {{"job_id", job.job_id}, {"state", job.state},
                         {"state_line", job.state_line}};
  json["mode"] = job.shards.empty() ? "" : ConsistencyConfig::Mode_Name(job.shards[0].mode());
  const JobFigures figures = FiguresOf(job);
  json["step"] = figures.step;
  json["loss"] = figures.stepped ? nlohmann::json(figures.loss) : nlohmann::json();
  json["examples_per_second"] = figures.examples_per_second;
  json["shards"] = nlohmann::json::array();
  for (const JobStats& shard : job.shards) json["shards"].push_back(ShardJson(shard));
  const std::map<int, WorkerStaleness> staleness = StalenessByWorker(job.shards);
  std::map<int, const JobProgress*> progress;
  for (const JobProgress& worker : job.workers) progress[worker.worker()] = &worker;
  std::set<int> workers;
  for (const auto& [worker, unused] : staleness) workers.insert(worker);
  for (const auto& [worker, unused] : progress) workers.insert(worker);
  json["workers"] = nlohmann::json::array();
  for (int worker : workers) {
    const auto it = progress.find(worker);
    const JobProgress& p = it != progress.end() ? *it->second : JobProgress::default_instance();
    const auto found = staleness.find(worker);
    const WorkerStaleness& s = found != staleness.end() ? found->second : WorkerStaleness();
    json["workers"].push_back(
        {{"worker", worker},
         {"state", it != progress.end() ? JobProgress::State_Name(p.state()) : "UNKNOWN"},
         {"step", p.step()},
         {"global_step", p.global_step()},
         {"epoch", p.epoch()},
         {"loss", p.loss()},
         {"examples_per_second", p.examples_per_second()},
         {"compute_seconds", p.compute_seconds()},
         {"pull_seconds", p.pull_seconds()},
         {"push_seconds", p.push_seconds()},
         {"wait_seconds", p.wait_seconds()},
         {"staleness_mean", s.mean()},
         {"staleness_max", s.max},
         {"staleness_counts", s.counts}});
  }
  if (job.timeline.has_value()) json["timeline"] = TimelineJson(*job.timeline);
  return json;
}

}  // namespace

JobFigures FiguresOf(const JobSnapshot& job) {
  double wall_seconds = 0;
  for (const JobProgress& worker : job.workers) {
    wall_seconds = std::max(wall_seconds, worker.elapsed_seconds());
  }
  return FiguresOf(job.shards.empty() ? ConsistencyConfig::MODE_UNSPECIFIED : job.shards[0].mode(),
                   job.workers, absl::Seconds(wall_seconds));
}

std::map<int, WorkerStaleness> StalenessByWorker(const std::vector<JobStats>& shards) {
  std::map<int, WorkerStaleness> by_worker;
  for (const JobStats& shard : shards) {
    for (const WorkerStats& worker : shard.workers()) {
      WorkerStaleness& into = by_worker[worker.worker()];
      const StalenessHistogramData& data = worker.staleness();
      if (into.counts.size() < static_cast<size_t>(data.counts_size())) {
        into.counts.resize(data.counts_size());
      }
      for (int i = 0; i < data.counts_size(); ++i) into.counts[i] += data.counts(i);
      into.max = std::max(into.max, data.max());
      into.sum += data.sum();
      into.total += data.total();
    }
  }
  for (auto& [worker, staleness] : by_worker) {
    while (!staleness.counts.empty() && staleness.counts.back() == 0) staleness.counts.pop_back();
  }
  return by_worker;
}

ClusterSnapshot TakeClusterSnapshot(const ClusterClient& client, bool timelines) {
  ClusterSnapshot snapshot;
  snapshot.time_ms = absl::ToUnixMillis(Clock::Real()->Now());
  std::map<std::string, JobSnapshot> jobs;
  std::map<std::string, JobSightings> seen;
  std::vector<std::set<std::string>> held(client.num_ps());
  for (int ps = 0; ps < client.num_ps(); ++ps) {
    snapshot.tasks.push_back(AskTask(client, kPsJob, ps));
    if (!snapshot.tasks.back().up) continue;
    absl::StatusOr<ListJobsResponse> listed = client.ListJobs(ps);
    if (!listed.ok()) continue;
    for (const std::string& id : listed->job_ids()) held[ps].insert(id);
  }
  for (int worker = 0; worker < client.num_workers(); ++worker) {
    snapshot.tasks.push_back(AskTask(client, kWorkerJob, worker));
    if (!snapshot.tasks.back().up) continue;
    absl::StatusOr<WorkerStatus> status = client.GetWorkerStatus(worker);
    if (!status.ok()) continue;
    for (const JobProgress& progress : status->jobs()) {
      jobs[progress.job_id()].workers.push_back(progress);
      seen[progress.job_id()].workers.push_back(progress);
    }
  }
  for (const std::set<std::string>& ids : held) {
    for (const std::string& id : ids) jobs[id];
  }
  for (auto& [id, job] : jobs) {
    JobSightings& sightings = seen[id];
    sightings.num_ps = client.num_ps();
    for (int ps = 0; ps < client.num_ps(); ++ps) {
      absl::StatusOr<JobStats> stats =
          held[ps].count(id) > 0 ? client.GetJobStats(ps, id) : absl::NotFoundError("");
      if (stats.ok()) {
        job.shards.push_back(*stats);
        sightings.shards.push_back(*std::move(stats));
      } else {
        sightings.shards_lost.push_back(
            absl::StrCat("ps:", ps, snapshot.tasks[ps].up ? " does not hold it" : " is down"));
      }
    }
    job.job_id = id;
    job.state_line = JobState(id, sightings);
    job.state = StateWord(job.state_line, id);
    if (timelines && job.state == "RUNNING" && !job.shards.empty() &&
        job.shards[0].spec().trace()) {
      std::vector<int> workers, holders;
      for (const JobProgress& worker : job.workers) workers.push_back(worker.worker());
      for (const JobStats& shard : job.shards) holders.push_back(shard.ps_index());
      job.timeline = TakeTimeline(client, id, workers, holders);
    }
    snapshot.jobs.push_back(std::move(job));
  }
  return snapshot;
}

std::string ClusterSnapshotJson(const ClusterSnapshot& snapshot) {
  nlohmann::json json = {{"time_ms", snapshot.time_ms}};
  json["tasks"] = nlohmann::json::array();
  for (const TaskSnapshot& task : snapshot.tasks) {
    json["tasks"].push_back(TaskJson(task, snapshot.time_ms));
  }
  json["jobs"] = nlohmann::json::array();
  for (const JobSnapshot& job : snapshot.jobs) json["jobs"].push_back(JobJson(job));
  return json.dump();
}

}  // namespace ps
