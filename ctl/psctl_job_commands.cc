// psctl's commands that run jobs and sweeps: local, submit, status, stop, check, experiment and
// report (ctl/psctl_commands.h).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/cluster/cluster_flags.h"
#include "common/cluster/cluster_spec.h"
#include "common/cluster/environment.h"
#include "common/job/job_schema.h"
#include "common/job/job_spec.h"
#include "common/security/security_flags.h"
#include "ctl/cluster/cluster_status.h"
#include "ctl/dashboard/dashboard.h"
#include "ctl/job/exit_code.h"
#include "ctl/experiment/experiment.h"
#include "ctl/job/job_runner.h"
#include "ctl/cluster/local_cluster.h"
#include "ctl/cluster/local_credentials.h"
#include "ctl/experiment/report_runner.h"
#include "ctl/experiment/sweep.h"
#include "worker/compute/device.h"
#include "common/json_text.h"
#include "ctl/export/apply_log_files.h"
#include "ctl/psctl_commands.h"
#include "ctl/psctl_flags.h"

namespace ps {

std::atomic<bool> interrupted{false};

int Fail(const absl::Status& status) {
  std::cerr << "psctl: " << status.message() << "\n";
  return ExitCode(status);
}

absl::StatusOr<ClusterSpec> Cluster() {
  return LoadClusterSpec(ClusterSourceFromFlags(FLAGS_cluster_spec, ""), ProcessEnvironment());
}

namespace {

// Runs `spec` on `cluster`, following it with a live line on a terminal.
int Submit(const ClusterSpec& cluster, const JobSpec& spec, const std::string& results) {
  SubmitOptions options;
  options.results_dir = results;
  options.overwrite = FLAGS_overwrite;
  options.detach = FLAGS_detach;
  options.wait_for_cluster = absl::Seconds(std::max(0, FLAGS_wait_for_cluster_s));
  options.replace = FLAGS_replace;
  options.resume = FLAGS_resume;
  options.interrupted = &interrupted;
  options.out = &std::cout;
  options.live_line = isatty(STDOUT_FILENO);
  absl::Status status = SubmitJob(cluster, spec, options);
  return status.ok() ? 0 : Fail(status);
}

// The job file at `path`, traced where --trace asks for it.
absl::StatusOr<JobSpec> ReadJobToRun(const std::string& path) {
  absl::StatusOr<JobSpec> spec = ReadJobSpecFile(path);
  if (spec.ok() && FLAGS_trace) spec->set_trace(true);
  return spec;
}

std::string ResultsDir(const JobSpec& spec) {
  return FLAGS_results.empty() ? absl::StrCat("results/", spec.job_id()) : FLAGS_results;
}

}  // namespace

// A cluster of `num_ps` ps and `num_workers` workers on this machine for `spec` (its data
// directories readable), its logs beside `results`; says so on stdout.
absl::StatusOr<std::unique_ptr<LocalCluster>> StartLocal(const JobSpec& spec, int num_ps,
                                                         int num_workers,
                                                         const std::string& results,
                                                         bool metrics) {
  LocalClusterOptions options;
  options.metrics = metrics;
  options.num_ps = num_ps;
  options.num_workers = num_workers;
  options.dir = results + ".cluster";
  options.device = FLAGS_device;
  options.checkpoint_dir = std::filesystem::absolute(FLAGS_checkpoint_dir).string();
  options.shared_checkpoint_dir = FLAGS_shared_checkpoint_dir;
  options.data_roots = DataDirectories(spec);
  options.max_restarts = FLAGS_restarts;
  options.out = &std::cout;
  // A throwaway CA and tokens of its own unless psctl was given TLS or tokens: its ports refuse
  // strangers on this host. Beside the ClusterSpec, where later psctl commands find them.
  absl::StatusOr<LocalCredentials> credentials =
      MakeLocalCredentials(options.dir, num_ps, num_workers);
  if (!credentials.ok()) return credentials.status();
  options.security = {};  // In daemon_args.
  options.daemon_args = credentials->daemon_args;
  options.ps_server_path =
      FLAGS_ps_server_binary.empty() ? SiblingBinary("server/ps_server") : FLAGS_ps_server_binary;
  options.ps_worker_path =
      FLAGS_ps_worker_binary.empty() ? SiblingBinary("worker/ps_worker") : FLAGS_ps_worker_binary;
  std::cout << "starting " << num_ps << " ps and " << num_workers
            << " workers on this machine (logs in " << options.dir << "; "
            << credentials->description << ")\n";
  absl::StatusOr<std::unique_ptr<LocalCluster>> local = LocalCluster::Start(options);
  if (local.ok()) std::cout << "cluster: " << (*local)->spec_path() << "\n";
  return local;
}

int Local() {
  std::string job_path = FLAGS_job.empty() ? "config/jobs/default.json" : FLAGS_job;
  absl::StatusOr<JobSpec> spec = ReadJobToRun(job_path);
  if (!spec.ok()) return Fail(spec.status());
  absl::Status valid = ValidateJobSpec(*spec, FLAGS_workers);
  if (!valid.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(job_path, ": ", valid.message())));
  }
  std::string results = ResultsDir(*spec);
  // Refuse a used results directory before starting anything.
  if (!FLAGS_overwrite && access(results.c_str(), F_OK) == 0) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "the results directory ", results, " exists; choose another --results, or pass "
        "--overwrite")));
  }
  if (FLAGS_metrics_port != -1 && FLAGS_metrics_port != 0) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "psctl local --metrics_port=", FLAGS_metrics_port, ": give 0 (every daemon on a free "
        "port of its own; they share this machine) or -1 (no /metrics)")));
  }
  absl::StatusOr<std::unique_ptr<LocalCluster>> local =
      StartLocal(*spec, FLAGS_ps, FLAGS_workers, results, FLAGS_metrics_port == 0);
  if (!local.ok()) return Fail(local.status());
  if (FLAGS_metrics_port == 0) {
    for (absl::string_view job : {kPsJob, kWorkerJob}) {
      for (int i = 0; i < (*local)->cluster().NumTasks(job); ++i) {
        std::cout << job << ":" << i << " metrics: http://127.0.0.1:"
                  << (*local)->metrics_port(job, i) << "/metrics\n";
      }
    }
  }
  std::cout << std::flush;
  int code = Submit((*local)->cluster(), *spec, results);
  if (FLAGS_keep_cluster && !interrupted) {
    std::cout << "the cluster keeps running (--keep_cluster): " << (*local)->spec_path()
              << "; Ctrl-C stops it" << std::endl;
    while (!interrupted) Clock::Real()->SleepFor(absl::Milliseconds(100));
  }
  (*local)->Stop();
  std::cout << "stopped the local cluster\n";
  return code;
}

int Replay(const std::string& recorded) {
  // The recorded run: its job, its cluster's size and its shards' logs.
  const std::string job_path = recorded + "/job.json";
  absl::StatusOr<std::string> text = FileSystem::Default()->ReadFile(job_path);
  if (!text.ok()) {
    return Fail(absl::NotFoundError(absl::StrCat(
        job_path, " cannot be read: give the results directory of a recorded run")));
  }
  absl::StatusOr<nlohmann::json> job = ParseJsonText(*text);
  if (!job.ok() || !job->contains("spec") || !job->contains("cluster")) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat(job_path, " is not a results directory's job.json")));
  }
  absl::StatusOr<JobSpec> spec = ParseJobSpecJson((*job)["spec"].dump(), job_path);
  if (!spec.ok()) return Fail(spec.status());
  const nlohmann::json& tasks = (*job)["cluster"]["cluster"];
  const int num_ps = tasks.contains("ps") ? static_cast<int>(tasks["ps"].size()) : 0;
  const int num_workers = tasks.contains("worker") ? static_cast<int>(tasks["worker"].size()) : 0;
  if (!spec->record_apply_log()) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        job_path, ": the run did not record its apply log: run it again with \"record_apply_log\": "
        "true in its job, then replay that run")));
  }
  absl::StatusOr<ApplyLogFiles> logs = ReadApplyLogFiles(recorded, num_ps);
  if (!logs.ok()) return Fail(logs.status());
  spec->clear_run_id();  // A run of its own.
  const std::string results = FLAGS_results.empty() ? recorded + "-replay" : FLAGS_results;
  if (!FLAGS_overwrite && access(results.c_str(), F_OK) == 0) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "the results directory ", results, " exists; choose another --results, or pass "
        "--overwrite")));
  }
  absl::StatusOr<std::unique_ptr<LocalCluster>> local =
      StartLocal(*spec, num_ps, num_workers, results, /*metrics=*/false);
  if (!local.ok()) return Fail(local.status());
  std::cout << std::flush;
  SubmitOptions options;
  options.results_dir = results;
  options.overwrite = FLAGS_overwrite;
  options.interrupted = &interrupted;
  options.out = &std::cout;
  options.live_line = isatty(STDOUT_FILENO);
  options.replay = &*logs;
  absl::Status status = SubmitJob((*local)->cluster(), *spec, options);
  (*local)->Stop();
  std::cout << "stopped the local cluster\n";
  return status.ok() ? 0 : Fail(status);
}

int SubmitCommand() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return Fail(cluster.status());
  if (FLAGS_job.empty()) return Fail(absl::InvalidArgumentError("--job=FILE is required"));
  absl::StatusOr<JobSpec> spec = ReadJobToRun(FLAGS_job);
  if (!spec.ok()) return Fail(spec.status());
  return Submit(*cluster, *spec, ResultsDir(*spec));
}

int Status() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return Fail(cluster.status());
  std::vector<absl::Status> unanswered;
  std::cout << ClusterStatus(*cluster, FLAGS_job, &unanswered);
  if (unanswered.empty()) return 0;
  // A task down says "retry" (a script waiting for the cluster); one that refused this caller's
  // credentials, "fix them" (docs/REFERENCE.md, "Exit codes").
  int code = kExitRetry;
  for (const absl::Status& status : unanswered) {
    if (ExitCode(status) == kExitBadInput) code = kExitBadInput;
  }
  const int tasks = cluster->NumTasks(kPsJob) + cluster->NumTasks(kWorkerJob);
  std::cerr << "psctl: " << unanswered.size() << " of the cluster's " << tasks << " tasks "
            << (unanswered.size() == 1 ? "does" : "do") << " not answer"
            << (code == kExitBadInput ? " (refused: check the credentials)" : " (down?)")
            << "\n";
  return code;
}

int Stop() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return Fail(cluster.status());
  if (FLAGS_job.empty()) return Fail(absl::InvalidArgumentError("--job=ID is required"));
  absl::Status status = StopJobEverywhere(*cluster, FLAGS_job);
  if (!status.ok()) return Fail(status);
  std::cout << "stopped job " << FLAGS_job << "\n";
  return 0;
}

int Check() {
  const ClusterSource source = ClusterSourceFromFlags(FLAGS_cluster_spec, FLAGS_task);
  const Environment environment = ProcessEnvironment();
  absl::StatusOr<ClusterSpec> cluster = LoadClusterSpec(source, environment);
  if (!cluster.ok()) return Fail(cluster.status());
  if (!FLAGS_task.empty()) {
    absl::StatusOr<ClusterConfig> config = ResolveClusterConfig(source, environment);
    if (!config.ok()) return Fail(config.status());
  }
  for (absl::string_view job : {kPsJob, kWorkerJob}) {
    const std::vector<std::string>& tasks = cluster->Tasks(job);
    for (size_t i = 0; i < tasks.size(); ++i) {
      std::cout << job << ":" << i << "\t" << tasks[i] << "\n";
    }
  }
  absl::StatusOr<Device> device = SelectDevice("auto", QueryUsableGpus());
  std::cout << "workers on this machine would compute on: " << device->description << "\n";
  return 0;
}

int Experiment() {
  if (FLAGS_sweep.empty()) return Fail(absl::InvalidArgumentError("--sweep=FILE is required"));
  const ClusterSource source = ClusterSourceFromFlags(FLAGS_cluster_spec, "");
  if (FLAGS_local == (!source.cluster_spec_path.empty() || !source.resolver.empty())) {
    return Fail(absl::InvalidArgumentError("give either --local (a local cluster for each point) "
                                           "or --cluster_spec=FILE (or --cluster_resolver)"));
  }
  absl::StatusOr<Sweep> sweep = ReadSweepFile(FLAGS_sweep);
  if (!sweep.ok()) return Fail(sweep.status());
  ExperimentOptions options;
  int default_workers = FLAGS_workers;
  int default_ps = sweep->num_ps;
  if (FLAGS_local) {
    options.local.device = FLAGS_device;
    options.local.ps_server_path = FLAGS_ps_server_binary.empty()
                                       ? SiblingBinary("server/ps_server")
                                       : FLAGS_ps_server_binary;
    options.local.ps_worker_path = FLAGS_ps_worker_binary.empty()
                                       ? SiblingBinary("worker/ps_worker")
                                       : FLAGS_ps_worker_binary;
  } else {
    absl::StatusOr<ClusterSpec> cluster = Cluster();
    if (!cluster.ok()) return Fail(cluster.status());
    default_workers = cluster->NumTasks(kWorkerJob);
    default_ps = cluster->NumTasks(kPsJob);
    options.cluster = *std::move(cluster);
  }
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, default_workers, default_ps);
  if (!points.ok()) return Fail(points.status());
  options.results_dir = FLAGS_results.empty() ? "results/" + sweep->name : FLAGS_results;
  if (FLAGS_local) {
    // One throwaway CA for every point's cluster (all on 127.0.0.1, a certificate per task
    // index up to the largest point's), unless psctl was given TLS or tokens.
    int most_ps = 1, most_workers = 1;
    for (const SweepPoint& point : *points) {
      most_ps = std::max(most_ps, point.num_ps);
      most_workers = std::max(most_workers, point.num_workers);
    }
    absl::StatusOr<LocalCredentials> credentials =
        MakeLocalCredentials(options.results_dir + "/logs/credentials", most_ps, most_workers);
    if (!credentials.ok()) return Fail(credentials.status());
    options.local.security = {};  // In daemon_args.
    options.local.daemon_args = credentials->daemon_args;
  }
  options.overwrite = FLAGS_overwrite;
  options.interrupted = &interrupted;
  options.parallel = FLAGS_parallel;
  options.out = &std::cout;
  options.live_line = isatty(STDOUT_FILENO);
  std::cout << "sweep " << sweep->name << ": " << points->size() << " points"
            << (FLAGS_local ? ", each on a local cluster" : "")
            << (FLAGS_parallel > 1 ? absl::StrCat(", ", FLAGS_parallel, " at once") : "")
            << "; results in " << options.results_dir << "\n";
  absl::Status status = RunExperiment(*sweep, *points, options);
  return status.ok() ? 0 : Fail(status);
}

int Report(const std::vector<std::string>& dirs) {
  ReportOptions options;
  options.script = FLAGS_report_script;
  options.python = FLAGS_python;
  std::error_code error;
  auto holds = [&error](const std::string& dir, const char* file) {
    return std::filesystem::exists(dir + "/" + file, error);
  };
  if (dirs.size() == 1 && !holds(dirs[0], "sweep.csv") && !holds(dirs[0], "manifest.json")) {
    return Fail(absl::NotFoundError(
        absl::StrCat(dirs[0], " holds no sweep.csv (give the results directory of `psctl "
                     "experiment`) nor manifest.json (give runs' results directories)")));
  }
  absl::StatusOr<std::string> output = dirs.size() == 1 && holds(dirs[0], "sweep.csv")
                                           ? RunReport(dirs[0], options)
                                           : CompareRuns(dirs, options);
  if (!output.ok()) return Fail(output.status());
  std::cout << *output;
  // One run: its pictures too, where they can be drawn (matplotlib, a writable directory); the
  // table on stdout stays the report's only output there.
  if (dirs.size() == 1 && !holds(dirs[0], "sweep.csv")) {
    absl::StatusOr<std::string> drawn = DrawRun(dirs[0], options);
    std::cerr << (drawn.ok() ? *drawn
                             : absl::StrCat("psctl: the run's plots were not drawn: ",
                                            drawn.status().message(), "\n"));
  }
  return 0;
}

}  // namespace ps
