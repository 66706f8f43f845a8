#include "ctl/dashboard/job_history.h"

#include <set>

namespace ps {

void JobHistory::Record(const ClusterSnapshot& snapshot) {
  absl::MutexLock lock(&mu_);
  std::set<std::string> listed;
  for (const JobSnapshot& snapshot_job : snapshot.jobs) {
    listed.insert(snapshot_job.job_id);
    Job& job = jobs_[snapshot_job.job_id];
    job.times.push_back(static_cast<double>(snapshot.time_ms) / 1000);
    std::set<int> seen;
    for (const JobProgress& worker : snapshot_job.workers) {
      seen.insert(worker.worker());
      auto [it, added] = job.workers.try_emplace(worker.worker());
      Series& series = it->second;
      if (added) {  // A worker first seen now has no values before.
        series.loss.assign(job.times.size() - 1, absl::nullopt);
        series.examples_per_second.assign(job.times.size() - 1, absl::nullopt);
      }
      const bool started = worker.step() > 0;
      const bool running = worker.state() == JobProgress::RUNNING;
      const bool shows = started && (running || !series.ended);
      if (started && !running) series.ended = true;
      if (running) series.ended = false;  // Started again (a worker that rejoined).
      series.loss.push_back(shows ? absl::optional<double>(worker.loss()) : absl::nullopt);
      series.examples_per_second.push_back(
          shows ? absl::optional<double>(worker.examples_per_second()) : absl::nullopt);
    }
    for (auto& [worker, series] : job.workers) {
      if (seen.count(worker) > 0) continue;
      series.loss.push_back(absl::nullopt);
      series.examples_per_second.push_back(absl::nullopt);
    }
    if (job.times.size() > points_) {
      const size_t drop = job.times.size() - points_;
      job.times.erase(job.times.begin(), job.times.begin() + drop);
      for (auto& [worker, series] : job.workers) {
        series.loss.erase(series.loss.begin(), series.loss.begin() + drop);
        series.examples_per_second.erase(series.examples_per_second.begin(),
                                         series.examples_per_second.begin() + drop);
      }
    }
  }
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    it = listed.count(it->first) > 0 ? std::next(it) : jobs_.erase(it);
  }
}

nlohmann::json JobHistory::Json() const {
  auto values = [](const std::vector<absl::optional<double>>& series) {
    nlohmann::json out = nlohmann::json::array();
    for (const absl::optional<double>& value : series) {
      out.push_back(value.has_value() ? nlohmann::json(*value) : nlohmann::json());
    }
    return out;
  };
  absl::MutexLock lock(&mu_);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [id, job] : jobs_) {
    nlohmann::json workers = nlohmann::json::object();
    for (const auto& [worker, series] : job.workers) {
      workers[std::to_string(worker)] = {{"loss", values(series.loss)},
                                         {"examples_per_second",
                                          values(series.examples_per_second)}};
    }
    out[id] = {{"times", job.times}, {"workers", workers}};
  }
  return out;
}

}  // namespace ps
