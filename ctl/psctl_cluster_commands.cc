// psctl's commands that set up and look at a cluster: export, certs, slurm-spec, dashboard, top
// and prometheus-config (ctl/psctl_commands.h).
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
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/cluster/cluster_flags.h"
#include "common/cluster/cluster_spec.h"
#include "common/process/daemon.h"
#include "common/cluster/environment.h"
#include "common/file_system.h"
#include "ctl/cluster/certs.h"
#include "ctl/export/checkpoint_export.h"
#include "ctl/cluster/cluster_client.h"
#include "ctl/cluster/cluster_snapshot.h"
#include "ctl/dashboard/dashboard.h"
#include "ctl/dashboard/full_screen.h"
#include "ctl/dashboard/job_history.h"
#include "ctl/cluster/local_cluster.h"
#include "ctl/cluster/prometheus_config.h"
#include "ctl/dashboard/top.h"
#include "ctl/psctl_commands.h"
#include "ctl/psctl_flags.h"

namespace ps {

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
  // One snapshot a second, however many pages are open: each page reads the latest, and each
  // is recorded for the charts, so that a page opened mid-run draws what came before it.
  JobHistory history;
  absl::Mutex mu;
  std::string latest;
  auto sample = [&history, &mu, &latest, &client] {
    const ClusterSnapshot snapshot = TakeClusterSnapshot(**client, /*timelines=*/true);
    history.Record(snapshot);
    std::string json = ClusterSnapshotJson(snapshot);
    absl::MutexLock lock(&mu);
    latest = std::move(json);
  };
  sample();
  std::atomic<bool> stop{false};
  std::thread sampler([&sample, &stop] {
    // A second after the last one began, or at once when it took longer.
    for (absl::Time next = Clock::Real()->Now() + absl::Seconds(1); !stop && !interrupted;
         next = std::max(next + absl::Seconds(1), Clock::Real()->Now())) {
      while (!stop && !interrupted && Clock::Real()->Now() < next) {
        Clock::Real()->SleepFor(absl::Milliseconds(50));
      }
      if (!stop && !interrupted) sample();
    }
  });
  absl::StatusOr<std::unique_ptr<DashboardServer>> server = DashboardServer::Start(
      FLAGS_bind_host, FLAGS_port,
      [&mu, &latest] {
        absl::MutexLock lock(&mu);
        return latest;
      },
      [&history] { return history.Json().dump(); });
  auto end_sampler = [&stop, &sampler] {
    stop = true;
    sampler.join();
  };
  if (!server.ok()) {
    end_sampler();
    return Fail(server.status());
  }
  if (!FLAGS_port_file.empty()) {
    absl::Status written = WritePortFile(FLAGS_port_file, (*server)->bound_port());
    if (!written.ok()) {
      (*server)->Stop();
      end_sampler();
      return Fail(written);
    }
  }
  const bool ipv6 = FLAGS_bind_host.find(':') != std::string::npos;
  std::cout << "psctl dashboard: http://" << (ipv6 ? "[" : "") << FLAGS_bind_host
            << (ipv6 ? "]" : "") << ":" << (*server)->bound_port() << "/ (Ctrl-C stops it)"
            << std::endl;
  while (!interrupted) Clock::Real()->SleepFor(absl::Milliseconds(100));
  (*server)->Stop();  // No request reads the history or the latest snapshot after this.
  end_sampler();
  return 0;
}

// Draws the cluster each second (ctl/dashboard/top.h) until q, SIGINT or SIGTERM, or --iterations
// screens: full screen on a terminal, else each screen after a blank line, without terminal codes.
int Top() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return Fail(cluster.status());
  if (FLAGS_iterations < 0) {
    return Fail(absl::InvalidArgumentError("--iterations is a number of screens (0: no end)"));
  }
  absl::StatusOr<std::unique_ptr<ClusterClient>> client = ClusterClient::Create(*cluster);
  if (!client.ok()) return Fail(client.status());
  std::unique_ptr<FullScreen> screen = FullScreen::Open();  // Null when not on a terminal.
  Clock* const clock = Clock::Real();
  // Waits until `deadline`: false when q was pressed or a stop signal came.
  auto wait = [&screen, clock](absl::Time deadline) {
    for (absl::Time now = clock->Now(); now < deadline && !interrupted; now = clock->Now()) {
      const absl::Time slice = std::min(deadline, now + absl::Milliseconds(100));
      if (screen == nullptr) {
        clock->SleepFor(slice - now);
      } else if (const int key = screen->ReadKey(slice); key == 'q' || key == 'Q') {
        return false;
      }
    }
    return !interrupted;
  };
  std::optional<ClusterSnapshot> previous;
  absl::Time next = clock->Now();
  for (int drawn = 0; FLAGS_iterations == 0 || drawn < FLAGS_iterations; ++drawn) {
    if (drawn > 0 && !wait(next = std::max(next + absl::Seconds(1), clock->Now()))) break;
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

}  // namespace ps
