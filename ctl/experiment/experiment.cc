#include "ctl/experiment/experiment.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <system_error>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/job/job_spec.h"
#include "common/json_text.h"
#include "ctl/job/job_defaults.h"
#include "ctl/job/job_runner.h"
#include "ctl/job/run_manifest.h"
#include "ctl/experiment/sweep_table.h"

namespace ps {
namespace {

// "42s", "3m05s".
std::string Seconds(absl::Duration duration) {
  int64_t seconds = absl::ToInt64Seconds(duration + absl::Milliseconds(500));
  return seconds < 60 ? absl::StrCat(seconds, "s")
                      : absl::StrFormat("%dm%02ds", seconds / 60, seconds % 60);
}

// The sweep's progress: a bar redrawn in place on a terminal, log lines otherwise. Lines about
// finished points are printed in both cases. Thread-safe.
class SweepProgress {
 public:
  // `parallel`: how many points run at once.
  SweepProgress(std::ostream* out, bool live_line, int total, int parallel)
      : out_(*out), live_line_(live_line), total_(total), parallel_(parallel) {
    if (live_line_) ticker_ = std::thread([this] { Tick(); });
  }
  ~SweepProgress() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (ticker_.joinable()) ticker_.join();
    if (live_line_) out_ << "\r\033[K" << std::flush;
  }

  void Skipped(const SweepPoint& point) {
    absl::MutexLock lock(&mu_);
    ++done_;
    Print(absl::StrCat(Prefix(point), "done earlier, skipped"));
  }
  void Started(const SweepPoint& point, const std::string& results) {
    absl::MutexLock lock(&mu_);
    running_[point.index] = {point.id, clock_->Now()};
    if (!live_line_) Print(absl::StrCat(Prefix(point), "running (", results, ")"));
  }
  // `failure`: why the job failed, if it did.
  void Finished(const SweepPoint& point, const nlohmann::json& summary,
                const absl::Status& failure) {
    absl::MutexLock lock(&mu_);
    absl::Duration took = clock_->Now() - running_[point.index].start;
    running_.erase(point.index);
    ++done_;
    ++run_;
    run_time_ += took;
    std::string line = absl::StrCat(Prefix(point), summary.value("state", "?"), " in ",
                                    absl::StrFormat("%.1fs", absl::ToDoubleSeconds(took)));
    if (summary.contains("final_eval_loss") && summary["final_eval_loss"].is_number()) {
      absl::StrAppend(
          &line, absl::StrFormat(", eval loss %.4g", summary["final_eval_loss"].get<double>()));
    }
    absl::StrAppend(&line,
                    absl::StrFormat(", staleness %.2f", summary.value("staleness_mean", 0.0)));
    if (!failure.ok()) {
      constexpr size_t kMaxReason = 200;
      std::string reason(failure.message().substr(0, kMaxReason));
      absl::StrAppend(&line, ": ", reason, failure.message().size() > kMaxReason ? "..." : "");
    }
    if (!live_line_ && done_ < total_) absl::StrAppend(&line, " | ETA ", Seconds(Eta()));
    Print(line);
  }

 private:
  std::string Prefix(const SweepPoint& point) const {
    return absl::StrCat("[", point.index + 1, "/", total_, "] ", point.id, ": ");
  }
  // The mean time of the points run so far times the points left, less the time the running
  // ones have had, over the points run at once.
  absl::Duration Eta() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (run_ == 0) return absl::ZeroDuration();
    absl::Duration eta = run_time_ / run_ * (total_ - done_);
    for (const auto& [index, point] : running_) eta -= clock_->Now() - point.start;
    return std::max(eta / parallel_, absl::ZeroDuration());
  }
  std::string Bar() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    constexpr int kWidth = 24;
    int filled = total_ > 0 ? kWidth * done_ / total_ : kWidth;
    std::string bar = absl::StrCat("[", std::string(filled, '#'), std::string(kWidth - filled, '.'),
                                   "] ", done_, "/", total_, " points");
    if (running_.size() == 1) {
      const Running& point = running_.begin()->second;
      absl::StrAppend(&bar, " | running ", point.id, " (", Seconds(clock_->Now() - point.start),
                      ")");
    } else if (!running_.empty()) {
      absl::StrAppend(&bar, " | running ", running_.size(), " points");
    }
    if (run_ > 0 && done_ < total_) absl::StrAppend(&bar, " | ETA ", Seconds(Eta()));
    return bar;
  }
  // A permanent line; the bar is redrawn below it.
  void Print(const std::string& line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (live_line_) {
      out_ << "\r\033[K" << line << "\n" << Bar() << std::flush;
    } else {
      out_ << line << "\n" << std::flush;
    }
  }
  void Tick() {
    absl::MutexLock lock(&mu_);
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    while (!clock_->AwaitWithDeadline(&mu_, absl::Condition(&stopping),
                                      clock_->Now() + absl::Milliseconds(250))) {
      out_ << "\r\033[K" << Bar() << std::flush;
    }
  }

  std::ostream& out_;
  Clock* const clock_ = Clock::Real();  // Times the points for display only.
  const bool live_line_;
  const int total_;
  const int parallel_;
  std::thread ticker_;
  absl::Mutex mu_;
  int done_ ABSL_GUARDED_BY(mu_) = 0;  // Finished or skipped.
  int run_ ABSL_GUARDED_BY(mu_) = 0;   // Run by this call.
  absl::Duration run_time_ ABSL_GUARDED_BY(mu_);
  struct Running {
    std::string id;
    absl::Time start;
  };
  std::map<int, Running> running_ ABSL_GUARDED_BY(mu_);  // By point index.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

// Whether `recorded` (a run's settings hash) is `point`'s: its JobSpec as the sweep gives it, or
// with psctl's defaults (ctl/job/job_defaults.h: both, or the lease alone where the ps had no
// --checkpoint_dir).
bool SameSettings(const std::string& recorded, const SweepPoint& point) {
  std::vector<std::string> applied;
  JobSpec with_defaults = WithCrashDefaults(point.spec, point.num_workers, &applied);
  JobSpec lease_only = with_defaults;
  if (!point.spec.has_checkpoint()) lease_only.clear_checkpoint();
  for (const JobSpec& spec : {point.spec, with_defaults, lease_only}) {
    if (recorded == SettingsHash(spec)) return true;
  }
  return false;
}

// Whether `dir` holds a finished run of `point`: summary.json says DONE, and its manifest.json
// (ctl/job/run_manifest.h) has the point's settings hash (its JobSpec but for the job and run ids,
// unique to each run; SameSettings) on as many workers and ps tasks.
absl::StatusOr<bool> DoneEarlier(const SweepPoint& point, const std::string& dir,
                                 FileSystem* fs) {
  nlohmann::json summary = ReadSummary(dir, fs);
  if (summary.is_null() || summary.value("state", "") != "DONE") return false;
  absl::StatusOr<std::string> text = fs->ReadFile(dir + "/manifest.json");
  absl::StatusOr<nlohmann::json> parsed = ParseJsonText(text.ok() ? *text : "");
  const nlohmann::json manifest = parsed.ok() ? *std::move(parsed) : nlohmann::json();
  bool same = false;
  if (manifest.is_object() && manifest.contains("settings_hash") &&
      manifest["settings_hash"].is_string() && manifest.contains("cluster")) {
    const nlohmann::json& workers = manifest["cluster"]["cluster"]["worker"];
    const nlohmann::json& ps = manifest["cluster"]["cluster"]["ps"];
    same = SameSettings(manifest["settings_hash"].get<std::string>(), point) &&
           workers.is_array() && static_cast<int>(workers.size()) == point.num_workers &&
           ps.is_array() && static_cast<int>(ps.size()) == point.num_ps;
  }
  if (!same) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " holds a finished job other than point ", point.id,
        " (the sweep changed since it ran): choose another --results, or pass --overwrite to "
        "run every point again"));
  }
  return true;
}

// On a running cluster: INVALID_ARGUMENT unless `point` needs as many tasks as it `has`.
absl::Status CheckTasks(const Sweep& sweep, const SweepPoint& point, int needs, int has,
                        absl::string_view noun, absl::string_view setting) {
  if (needs == has) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      sweep.source, ": point ", point.id, " needs ", needs, " ", noun, " but the cluster has ", has,
      ": sweep over \"", setting, "\" with --local, or give the cluster that many"));
}

absl::Status WriteSweepJson(const Sweep& sweep, const std::string& path, FileSystem* fs) {
  nlohmann::json json;
  json["name"] = sweep.name;
  json["description"] = sweep.description;
  json["source"] = sweep.source;
  json["target_loss"] = sweep.target_loss;
  json["repeats"] = sweep.repeats;
  json["settings"] = SettingPaths(sweep);
  json["select"] = sweep.select;
  return fs->WriteFileAtomically(path, json.dump(2) + "\n");
}

// Runs one point to its end; its output goes to `log`.
absl::Status RunPoint(const SweepPoint& point, const JobSpec& spec,
                      const ExperimentOptions& options, const std::string& results,
                      std::ostream* log) {
  SubmitOptions submit;
  submit.results_dir = results;
  submit.overwrite = true;  // A point that did not finish runs again from the start.
  submit.interrupted = options.interrupted;
  submit.out = log;
  if (options.cluster.has_value()) {
    absl::Status status = SubmitJob(*options.cluster, spec, submit);
    // Finished or not, the job goes from the ps shards: a long sweep does not fill them up.
    StopJobEverywhere(*options.cluster, spec.job_id()).IgnoreError();
    return status;
  }
  LocalClusterOptions local = options.local;
  local.num_ps = point.num_ps;
  local.num_workers = point.num_workers;
  local.dir = absl::StrCat(options.results_dir, "/logs/", point.dir_name, ".cluster");
  for (const std::string& directory : DataDirectories(spec)) local.data_roots.push_back(directory);
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster;
  // A port found free may be taken by another program before a daemon binds it: try again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    cluster = LocalCluster::Start(local);
    if (cluster.ok() || !absl::IsUnavailable(cluster.status())) break;
  }
  if (!cluster.ok()) return cluster.status();
  absl::Status status = SubmitJob((*cluster)->cluster(), spec, submit);
  (*cluster)->Stop();
  return status;
}

// Before any point runs: the options and the points' clusters checked, the results directory
// made, sweep.json and the sweep table `table` written, and which points are done already
// (none with --overwrite).
absl::StatusOr<std::vector<bool>> PrepareResults(const Sweep& sweep,
                                                 const std::vector<SweepPoint>& points,
                                                 const ExperimentOptions& options,
                                                 const std::string& table) {
  if (options.parallel < 1 || options.parallel > kMaxParallelPoints) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--parallel is ", options.parallel, ": run 1 to ", kMaxParallelPoints,
        " points at once (1: one after another)"));
  }
  if (options.cluster.has_value()) {
    for (const SweepPoint& point : points) {
      absl::Status status =
          CheckTasks(sweep, point, point.num_workers, options.cluster->NumTasks(kWorkerJob),
                     "workers", kWorkersSetting);
      if (status.ok()) {
        status = CheckTasks(sweep, point, point.num_ps, options.cluster->NumTasks(kPsJob),
                            "ps tasks", kPsSetting);
      }
      if (!status.ok()) return status;
    }
  }
  absl::Status created = options.fs->CreateDirectories(options.results_dir + "/logs");
  if (!created.ok()) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create the results directory ",
                                                    options.results_dir, ": ", created.message()));
  }
  std::vector<bool> done(points.size(), false);
  for (size_t i = 0; i < points.size() && !options.overwrite; ++i) {
    absl::StatusOr<bool> earlier =
        DoneEarlier(points[i], absl::StrCat(options.results_dir, "/", points[i].dir_name),
                    options.fs);
    if (!earlier.ok()) return earlier.status();
    done[i] = *earlier;
  }
  absl::Status status = WriteSweepJson(sweep, options.results_dir + "/sweep.json", options.fs);
  if (!status.ok()) return status;
  status = WriteSweepTable(table, sweep, points, options.results_dir, options.fs);
  if (!status.ok()) return status;
  return done;
}

}  // namespace

absl::Status RunExperiment(const Sweep& sweep, const std::vector<SweepPoint>& points,
                           const ExperimentOptions& options) {
  const std::string table = options.results_dir + "/sweep.csv";
  absl::StatusOr<std::vector<bool>> prepared = PrepareResults(sweep, points, options, table);
  if (!prepared.ok()) return prepared.status();
  const std::vector<bool> done = *std::move(prepared);

  // Job ids are unique to this run: a long-lived cluster may have seen the sweep before.
  const std::string run_tag =
      absl::FormatTime("%Y%m%d-%H%M%S", Clock::Real()->Now(), absl::LocalTimeZone());
  const absl::Status interrupted = absl::CancelledError(
      "interrupted; the points done so far are kept: run the same command again to resume");
  SweepProgress progress(options.out, options.live_line, static_cast<int>(points.size()),
                         options.parallel);
  for (size_t i = 0; i < points.size(); ++i) {
    if (done[i]) progress.Skipped(points[i]);
  }
  // Up to `parallel` points at once, in order: each runner takes the next point not done. The
  // first point that cannot be run at all (or an interrupt) stops new points from starting; the
  // points running finish (an interrupt stops them too).
  absl::Mutex mu;
  size_t next = 0;
  absl::Status first_error;  // Guarded by mu.
  auto run_points = [&]() {
    while (true) {
      size_t i;
      {
        absl::MutexLock lock(&mu);
        while (next < points.size() && done[next]) ++next;
        if (next == points.size() || !first_error.ok()) return;
        if (options.interrupted != nullptr && options.interrupted->load()) {
          first_error = interrupted;
          return;
        }
        i = next++;
      }
      const SweepPoint& point = points[i];
      const std::string results = absl::StrCat(options.results_dir, "/", point.dir_name);
      const std::string log_path =
          absl::StrCat(options.results_dir, "/logs/", point.dir_name, ".log");
      std::ofstream log(log_path, std::ios::trunc);
      JobSpec spec = point.spec;
      spec.set_job_id(absl::StrCat(spec.job_id(), "-", run_tag));
      // What an earlier, unfinished run left says nothing about this one.
      std::error_code ignored;
      std::filesystem::remove(results + "/summary.json", ignored);
      std::filesystem::remove(results + "/manifest.json", ignored);
      progress.Started(point, results);
      absl::Status status = RunPoint(point, spec, options, results, &log);
      nlohmann::json summary = ReadSummary(results, options.fs);
      absl::MutexLock lock(&mu);
      absl::Status written =
          WriteSweepTable(table, sweep, points, options.results_dir, options.fs);
      if (absl::IsCancelled(status)) {
        if (first_error.ok()) first_error = interrupted;
        return;
      }
      if (summary.is_null()) {
        if (first_error.ok()) {
          first_error =
              absl::Status(status.code(), absl::StrCat("point ", point.id, ": ", status.message(),
                                                       " (psctl's output: ", log_path, ")"));
        }
        return;
      }
      if (!written.ok()) {
        if (first_error.ok()) first_error = written;
        return;
      }
      if (!status.ok()) log << "psctl: " << status.message() << "\n";
      progress.Finished(point, summary, status);
    }
  };
  {
    std::vector<std::thread> runners;
    for (int r = 1; r < options.parallel; ++r) runners.emplace_back(run_points);
    run_points();
    for (std::thread& runner : runners) runner.join();
  }
  if (!first_error.ok()) return first_error;
  int failed = 0;
  for (const SweepPoint& point : points) {
    nlohmann::json summary =
        ReadSummary(absl::StrCat(options.results_dir, "/", point.dir_name), options.fs);
    if (summary.is_null() || summary.value("state", "") != "DONE") ++failed;
  }
  *options.out << "sweep " << sweep.name << ": " << points.size() << " points, "
               << points.size() - failed << " done, " << failed << " failed; table in " << table
               << "; plots: psctl report " << options.results_dir << "\n";
  return absl::OkStatus();
}

}  // namespace ps
