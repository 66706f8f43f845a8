#include "ctl/job/results_writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/json_text.h"
#include "ctl/export/npy.h"
#include "ctl/job/job_figures.h"
#include "common/process/version.h"

namespace ps {
namespace {

// `status` of writing a results file, with the fix for a full disk.
absl::Status WithFix(absl::Status status) {
  if (!absl::IsResourceExhausted(status)) return status;
  return absl::ResourceExhaustedError(absl::StrCat(
      status.message(), ": free space on that disk, or choose another --results"));
}

// A new file at `path` holding `header`, for rows to be appended.
absl::StatusOr<std::unique_ptr<AppendableFile>> NewCsv(FileSystem* fs, const std::string& path,
                                                       absl::string_view header) {
  absl::StatusOr<std::unique_ptr<AppendableFile>> file = fs->NewAppendableFile(path);
  if (!file.ok()) return WithFix(file.status());
  absl::Status status = (*file)->Append(header);
  if (status.ok()) status = (*file)->Flush();
  if (!status.ok()) return WithFix(status);
  return file;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ResultsWriter>> ResultsWriter::Create(
    const std::string& dir, bool overwrite, const ResultsWriterOptions& options) {
  std::error_code error;
  if (std::filesystem::exists(dir, error) && !std::filesystem::is_empty(dir, error)) {
    if (!overwrite) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the results directory ", dir,
          " exists and is not empty; choose another --results, or pass --overwrite"));
    }
    std::filesystem::remove_all(dir, error);
  }
  absl::Status created = options.fs->CreateDirectories(dir + "/params");
  if (!created.ok()) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create the results directory ", dir, ": ", created.message()));
  }
  std::unique_ptr<ResultsWriter> writer(new ResultsWriter(dir, options.fs, options.clock));
  absl::MutexLock lock(&writer->mu_);
  absl::StatusOr<std::unique_ptr<AppendableFile>> metrics = NewCsv(
      options.fs, dir + "/metrics.csv",
      "time_s,worker,step,global_step,epoch,loss,examples_per_second,staleness,bytes_sent,"
      "bytes_received\n");
  if (!metrics.ok()) return metrics.status();
  writer->metrics_ = *std::move(metrics);
  absl::StatusOr<std::unique_ptr<AppendableFile>> eval =
      NewCsv(options.fs, dir + "/eval.csv", "time_s,step,loss,accuracy,examples\n");
  if (!eval.ok()) return eval.status();
  writer->eval_ = *std::move(eval);
  absl::StatusOr<std::unique_ptr<AppendableFile>> validation =
      NewCsv(options.fs, dir + "/validation.csv", "time_s,step,loss,accuracy,examples\n");
  if (!validation.ok()) return validation.status();
  writer->validation_ = *std::move(validation);
  absl::StatusOr<std::unique_ptr<AppendableFile>> events =
      NewCsv(options.fs, dir + "/events.csv", "time_s,event,task,step,checkpoint,steps_lost,detail\n");
  if (!events.ok()) return events.status();
  writer->events_ = *std::move(events);
  return writer;
}

absl::Status ResultsWriter::WriteJob(const JobSpec& spec, const ClusterSpec& cluster) {
  nlohmann::json job;
  job["spec"] = ProtoToJson(spec);
  job["cluster"] = nlohmann::json::parse(cluster.ToJson());
  job["version"] = kVersion;
  {
    absl::MutexLock lock(&mu_);
    cluster_ = job["cluster"];
  }
  return WriteFile("job.json", job.dump(2) + "\n");
}

void ResultsWriter::SetTasks(std::vector<TaskManifest> tasks) {
  absl::MutexLock lock(&mu_);
  tasks_ = std::move(tasks);
}

absl::Status ResultsWriter::WriteFile(const std::string& name, const std::string& text) {
  return WithFix(fs_->WriteFileAtomically(absl::StrCat(dir_, "/", name), text));
}

void ResultsWriter::RecordProgress(const JobProgress& progress) {
  double time_s = absl::ToDoubleSeconds(clock_->Now() - start_);
  absl::MutexLock lock(&mu_);
  // Numbers as an ostream prints them (6 significant digits), as the files always held them.
  if (progress.step() > 0) {
    std::ostringstream row;
    row << time_s << "," << progress.worker() << "," << progress.step() << ","
        << progress.global_step() << "," << progress.epoch() << "," << progress.loss() << ","
        << progress.examples_per_second() << "," << progress.staleness() << ","
        << progress.bytes_sent() << "," << progress.bytes_received() << "\n";
    AppendRow(metrics_.get(), row.str());
  }
  if (progress.worker() != 0) return;
  if (progress.has_eval()) RecordEval(time_s, progress.eval(), eval_.get(), &last_eval_step_);
  if (progress.has_validation()) {
    RecordEval(time_s, progress.validation(), validation_.get(), &last_validation_step_);
  }
}

void ResultsWriter::RecordEval(double time_s, const EvalResult& eval, AppendableFile* file,
                               int64_t* last_step) {
  if (eval.step() <= *last_step) return;
  *last_step = eval.step();
  std::ostringstream row;
  row << time_s << "," << eval.step() << "," << eval.loss() << "," << eval.accuracy() << ","
      << eval.examples() << "\n";
  AppendRow(file, row.str());
}

void ResultsWriter::RecordEvent(const JobEvent& event) {
  auto number = [](int64_t n) { return n < 0 ? std::string() : absl::StrCat(n); };
  std::ostringstream row;
  // The detail is free text: quoted, its quotes doubled (RFC 4180).
  row << absl::ToDoubleSeconds(clock_->Now() - start_) << "," << event.event << "," << event.task
      << "," << number(event.step) << "," << event.checkpoint << "," << number(event.steps_lost)
      << ",\"" << absl::StrReplaceAll(event.detail, {{"\"", "\"\""}, {"\n", " "}}) << "\"\n";
  absl::MutexLock lock(&mu_);
  AppendRow(events_.get(), row.str());
}

void ResultsWriter::AppendRow(AppendableFile* file, const std::string& row) {
  absl::Status status = file->Append(row);
  if (status.ok()) status = file->Flush();
  if (!status.ok() && progress_error_.ok()) progress_error_ = WithFix(status);
}

absl::Status ResultsWriter::WriteStaleness(const std::vector<JobStats>& shards) {
  std::string text = "shard,worker,staleness,count\n";
  for (const JobStats& shard : shards) {
    for (const WorkerStats& worker : shard.workers()) {
      for (int s = 0; s < worker.staleness().counts_size(); ++s) {
        if (worker.staleness().counts(s) == 0) continue;
        absl::StrAppend(&text, shard.ps_index(), ",", worker.worker(), ",", s, ",",
                        worker.staleness().counts(s), "\n");
      }
    }
  }
  return WriteFile("staleness.csv", text);
}

absl::Status ResultsWriter::RecordStalenessSnapshot(const std::vector<JobStats>& shards) {
  const double time_s = absl::ToDoubleSeconds(clock_->Now() - start_);
  absl::MutexLock lock(&mu_);
  if (timeline_ == nullptr) {
    absl::StatusOr<std::unique_ptr<AppendableFile>> file = NewCsv(
        fs_, dir_ + "/staleness_timeline.csv", "time_s,shard,worker,staleness,count\n");
    if (!file.ok()) return file.status();
    timeline_ = *std::move(file);
  }
  std::ostringstream rows;
  for (const JobStats& shard : shards) {
    for (const WorkerStats& worker : shard.workers()) {
      for (int s = 0; s < worker.staleness().counts_size(); ++s) {
        const int64_t count = worker.staleness().counts(s);
        int64_t& written = timeline_counts_[{shard.ps_index(), worker.worker(), s}];
        if (count == written) continue;
        written = count;
        rows << time_s << "," << shard.ps_index() << "," << worker.worker() << "," << s << ","
             << count << "\n";
      }
    }
  }
  if (!rows.str().empty()) AppendRow(timeline_.get(), rows.str());
  return absl::OkStatus();
}

absl::Status ResultsWriter::WriteParameters(const ParameterSpec& spec,
                                            const MutableVariables& values) {
  for (const VariableDef& variable : spec.variables()) {
    std::vector<int64_t> shape(variable.shape().begin(), variable.shape().end());
    std::string name = absl::StrReplaceAll(variable.name(), {{"/", "_"}});
    absl::Status status = WriteNpy(absl::StrCat(dir_, "/params/", name, ".npy"), shape,
                                   values.at(variable.name()), fs_);
    if (!status.ok()) return WithFix(status);
  }
  absl::MutexLock lock(&mu_);
  parameters_written_ = true;
  return absl::OkStatus();
}

absl::Status ResultsWriter::WriteSummary(const JobSpec& spec,
                                         const std::vector<JobProgress>& last,
                                         const std::vector<JobStats>& shards,
                                         absl::Duration wall_time, const std::set<int>& lost,
                                         const std::set<int>& not_started) {
  nlohmann::json summary;
  summary["job_id"] = spec.job_id();
  std::string state = "DONE";
  int64_t steps = 0;
  nlohmann::json lost_workers = nlohmann::json::array();
  nlohmann::json left_workers = nlohmann::json::array();  // LEFT: psctl remove-worker.
  int64_t worker_steps = 0, bytes_sent = 0, bytes_received = 0;  // Of the workers not lost.
  nlohmann::json workers_not_started = nlohmann::json::array();
  for (const JobProgress& progress : last) {
    if (not_started.count(progress.worker()) > 0) {
      workers_not_started.push_back(progress.worker());
      continue;
    }
    if (lost.count(progress.worker()) > 0) {
      lost_workers.push_back(
          {{"worker", progress.worker()}, {"step", progress.step()}, {"error", progress.error()}});
      continue;
    }
    if (progress.state() == JobProgress::LEFT) {
      left_workers.push_back({{"worker", progress.worker()}, {"step", progress.step()}});
    }
    // FAILED over STOPPED: the others are stopped because one failed. A worker that left
    // ended as asked.
    if (progress.state() != JobProgress::DONE && progress.state() != JobProgress::LEFT &&
        state != "FAILED") {
      state = JobProgress::State_Name(progress.state());
    }
    if (progress.state() == JobProgress::FAILED && !summary.contains("error")) {
      summary["error"] = absl::StrCat("worker:", progress.worker(), ": ", progress.error());
      summary["error_code"] = absl::StatusCodeToString(
          static_cast<absl::StatusCode>(progress.error_code()));
    }
    steps = std::max(steps, progress.step());
    worker_steps += progress.step();
    bytes_sent += progress.bytes_sent();
    bytes_received += progress.bytes_received();
  }
  summary["state"] = state;
  {
    absl::MutexLock lock(&mu_);
    summary["parameters_written"] = parameters_written_;
  }
  summary["lost_workers"] = lost_workers;
  summary["left_workers"] = left_workers;
  summary["workers_not_started"] = workers_not_started;
  summary["steps"] = steps;
  summary["wall_time_s"] = absl::ToDoubleSeconds(wall_time);
  const JobFigures figures =
      FiguresOf(spec.consistency().mode(), last, wall_time, spec.steps());
  summary["examples_per_second"] = figures.examples_per_second;
  if (!figures.note.empty()) summary["note"] = figures.note;
  // A worker's bytes per step, over every worker's steps.
  summary["bytes_sent_per_step"] =
      worker_steps > 0 ? static_cast<double>(bytes_sent) / worker_steps : 0.0;
  summary["bytes_received_per_step"] =
      worker_steps > 0 ? static_cast<double>(bytes_received) / worker_steps : 0.0;
  if (!last.empty()) {
    if (last[0].has_data()) {
      const DataSummary& data = last[0].data();
      summary["data"] = {{"train_examples", data.train_examples()},
                         {"validation_examples", data.validation_examples()},
                         {"test_examples", data.test_examples()},
                         {"scaling", data.scaling()}};
      if (data.scaling() == "min_max") {
        summary["data"]["feature_min"] = std::vector<float>(data.feature_min().begin(),
                                                            data.feature_min().end());
        summary["data"]["feature_max"] = std::vector<float>(data.feature_max().begin(),
                                                            data.feature_max().end());
      }
    }
    if (last[0].has_validation()) {
      summary["final_validation_loss"] = last[0].validation().loss();
      summary["final_validation_accuracy"] = last[0].validation().accuracy();
    }
    summary["final_train_loss"] = last[0].loss();
    if (last[0].has_eval()) {
      summary["final_eval_loss"] = last[0].eval().loss();
      summary["final_eval_accuracy"] = last[0].eval().accuracy();
      summary["final_eval_step"] = last[0].eval().step();
    }
  }
  double staleness_sum = 0;
  int64_t staleness_count = 0, staleness_max = 0, applied_updates = 0;
  std::map<std::string, int64_t> dropped, rejected;
  for (const JobStats& shard : shards) {
    staleness_sum += shard.staleness().mean() * shard.staleness().total();
    staleness_count += shard.staleness().total();
    staleness_max = std::max(staleness_max, shard.staleness().max());
    applied_updates = std::max(applied_updates, shard.applied_updates());
    for (const auto& [reason, count] : shard.dropped()) dropped[reason] += count;
    for (const auto& [reason, count] : shard.rejected()) rejected[reason] += count;
  }
  summary["staleness_mean"] = staleness_count > 0 ? staleness_sum / staleness_count : 0.0;
  summary["staleness_max"] = staleness_max;
  summary["applied_updates"] = applied_updates;
  int64_t dropped_total = 0;
  for (const auto& [reason, count] : dropped) dropped_total += count;
  summary["dropped_gradients"] = dropped_total;
  summary["dropped_by_reason"] = dropped;
  summary["rejected_by_reason"] = rejected;
  absl::Status written = WriteFile("summary.json", summary.dump(2) + "\n");
  if (!written.ok()) return written;
  absl::MutexLock lock(&mu_);
  const RunManifest manifest{spec, cluster_, tasks_, start_, clock_->Now()};
  written = WriteFile("manifest.json", ManifestJson(manifest, summary).dump(2) + "\n");
  if (!written.ok()) return written;
  return progress_error_;
}

}  // namespace ps
