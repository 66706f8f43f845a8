// psctl: the user's tool for a parameter-server cluster.
//
//   psctl local  [--job=config/jobs/default.json] [--ps=2] [--workers=2] [--results=DIR]
//                [--checkpoint_dir=checkpoints] [--resume] [--metrics_port=0] [--keep_cluster]
//   psctl submit --cluster_spec=FILE --job=FILE [--results=DIR] [--detach] [--replace|--resume]
//   psctl status --cluster_spec=FILE [--job=ID]
//   psctl stop   --cluster_spec=FILE --job=ID
//   psctl check  --cluster_spec=FILE [--task=ps:0]
//   psctl experiment --sweep=FILE (--local | --cluster_spec=FILE) [--results=DIR]
//   psctl export --checkpoint_dir=DIR[,DIR] --job=ID --out=DIR [--checkpoint=NAME]
//   psctl certs  --cluster_spec=FILE --out=DIR [--days=365]
//   psctl report DIR
//   psctl slurm-spec --slurm_num_ps=N [--slurm_base_port=8888]
//   psctl dashboard --cluster_spec=FILE [--bind_host=127.0.0.1] [--port=0] [--port_file=FILE]
//   psctl top    --cluster_spec=FILE [--iterations=N]
//   psctl prometheus-config --cluster_spec=FILE [--out=FILE] [--scrape_interval=5s]
//                [--metrics_port=PORT [--worker_metrics_port=PORT]]
//
// Every command that takes --cluster_spec takes --cluster_resolver=slurm instead (with
// --slurm_num_ps and --slurm_base_port) inside a Slurm job: deploy/slurm/.
//
// Exit status: 0 on success; 1 when the job or the cluster failed (the message says why);
// 2 for bad input or usage; 130 when interrupted (the job is stopped everywhere). dashboard
// runs until SIGINT or SIGTERM, then stops and exits 0; top likewise, or until q is pressed.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/build_info.h"
#include "common/cluster_flags.h"
#include "common/cluster_spec.h"
#include "common/daemon.h"
#include "common/environment.h"
#include "common/file_system.h"
#include "common/flag_help.h"
#include "common/job_schema.h"
#include "common/job_spec.h"
#include "common/security_flags.h"
#include "ctl/certs.h"
#include "ctl/checkpoint_export.h"
#include "ctl/cluster_client.h"
#include "ctl/cluster_probe.h"
#include "ctl/cluster_snapshot.h"
#include "ctl/cluster_status.h"
#include "ctl/dashboard.h"
#include "ctl/exit_code.h"
#include "ctl/experiment.h"
#include "ctl/full_screen.h"
#include "ctl/job_runner.h"
#include "ctl/local_cluster.h"
#include "ctl/prometheus_config.h"
#include "ctl/report_runner.h"
#include "ctl/sweep.h"
#include "ctl/top.h"
#include "worker/compute/device.h"

DEFINE_string(cluster_spec, "", "ClusterSpec JSON file; TF_CONFIG is used when empty");
DEFINE_string(task, "", "check: a task to check against the cluster, as TYPE:INDEX (ps:0)");
DEFINE_string(job, "", "local, submit: the job file (local: config/jobs/default.json when "
                       "empty); status, stop, export: the job id");
DEFINE_string(results, "", "where results go (default results/<job id>; experiment: "
                           "results/<sweep name>)");
DEFINE_bool(overwrite, false, "replace a results directory that is not empty (experiment: run "
                              "every point again)");
DEFINE_string(checkpoint_dir, "checkpoints",
              "local: where the ps daemons write checkpoints (ps:i in DIR/ps-i); give the same "
              "one to --resume a job on a fresh local cluster. export: the directories (comma-"
              "separated) holding the shards' checkpoint files");
DEFINE_string(checkpoint, "", "export: the checkpoint's name (default: the newest complete one)");
DEFINE_string(out, "", "export: the directory to write the model to; certs: for the "
                       "certificates; prometheus-config: the file to write (default: stdout)");
DEFINE_int32(days, 365, "certs: how long the certificates are valid");
DEFINE_string(users, "", "certs: more users (comma-separated), each with a certificate of its own");
DEFINE_bool(resume, false,
            "submit: continue the job from its latest complete checkpoint as a new run (the "
            "same job file; a damaged checkpoint falls back to the one before)");
DEFINE_bool(detach, false, "submit: start the job and print its id without following it");
DEFINE_bool(replace, false, "submit: when the cluster already holds the job id (an earlier run), "
                            "stop that run and delete its state everywhere, then start afresh");
DEFINE_int32(ps, 2, "local: ps tasks to start");
DEFINE_int32(workers, 2, "local: worker tasks to start (experiment --local: where the sweep "
                         "does not set \"workers\")");
DEFINE_string(sweep, "", "experiment: the sweep file (config/sweeps/*.json)");
DEFINE_bool(local, false, "experiment: run each point on a local cluster started for it");
DEFINE_int32(parallel, 1,
             "experiment: points run at once: jobs side by side on the cluster's daemons, or "
             "local clusters at once with --local");
DEFINE_string(report_script, "", "report: tools/report.py (default: found beside psctl or "
                                 "under the current directory)");
DEFINE_string(python, "/usr/bin/python3", "report: the python with matplotlib");
DEFINE_string(device, "auto", "local: each worker's --device");
DEFINE_string(ps_server_binary, "", "local: the ps_server program (default: beside psctl)");
DEFINE_string(ps_worker_binary, "", "local: the ps_worker program (default: beside psctl)");
DEFINE_string(bind_host, "127.0.0.1", "dashboard: the interface to serve the page on (plain "
                                      "HTTP: a trusted one)");
DEFINE_int32(port, 0, "dashboard: the page's HTTP port (0: any free one, see --port_file)");
DEFINE_string(port_file, "", "dashboard: if set, write the bound port here once listening");
DEFINE_int32(metrics_port, -1,
             "local: 0 starts every daemon with /metrics on a free port of its own (-1: none). "
             "prometheus-config: the /metrics port of every task (-1: ask each task for its own)");
DEFINE_int32(worker_metrics_port, -1,
             "prometheus-config: the workers' /metrics port where it is not --metrics_port's");
DEFINE_bool(keep_cluster, false,
            "local: after the job, keep the cluster running (for psctl submit, status and "
            "prometheus-config on DIR.cluster/cluster.json) until Ctrl-C or SIGTERM");
DEFINE_string(scrape_interval, "5s", "prometheus-config: how often Prometheus scrapes each task");
DEFINE_int32(iterations, 0, "top: screens to draw, one a second, before exiting (0: until q or "
                            "Ctrl-C)");

namespace ps {
namespace {

std::atomic<bool> interrupted{false};

int Fail(const absl::Status& status) {
  std::cerr << "psctl: " << status.message() << "\n";
  return ExitCode(status);
}

absl::StatusOr<ClusterSpec> Cluster() {
  return LoadClusterSpec(ClusterSourceFromFlags(FLAGS_cluster_spec, ""), ProcessEnvironment());
}

// Runs `spec` on `cluster`, following it with a live line on a terminal.
int Submit(const ClusterSpec& cluster, const JobSpec& spec, const std::string& results) {
  SubmitOptions options;
  options.results_dir = results;
  options.overwrite = FLAGS_overwrite;
  options.detach = FLAGS_detach;
  options.replace = FLAGS_replace;
  options.resume = FLAGS_resume;
  options.interrupted = &interrupted;
  options.out = &std::cout;
  options.live_line = isatty(STDOUT_FILENO);
  absl::Status status = SubmitJob(cluster, spec, options);
  return status.ok() ? 0 : Fail(status);
}

std::string ResultsDir(const JobSpec& spec) {
  return FLAGS_results.empty() ? absl::StrCat("results/", spec.job_id()) : FLAGS_results;
}

int Local() {
  std::string job_path = FLAGS_job.empty() ? "config/jobs/default.json" : FLAGS_job;
  absl::StatusOr<JobSpec> spec = ReadJobSpecFile(job_path);
  if (!spec.ok()) return Fail(spec.status());
  absl::Status valid = ValidateJobSpec(*spec, FLAGS_workers);
  if (!valid.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat(job_path, ": ", valid.message())));
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
  LocalClusterOptions options;
  options.metrics = FLAGS_metrics_port == 0;
  options.num_ps = FLAGS_ps;
  options.num_workers = FLAGS_workers;
  options.dir = results + ".cluster";
  options.device = FLAGS_device;
  options.checkpoint_dir = std::filesystem::absolute(FLAGS_checkpoint_dir).string();
  options.data_roots = DataDirectories(*spec);
  options.daemon_args = TokenFileArgs();
  options.ps_server_path =
      FLAGS_ps_server_binary.empty() ? SiblingBinary("server/ps_server") : FLAGS_ps_server_binary;
  options.ps_worker_path =
      FLAGS_ps_worker_binary.empty() ? SiblingBinary("worker/ps_worker") : FLAGS_ps_worker_binary;
  std::cout << "starting " << FLAGS_ps << " ps and " << FLAGS_workers
            << " workers on this machine (logs in " << options.dir << ")\n";
  absl::StatusOr<std::unique_ptr<LocalCluster>> local = LocalCluster::Start(options);
  if (!local.ok()) return Fail(local.status());
  std::cout << "cluster: " << (*local)->spec_path() << "\n";
  if (options.metrics) {
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
    while (!interrupted) absl::SleepFor(absl::Milliseconds(100));
  }
  (*local)->Stop();
  std::cout << "stopped the local cluster\n";
  return code;
}

int SubmitCommand() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return Fail(cluster.status());
  if (FLAGS_job.empty()) return Fail(absl::InvalidArgumentError("--job=FILE is required"));
  absl::StatusOr<JobSpec> spec = ReadJobSpecFile(FLAGS_job);
  if (!spec.ok()) return Fail(spec.status());
  return Submit(*cluster, *spec, ResultsDir(*spec));
}

int Status() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return Fail(cluster.status());
  std::cout << ClusterStatus(*cluster, FLAGS_job);
  return 0;
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
    for (size_t i = 0; i < tasks.size(); ++i) std::cout << job << ":" << i << "\t" << tasks[i] << "\n";
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
    options.local.daemon_args = TokenFileArgs();
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

int Export() {
  if (FLAGS_job.empty() || FLAGS_out.empty()) {
    return Fail(absl::InvalidArgumentError("--job=ID and --out=DIR are required"));
  }
  ExportOptions options;
  options.checkpoint_dirs = absl::StrSplit(FLAGS_checkpoint_dir, ',', absl::SkipEmpty());
  options.job_id = FLAGS_job;
  options.checkpoint = FLAGS_checkpoint;
  options.out_dir = FLAGS_out;
  absl::StatusOr<CheckpointManifest> exported = ExportCheckpoint(options);
  if (!exported.ok()) return Fail(exported.status());
  std::cout << "exported checkpoint " << exported->name() << " of job " << FLAGS_job
            << " (step " << exported->resume_step() << ") to " << FLAGS_out
            << ": one .npy per variable and model.safetensors\n";
  return 0;
}

int Certs() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return Fail(cluster.status());
  if (FLAGS_out.empty()) return Fail(absl::InvalidArgumentError("--out=DIR is required"));
  std::cout << "the cluster's CA and certificates, in " << FLAGS_out
            << "; give each task the files of its host:\n";
  absl::Status status = MakeClusterCertificates(
      *cluster, FLAGS_out, FLAGS_days, std::cout,
      absl::StrSplit(FLAGS_users, ',', absl::SkipEmpty()));
  if (!status.ok()) return Fail(status);
  return 0;
}

// The cluster --cluster_resolver=slurm resolves here, as the daemons' ClusterSpec JSON; inside a
// job step (srun sets SLURM_STEP_ID) with this task's "task" field, as each daemon resolves it.
int SlurmSpec() {
  ClusterSource source = ClusterSourceFromFlags(FLAGS_cluster_spec, FLAGS_task);
  source.resolver = "slurm";
  const Environment environment = ProcessEnvironment();
  absl::StatusOr<ClusterSpec> cluster = LoadClusterSpec(source, environment);
  if (!cluster.ok()) return Fail(cluster.status());
  std::optional<TaskId> task;
  if (FindVariable(environment, "SLURM_STEP_ID") != nullptr || !FLAGS_task.empty()) {
    absl::StatusOr<ClusterConfig> config = ResolveClusterConfig(source, environment);
    if (!config.ok()) return Fail(config.status());
    task = config->task;
  }
  std::cout << cluster->ToJson(task) << "\n";
  return 0;
}

// Serves the status page until SIGINT or SIGTERM, taking a snapshot of the cluster for each of
// its polls.
int Dashboard() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return Fail(cluster.status());
  absl::StatusOr<std::unique_ptr<ClusterClient>> client = ClusterClient::Create(*cluster);
  if (!client.ok()) return Fail(client.status());
  if (FLAGS_port < 0 || FLAGS_port > 65535) {
    return Fail(absl::InvalidArgumentError("--port is a port, or 0 for any free one"));
  }
  const ClusterClient* snapshot_client = client->get();
  absl::StatusOr<std::unique_ptr<DashboardServer>> server = DashboardServer::Start(
      FLAGS_bind_host, FLAGS_port,
      [snapshot_client] { return ClusterSnapshotJson(TakeClusterSnapshot(*snapshot_client)); });
  if (!server.ok()) return Fail(server.status());
  if (!FLAGS_port_file.empty()) {
    absl::Status written = WritePortFile(FLAGS_port_file, (*server)->bound_port());
    if (!written.ok()) return Fail(written);
  }
  const bool ipv6 = FLAGS_bind_host.find(':') != std::string::npos;
  std::cout << "psctl dashboard: http://" << (ipv6 ? "[" : "") << FLAGS_bind_host
            << (ipv6 ? "]" : "") << ":" << (*server)->bound_port() << "/ (Ctrl-C stops it)"
            << std::endl;
  while (!interrupted) absl::SleepFor(absl::Milliseconds(100));
  (*server)->Stop();
  return 0;
}

// Draws the cluster each second (ctl/top.h) until q, SIGINT or SIGTERM, or --iterations screens:
// full screen on a terminal, else each screen after a blank line, without terminal codes.
int Top() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return Fail(cluster.status());
  if (FLAGS_iterations < 0) {
    return Fail(absl::InvalidArgumentError("--iterations is a number of screens (0: no end)"));
  }
  absl::StatusOr<std::unique_ptr<ClusterClient>> client = ClusterClient::Create(*cluster);
  if (!client.ok()) return Fail(client.status());
  std::unique_ptr<FullScreen> screen = FullScreen::Open();  // Null when not on a terminal.
  // Waits until `deadline`: false when q was pressed or a stop signal came.
  auto wait = [&screen](absl::Time deadline) {
    for (absl::Time now = absl::Now(); now < deadline && !interrupted; now = absl::Now()) {
      const absl::Time slice = std::min(deadline, now + absl::Milliseconds(100));
      if (screen == nullptr) {
        absl::SleepFor(slice - now);
      } else if (const int key = screen->ReadKey(slice); key == 'q' || key == 'Q') {
        return false;
      }
    }
    return !interrupted;
  };
  std::optional<ClusterSnapshot> previous;
  absl::Time next = absl::Now();
  for (int drawn = 0; FLAGS_iterations == 0 || drawn < FLAGS_iterations; ++drawn) {
    if (drawn > 0 && !wait(next = std::max(next + absl::Seconds(1), absl::Now()))) break;
    ClusterSnapshot now = TakeClusterSnapshot(**client);
    const ClusterSnapshot* before = previous.has_value() ? &*previous : nullptr;
    if (screen != nullptr) {
      screen->Draw(RenderTop(now, before, screen->columns()));
    } else {
      std::cout << (drawn > 0 ? "\n" : "") << RenderTop(now, before, 0) << std::flush;
    }
    previous = std::move(now);
  }
  return 0;
}

int PrometheusConfigCommand() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return Fail(cluster.status());
  absl::StatusOr<MetricsPorts> ports;
  if (FLAGS_metrics_port > 0) {
    ports = FixedMetricsPorts(
        *cluster, FLAGS_metrics_port,
        FLAGS_worker_metrics_port == -1 ? FLAGS_metrics_port : FLAGS_worker_metrics_port);
  } else if (FLAGS_metrics_port == -1 && FLAGS_worker_metrics_port == -1) {
    absl::StatusOr<std::unique_ptr<ClusterClient>> client = ClusterClient::Create(*cluster);
    if (!client.ok()) return Fail(client.status());
    ports = AskMetricsPorts(**client);
  } else {
    ports = absl::InvalidArgumentError(
        "--metrics_port: every task's /metrics port (1..65535), or -1 to ask each task for its "
        "own; --worker_metrics_port only with it");
  }
  if (!ports.ok()) return Fail(ports.status());
  const ClusterSource source = ClusterSourceFromFlags(FLAGS_cluster_spec, "");
  absl::StatusOr<std::string> yaml = PrometheusConfig(
      *cluster, *ports, FLAGS_scrape_interval,
      !source.cluster_spec_path.empty() ? source.cluster_spec_path
      : source.resolver.empty()         ? std::string("TF_CONFIG")
                                        : absl::StrCat("--cluster_resolver=", source.resolver));
  if (!yaml.ok()) return Fail(yaml.status());
  if (FLAGS_out.empty()) {
    std::cout << *yaml;
    return 0;
  }
  absl::Status written = FileSystem::Default()->WriteFileAtomically(FLAGS_out, *yaml);
  if (!written.ok()) return Fail(written);
  std::cout << "wrote " << FLAGS_out << ": scrape jobs ps and worker, "
            << cluster->NumTasks(kPsJob) + cluster->NumTasks(kWorkerJob)
            << " targets; run prometheus --config.file=" << FLAGS_out << "\n";
  return 0;
}

// One directory with sweep.csv: the sweep's report; else the runs side by side.
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
  return 0;
}


// Every command: how it runs, and its help (psctl COMMAND --help).
struct Command {
  const char* name;
  int num_args;  // Words after the command (report's directories); -1: one or more.
  int (*run)(const std::vector<std::string>& args);
  const char* summary;  // One line for psctl --help.
  const char* usage;    // Its synopsis and examples.
  std::vector<std::string> flags;
};

const std::vector<Command>& Commands() {
  static const std::vector<Command>* const commands = new std::vector<Command>{
      {"local", 0, [](const std::vector<std::string>&) { return Local(); },
       "start a cluster on this machine, run a job on it, write results, stop it",
       "psctl local [--job=config/jobs/default.json] [--ps=2] [--workers=2] [flags]\n\n"
       "Examples:\n"
       "  psctl local\n"
       "  psctl local --job=config/jobs/mnist_sync.json --workers=4 --results=results/mnist\n"
       "  psctl local --metrics_port=0 --keep_cluster   # /metrics on every daemon; Ctrl-C ends",
       {"job", "ps", "workers", "results", "overwrite", "device", "checkpoint_dir", "resume",
        "metrics_port", "keep_cluster", "ps_server_binary", "ps_worker_binary"}},
      {"submit", 0, [](const std::vector<std::string>&) { return SubmitCommand(); },
       "run a job on a running cluster and follow it to its end",
       "psctl submit --cluster_spec=F --job=F [flags]\n\n"
       "Examples:\n"
       "  psctl submit --cluster_spec=cluster.json --job=config/jobs/default.json\n"
       "  psctl submit --cluster_spec=cluster.json --job=job.json --replace   # its id ran before\n"
       "  psctl submit --cluster_spec=cluster.json --job=job.json --resume    # from a checkpoint",
       {"cluster_spec", "job", "results", "overwrite", "replace", "resume", "detach"}},
      {"status", 0, [](const std::vector<std::string>&) { return Status(); },
       "every task up or down, its jobs, and one job's versions and staleness",
       "psctl status --cluster_spec=F [--job=ID]\n\n"
       "Examples:\n"
       "  psctl status --cluster_spec=cluster.json\n"
       "  psctl status --cluster_spec=cluster.json --job=default",
       {"cluster_spec", "job"}},
      {"stop", 0, [](const std::vector<std::string>&) { return Stop(); },
       "stop a job on every worker and delete it from every ps",
       "psctl stop --cluster_spec=F --job=ID\n\n"
       "Example:\n"
       "  psctl stop --cluster_spec=cluster.json --job=default",
       {"cluster_spec", "job"}},
      {"check", 0, [](const std::vector<std::string>&) { return Check(); },
       "validate a ClusterSpec (and a task of it)",
       "psctl check --cluster_spec=F [--task=ps:0]\n\n"
       "Examples:\n"
       "  psctl check --cluster_spec=cluster.json\n"
       "  psctl check --cluster_spec=cluster.json --task=worker:1",
       {"cluster_spec", "task"}},
      {"export", 0, [](const std::vector<std::string>&) { return Export(); },
       "a checkpoint's model as .npy files and model.safetensors",
       "psctl export --checkpoint_dir=DIR[,DIR] --job=ID --out=DIR [--checkpoint=NAME]\n\n"
       "Example:\n"
       "  psctl export --checkpoint_dir=/shared/ckpt --job=default --out=model/",
       {"checkpoint_dir", "job", "out", "checkpoint"}},
      {"certs", 0, [](const std::vector<std::string>&) { return Certs(); },
       "a CA and certificates for mutual TLS",
       "psctl certs --cluster_spec=F --out=DIR [--days=365] [--users=alice,bob]\n\n"
       "Every command takes --tls_cert, --tls_key and --tls_ca; with a user's certificate only\n"
       "its owner may stop a job.\n\n"
       "Example:\n"
       "  psctl certs --cluster_spec=cluster.json --out=certs --users=alice",
       {"cluster_spec", "out", "days", "users"}},
      {"experiment", 0, [](const std::vector<std::string>&) { return Experiment(); },
       "run every point of a sweep, resumably, and write the sweep table",
       "psctl experiment --sweep=config/sweeps/F.json (--local | --cluster_spec=F) [flags]\n\n"
       "Examples:\n"
       "  psctl experiment --sweep=config/sweeps/modes.json --local\n"
       "  psctl experiment --sweep=config/sweeps/async_lr.json --cluster_spec=cluster.json\n"
       "  psctl experiment --sweep=config/sweeps/modes.json --cluster_spec=cluster.json "
       "--parallel=4",
       {"sweep", "local", "cluster_spec", "results", "overwrite", "workers", "parallel",
        "device", "ps_server_binary", "ps_worker_binary"}},
      {"report", -1, [](const std::vector<std::string>& args) { return Report(args); },
       "a sweep's report with tables and plots, or runs side by side",
       "psctl report SWEEP_DIR | RUN_DIR [RUN_DIR...]\n\n"
       "A sweep's results directory (psctl experiment) gets report.md and plots/ there. Runs'\n"
       "results directories are printed side by side by their manifest.json: what ran, on\n"
       "which machines and build, what it reached, and the settings that differ.\n\n"
       "Examples:\n"
       "  psctl report results/modes\n"
       "  psctl report results/default results/async > compare.md",
       {"report_script", "python"}},
      {"slurm-spec", 0, [](const std::vector<std::string>&) { return SlurmSpec(); },
       "the ClusterSpec JSON of this Slurm job (with this task's, inside srun)",
       "psctl slurm-spec --slurm_num_ps=N [--slurm_base_port=8888]\n\n"
       "Inside a Slurm job every command takes --cluster_resolver=slurm instead of\n"
       "--cluster_spec.\n\n"
       "Example:\n"
       "  srun -n 4 psctl slurm-spec --slurm_num_ps=2",
       {"slurm_num_ps", "slurm_base_port", "task"}},
      {"dashboard", 0, [](const std::vector<std::string>&) { return Dashboard(); },
       "a status page with live charts of the cluster's jobs, until Ctrl-C",
       "psctl dashboard --cluster_spec=F [--bind_host=127.0.0.1] [--port=0] [--port_file=F]\n\n"
       "Example:\n"
       "  psctl dashboard --cluster_spec=cluster.json --port=8080   # http://127.0.0.1:8080/",
       {"cluster_spec", "bind_host", "port", "port_file"}},
      {"top", 0, [](const std::vector<std::string>&) { return Top(); },
       "a live view of every task and job in the terminal, until q or Ctrl-C",
       "psctl top --cluster_spec=F [--iterations=N]\n\n"
       "Each second: every task up or down, its CPU, memory and uptime; every job's state, step,\n"
       "examples/s, loss and staleness, whom a barrier waits for and for how long, and a row per\n"
       "worker. Not on a terminal, each screen follows the last after a blank line.\n\n"
       "Examples:\n"
       "  psctl top --cluster_spec=cluster.json\n"
       "  psctl top --cluster_spec=cluster.json --iterations=1 > cluster.txt",
       {"cluster_spec", "iterations"}},
      {"prometheus-config", 0,
       [](const std::vector<std::string>&) { return PrometheusConfigCommand(); },
       "a Prometheus scrape configuration for the cluster's /metrics pages",
       "psctl prometheus-config --cluster_spec=F [--out=F] [--scrape_interval=5s] [flags]\n\n"
       "Without --metrics_port each task is asked for its own /metrics port.\n\n"
       "Examples:\n"
       "  psctl prometheus-config --cluster_spec=cluster.json --out=prometheus.yml\n"
       "  psctl prometheus-config --cluster_spec=cluster.json --metrics_port=9100 "
       "--worker_metrics_port=9101",
       {"cluster_spec", "out", "scrape_interval", "metrics_port", "worker_metrics_port"}},
  };
  return *commands;
}

const Command* FindCommand(const std::string& name) {
  for (const Command& command : Commands()) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

// psctl --help: every command in a line.
std::string Usage() {
  std::string usage =
      "psctl: runs jobs on a parameter-server cluster and looks inside it.\n\n"
      "Usage: psctl COMMAND [flags]; psctl COMMAND --help for a command's flags and examples.\n\n"
      "Commands:\n";
  for (const Command& command : Commands()) {
    usage += absl::StrFormat("  %-18s %s\n", command.name, command.summary);
  }
  usage +=
      "\nEvery command that reaches a cluster takes --cluster_spec (or TF_CONFIG, or\n"
      "--cluster_resolver=slurm), and --tls_cert, --tls_key, --tls_ca, --auth_token_file and\n"
      "--admin_token_file where the cluster uses them.";
  return usage;
}

// psctl COMMAND --help: its synopsis, examples and flags.
std::string CommandUsage(const Command& command) {
  return absl::StrCat("psctl ", command.name, ": ", command.summary, "\n\nUsage: ",
                      command.usage);
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  if (ps::HelpRequested(argc, argv)) {
    // The command is the first word that is not a flag.
    const ps::Command* command = nullptr;
    for (int i = 1; i < argc && command == nullptr; ++i) {
      if (argv[i][0] != '-') command = ps::FindCommand(argv[i]);
    }
    if (command == nullptr) {
      std::cout << ps::Usage() << "\n";
      return 0;
    }
    ps::HandleHelp(argc, argv, ps::CommandUsage(*command), command->flags);
  }
  gflags::SetUsageMessage(ps::Usage());
  ps::SetVersionFlag();
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // Warnings and errors only: psctl talks through its own output.
  google::InitGoogleLogging(argv[0]);
  ps::TransportSecurity security = ps::TransportSecurityFromFlags();
  for (std::string* path : {&security.cert_file, &security.key_file, &security.ca_file}) {
    if (!path->empty()) *path = std::filesystem::absolute(*path).string();  // For daemons too.
  }
  if (absl::Status tls = ps::ValidateTransportSecurity(security, /*server=*/false); !tls.ok()) {
    std::cerr << "psctl: " << tls.message() << "\n";
    return 2;
  }
  ps::SetProcessTransportSecurity(security);
  absl::StatusOr<ps::AuthTokens> tokens = ps::AuthTokensFromFlags();
  if (!tokens.ok()) {
    std::cerr << "psctl: " << tokens.status().message() << "\n";
    return 2;
  }
  ps::SetProcessAuthTokens(*tokens);
  const ps::Command* command = argc >= 2 ? ps::FindCommand(argv[1]) : nullptr;
  if (command == nullptr) {
    if (argc >= 2) std::cerr << "psctl: unknown command \"" << argv[1] << "\"\n";
    std::cerr << ps::Usage() << "\n";
    return 2;
  }
  if (command->num_args >= 0 ? argc != 2 + command->num_args : argc < 3) {
    std::cerr << "psctl " << command->name << ": " << argc - 2 << " words after the command, "
              << (command->num_args >= 0 ? absl::StrCat(command->num_args) : "one or more")
              << " expected\nUsage: " << command->usage << "\n";
    return 2;
  }
  // Ctrl-C and SIGTERM stop the job (and a local cluster) instead of killing psctl outright.
  ps::BlockStopSignals();
  std::thread([] {
    ps::WaitForStopSignal();
    ps::interrupted = true;
  }).detach();
  return command->run(std::vector<std::string>(argv + 2, argv + argc));
}
