#include "ctl/cluster/local_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/file_system.h"
#include "common/job/job_spec.h"
#include "common/security/security_flags.h"

namespace ps {
namespace {

std::string Tail(const std::string& text, size_t bytes = 2000) {
  return text.size() <= bytes ? text : text.substr(text.size() - bytes);
}

}  // namespace

std::string SiblingBinaryOf(const std::filesystem::path& self, const std::string& relative_path) {
  const std::filesystem::path bazel_layout = self.parent_path().parent_path() / relative_path;
  const std::filesystem::path installed =
      self.parent_path() / std::filesystem::path(relative_path).filename();
  for (const std::filesystem::path& candidate : {bazel_layout, installed}) {
    std::error_code error;
    if (std::filesystem::exists(candidate, error)) return candidate.string();
  }
  return relative_path;
}

std::string SiblingBinary(const std::string& relative_path) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? relative_path : SiblingBinaryOf(self, relative_path);
}

absl::StatusOr<ClusterSpec> LoopbackCluster(int num_ps, int num_workers,
                                            const std::vector<int>& ports) {
  ClusterDef def;
  size_t next = 0;
  for (const auto& [job, count] : {std::make_pair(std::string(kPsJob), num_ps),
                                   std::make_pair(std::string(kWorkerJob), num_workers)}) {
    ClusterJob* cluster_job = def.add_jobs();
    cluster_job->set_name(job);
    for (int i = 0; i < count; ++i) {
      cluster_job->add_tasks(absl::StrCat("127.0.0.1:", ports[next++]));
    }
  }
  return ClusterSpec::FromProto(def);
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  if (options.num_ps < 1 || options.num_workers < 1) {
    return absl::InvalidArgumentError("--ps and --workers must be at least 1");
  }
  std::error_code error;
  std::filesystem::create_directories(options.dir, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", options.dir, ": ",
                                                    error.message()));
  }
  absl::StatusOr<std::vector<int>> ports = PickUnusedPorts(options.num_ps + options.num_workers);
  if (!ports.ok()) return ports.status();
  absl::StatusOr<ClusterSpec> cluster =
      LoopbackCluster(options.num_ps, options.num_workers, *ports);
  if (!cluster.ok()) return cluster.status();
  std::unique_ptr<LocalCluster> local(new LocalCluster(options, *cluster));
  absl::Status written =
      FileSystem::Default()->WriteFileAtomically(local->spec_path(), cluster->ToJson() + "\n");
  if (!written.ok()) return written;

  for (const auto& [job, binary] : {std::make_pair(std::string(kPsJob), options.ps_server_path),
                                    std::make_pair(std::string(kWorkerJob), options.ps_worker_path)}) {
    for (int i = 0; i < cluster->NumTasks(job); ++i) {
      std::string name = absl::StrCat(job, "-", i);
      std::string port_file = absl::StrCat(options.dir, "/", name, ".port");
      std::filesystem::remove(port_file, error);
      std::string metrics_port_file = absl::StrCat(options.dir, "/", name, ".metrics_port");
      std::filesystem::remove(metrics_port_file, error);
      std::vector<std::string> argv = {binary, "--cluster_spec=" + local->spec_path(),
                                       absl::StrCat("--task=", job, ":", i),
                                       "--bind_host=127.0.0.1", "--port_file=" + port_file};
      if (options.metrics) {
        argv.push_back("--metrics_port=0");
        argv.push_back("--metrics_port_file=" + metrics_port_file);
      }
      for (const std::string& arg : TransportSecurityArgs(options.security)) argv.push_back(arg);
      for (const std::string& arg : options.daemon_args) argv.push_back(arg);
      if (job == kPsJob && !options.checkpoint_dir.empty()) {
        argv.push_back(absl::StrCat("--checkpoint_dir=", options.checkpoint_dir,
                                    options.shared_checkpoint_dir ? "" : absl::StrCat("/ps-", i)));
      }
      if (job == kWorkerJob) {
        int threads = options.compute_threads > 0
                          ? options.compute_threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                            options.num_workers);
        argv.push_back("--device=" + options.device);
        if (!options.data_roots.empty()) {
          argv.push_back("--data_root=" + absl::StrJoin(options.data_roots, ","));
        }
        argv.push_back(absl::StrCat("--compute_threads=", threads));
        // The user's own daemons on the user's own machine: program jobs (JobSpec.program, a
        // PyTorch worker) run as the user who started psctl local.
        argv.push_back("--allow_programs");
      }
      absl::StatusOr<Subprocess> daemon =
          Subprocess::Start(argv, absl::StrCat(options.dir, "/", name, ".log"));
      if (!daemon.ok()) {
        return absl::Status(daemon.status().code(),
                            absl::StrCat(job, ":", i, ": ", daemon.status().message()));
      }
      absl::MutexLock lock(&local->mu_);
      local->daemons_.push_back({*std::move(daemon), absl::StrCat(job, ":", i), argv});
      // Until it listens, or exits (a bad flag, a port in use, no such device).
      // Real processes start in real time.
      const absl::Time deadline = Clock::Real()->Now() + absl::Seconds(30);
      absl::StatusOr<int> port;
      std::optional<int> code;
      do {
        port = WaitForPortFile(port_file, absl::Milliseconds(100));
        if (!port.ok()) code = local->daemons_.back().process.Wait(absl::ZeroDuration());
      } while (!port.ok() && !code.has_value() && Clock::Real()->Now() < deadline);
      if (!port.ok()) {
        // A daemon that exits 2 refused its command line (a bad flag, no such device).
        return absl::Status(
            code == std::optional<int>(2) ? absl::StatusCode::kInvalidArgument
                                          : absl::StatusCode::kUnavailable,
            absl::StrCat(job, ":", i, " (", binary, ") did not start",
                         code.has_value() ? absl::StrCat(" (exit code ", *code, ")") : "",
                         "; its log:\n", Tail(local->daemons_.back().process.Output())));
      }
      if (options.metrics) {
        // Both ports listen by now; the files are written one right after the other.
        absl::StatusOr<int> metrics_port = WaitForPortFile(metrics_port_file, absl::Seconds(5));
        if (!metrics_port.ok()) {
          return absl::UnavailableError(absl::StrCat(
              job, ":", i, " (", binary, ") wrote no --metrics_port_file ", metrics_port_file));
        }
        local->metrics_ports_[job].push_back(*metrics_port);
      }
    }
  }
  if (options.max_restarts > 0) {
    local->supervisor_ = std::thread([raw = local.get()] { raw->Supervise(); });
  }
  return local;
}

void LocalCluster::Supervise() {
  while (true) {
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(200))) return;
    for (Daemon& daemon : daemons_) {
      const std::optional<int> code = daemon.process.Wait(absl::ZeroDuration());
      // A clean exit (0: SIGTERM, or Ctrl-C reaching the daemons too) is left alone.
      if (!code.has_value() || *code == 0 || daemon.restarts >= options_.max_restarts) continue;
      ++daemon.restarts;
      const std::string log =
          absl::StrCat(options_.dir, "/", daemon.task, "-restart-", daemon.restarts, ".log");
      absl::StatusOr<Subprocess> again = Subprocess::Start(daemon.argv, log);
      if (options_.out != nullptr) {
        *options_.out << "\n" << daemon.task << " exited (exit code " << *code << "); "
                      << (again.ok() ? absl::StrCat("started it again (", daemon.restarts, " of ",
                                                    options_.max_restarts, "; its log: ", log,
                                                    ")")
                                     : absl::StrCat("cannot start it again: ",
                                                    again.status().message()))
                      << "\n"
                      << std::flush;
      }
      if (again.ok()) daemon.process = *std::move(again);
    }
  }
}

int LocalCluster::metrics_port(absl::string_view job, int index) const {
  auto ports = metrics_ports_.find(job);
  return ports == metrics_ports_.end() ? 0 : ports->second[index];
}

LocalCluster::~LocalCluster() { Stop(); }

void LocalCluster::Stop(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (supervisor_.joinable()) supervisor_.join();
  absl::MutexLock lock(&mu_);
  for (Daemon& daemon : daemons_) daemon.process.Signal(SIGTERM);
  absl::Time deadline = Clock::Real()->Now() + grace;
  for (Daemon& daemon : daemons_) {
    daemon.process.Wait(std::max(absl::ZeroDuration(), deadline - Clock::Real()->Now()));
  }
  daemons_.clear();  // Kills and reaps any that did not stop in time.
}

std::vector<std::string> DataDirectories(const JobSpec& spec) {
  std::vector<std::string> directories;
  for (const std::string& file : DataFiles(spec.data())) {
    const std::string directory =
        std::filesystem::absolute(file).lexically_normal().parent_path().string();
    if (std::find(directories.begin(), directories.end(), directory) == directories.end()) {
      directories.push_back(directory);
    }
  }
  return directories;
}

}  // namespace ps
