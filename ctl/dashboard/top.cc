#include "ctl/dashboard/top.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/job/consistency_modes.h"

namespace ps {
namespace {

// "980 B", "52.3 MiB".
std::string Bytes(int64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

// "45s", "1m05s", "2h03m", "3d04h".
std::string Duration(int64_t seconds) {
  seconds = std::max<int64_t>(0, seconds);
  if (seconds < 60) return absl::StrCat(seconds, "s");
  if (seconds < 3600) return absl::StrFormat("%dm%02ds", seconds / 60, seconds % 60);
  if (seconds < 86400) return absl::StrFormat("%dh%02dm", seconds / 3600, seconds % 3600 / 60);
  return absl::StrFormat("%dd%02dh", seconds / 86400, seconds % 86400 / 3600);
}

std::string Plural(int64_t n, const std::string& noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

// The task's CPU seconds since `previous` over the wall time since, in percent of one core.
std::string CpuPercent(const TaskSnapshot& task, int64_t now_ms, const ClusterSnapshot* previous) {
  if (!task.up || previous == nullptr || now_ms <= previous->time_ms) return "-";
  for (const TaskSnapshot& before : previous->tasks) {
    if (before.task != task.task) continue;
    if (!before.up || before.info.pid() != task.info.pid()) return "-";
    const double cpu = std::max(0.0, task.info.cpu_seconds() - before.info.cpu_seconds());
    return absl::StrFormat("%.1f",
                           100 * cpu * 1000 / static_cast<double>(now_ms - previous->time_ms));
  }
  return "-";
}

void AppendTasks(const ClusterSnapshot& now, const ClusterSnapshot* previous,
                 std::vector<std::string>* lines) {
  size_t task_width = 4;  // "TASK".
  size_t address_width = 7;
  for (const TaskSnapshot& task : now.tasks) {
    task_width = std::max(task_width, task.task.size());
    address_width = std::max(address_width, task.address.size());
  }
  const int tw = static_cast<int>(task_width);
  const int aw = static_cast<int>(address_width);
  lines->push_back(absl::StrFormat("%-*s  %-*s  %-5s  %8s  %6s  %10s  %7s", tw, "TASK", aw,
                                   "ADDRESS", "STATE", "PID", "CPU%", "RSS", "UPTIME"));
  for (const TaskSnapshot& task : now.tasks) {
    if (!task.up) {
      std::string error = task.error;
      std::replace(error.begin(), error.end(), '\n', ' ');
      lines->push_back(
          absl::StrFormat("%-*s  %-*s  %-5s  %s", tw, task.task, aw, task.address, "DOWN", error));
      continue;
    }
    const int64_t uptime_ms = now.time_ms - task.info.start_time_ms();
    lines->push_back(
        absl::StrFormat("%-*s  %-*s  %-5s  %8d  %6s  %10s  %7s", tw, task.task, aw, task.address,
                        "up", task.info.pid(), CpuPercent(task, now.time_ms, previous),
                        Bytes(task.info.resident_bytes()), Duration(uptime_ms / 1000)));
  }
}

// The job's line of figures: "SYNC, global step 12, 4321 examples/s, loss 0.5123, staleness
// mean 0.25 max 2".
std::string JobLine(const JobSnapshot& job) {
  std::vector<std::string> parts;
  if (!job.shards.empty()) {
    const ConsistencyConfig::Mode mode = job.shards[0].mode();
    parts.push_back(ConsistencyConfig::Mode_Name(mode));
    // A barrier's: the shards' step; else their smallest version.
    const ModeTraits* traits = FindModeTraits(mode);
    const bool barrier = traits != nullptr && traits->barrier;
    int64_t global_step = INT64_MAX;
    for (const JobStats& shard : job.shards) {
      global_step = std::min(global_step, barrier ? shard.step() : shard.version());
    }
    parts.push_back(absl::StrCat("global step ", global_step));
  }
  const JobFigures figures = FiguresOf(job);
  if (figures.stepped) {  // Before a step, the workers' figures are zeros.
    parts.push_back(absl::StrFormat("%.0f examples/s", figures.examples_per_second));
    parts.push_back(absl::StrFormat("loss %.4g", figures.loss));
  }
  int64_t sum = 0, total = 0, max = 0;
  for (const JobStats& shard : job.shards) {
    sum += shard.staleness().sum();
    total += shard.staleness().total();
    max = std::max(max, shard.staleness().max());
  }
  if (total > 0) {
    parts.push_back(absl::StrFormat("staleness mean %.2f max %d",
                                    static_cast<double>(sum) / static_cast<double>(total), max));
  }
  return absl::StrJoin(parts, ", ");
}

std::string Seconds(int64_t ms) {
  return absl::StrFormat("%.1f s", static_cast<double>(ms) / 1000);
}

// What pulls wait for at the shards, a line each: "barrier at step 12 waits for worker:1 for
// 3.2 s" (SYNC, shards grouped by step), or "2 pulls wait at the SSP bound for 1.2 s; slowest:
// worker:1 at clock 5".
void AppendWaits(const JobSnapshot& job, std::vector<std::string>* lines) {
  struct Wait {
    std::set<int> missing;
    int64_t pulls = 0;
    int64_t oldest_ms = 0;
  };
  std::map<int64_t, Wait> by_step;  // A barrier's steps; other modes under step -1.
  int64_t slowest_clock = INT64_MAX;
  int slowest = -1;
  for (const JobStats& shard : job.shards) {
    if (shard.parked_pulls() == 0) continue;
    const ModeTraits* mode = FindModeTraits(shard.mode());
    Wait& wait = by_step[mode != nullptr && mode->barrier ? shard.step() : -1];
    wait.missing.insert(shard.waiting_for().begin(), shard.waiting_for().end());
    wait.pulls += shard.parked_pulls();
    wait.oldest_ms = std::max(wait.oldest_ms, shard.oldest_parked_pull_ms());
    for (const WorkerStats& worker : shard.workers()) {
      if (!worker.left() && worker.clock() < slowest_clock) {
        slowest_clock = worker.clock();
        slowest = worker.worker();
      }
    }
  }
  for (const auto& [step, wait] : by_step) {
    const std::string pulls = Plural(wait.pulls, "pull");
    if (step < 0) {
      const ConsistencyConfig::Mode mode = job.shards[0].mode();
      const ModeTraits* traits = FindModeTraits(mode);
      const bool bound = traits != nullptr && traits->staleness == Staleness::kUpToBound;
      std::string line = absl::StrCat(
          "  ", pulls, " wait", wait.pulls == 1 ? "s" : "",
          bound ? absl::StrCat(" at the ", ConsistencyConfig::Mode_Name(mode), " bound") : "",
          " for ", Seconds(wait.oldest_ms));
      if (bound && slowest >= 0) {
        absl::StrAppend(&line, "; slowest: worker:", slowest, " at clock ", slowest_clock);
      }
      lines->push_back(line);
    } else if (wait.missing.empty()) {
      lines->push_back(absl::StrCat("  barrier at step ", step, " holds ", pulls, " for ",
                                    Seconds(wait.oldest_ms)));
    } else {
      std::vector<std::string> missing;
      for (int worker : wait.missing) missing.push_back(absl::StrCat("worker:", worker));
      lines->push_back(absl::StrCat("  barrier at step ", step, " waits for ",
                                    absl::StrJoin(missing, ", "), " for ",
                                    Seconds(wait.oldest_ms)));
    }
  }
}

// A row per worker that has reported progress or that a shard lists.
void AppendWorkers(const JobSnapshot& job, std::vector<std::string>* lines) {
  const std::map<int, WorkerStaleness> staleness = StalenessByWorker(job.shards);
  std::map<int, const JobProgress*> progress;
  for (const JobProgress& worker : job.workers) progress[worker.worker()] = &worker;
  std::set<int> lost;
  for (const JobStats& shard : job.shards) {
    for (const WorkerStats& worker : shard.workers()) {
      if (worker.lost()) lost.insert(worker.worker());
    }
  }
  std::set<int> workers(lost);
  for (const auto& [worker, unused] : staleness) workers.insert(worker);
  for (const auto& [worker, unused] : progress) workers.insert(worker);
  if (workers.empty()) return;
  lines->push_back(absl::StrFormat("  %-10s %-8s %8s %8s %11s %10s %10s %5s", "WORKER", "STATE",
                                   "STEP", "GLOBAL", "EXAMPLES/S", "LOSS", "STALENESS", "MAX"));
  for (int worker : workers) {
    const auto it = progress.find(worker);
    const JobProgress* p = it == progress.end() ? nullptr : it->second;
    const std::string state = lost.count(worker) > 0 ? "LOST"
                              : p != nullptr         ? JobProgress::State_Name(p->state())
                                                     : "-";
    const bool stepped = p != nullptr && p->step() > 0;
    const auto found = staleness.find(worker);
    const bool applied = found != staleness.end() && found->second.total > 0;
    lines->push_back(
        absl::StrFormat("  %-10s %-8s %8s %8s %11s %10s %10s %5s", absl::StrCat("worker:", worker),
                        state, p != nullptr ? absl::StrCat(p->step()) : "-",
                        p != nullptr ? absl::StrCat(p->global_step()) : "-",
                        stepped ? absl::StrFormat("%.0f", p->examples_per_second()) : "-",
                        stepped ? absl::StrFormat("%.4g", p->loss()) : "-",
                        applied ? absl::StrFormat("%.2f", found->second.mean()) : "-",
                        applied ? absl::StrCat(found->second.max) : "-"));
  }
}

}  // namespace

std::string RenderTop(const ClusterSnapshot& now, const ClusterSnapshot* previous, int width) {
  std::vector<std::string> lines;
  const int64_t up = std::count_if(now.tasks.begin(), now.tasks.end(),
                                   [](const TaskSnapshot& task) { return task.up; });
  lines.push_back(absl::StrCat(
      "psctl top  ",
      absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(now.time_ms),
                       absl::UTCTimeZone()),
      "  tasks: ", up, " of ", now.tasks.size(), " up  ", Plural(now.jobs.size(), "job")));
  lines.push_back("");
  AppendTasks(now, previous, &lines);
  for (const JobSnapshot& job : now.jobs) {
    lines.push_back("");
    lines.push_back(job.state_line);
    const std::string figures = JobLine(job);
    if (!figures.empty()) lines.push_back(absl::StrCat("  ", figures));
    AppendWaits(job, &lines);
    AppendWorkers(job, &lines);
  }
  std::string screen;
  for (std::string& line : lines) {
    if (width > 0 && line.size() > static_cast<size_t>(width)) line.resize(width);
    absl::StrAppend(&screen, line, "\n");
  }
  return screen;
}

}  // namespace ps
