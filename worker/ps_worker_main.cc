// ps_worker: a long-lived worker daemon. Receives jobs (StartJob), trains them against the
// cluster's ps tasks, and streams progress (WatchJob).
//
//   ps_worker --cluster_spec=cluster.json --task=worker:0 [--device=auto|cpu|cuda:N] [--port=N]
//   TF_CONFIG='{"cluster": {...}, "task": {"type": "worker", "index": 0}}' ps_worker
//   srun ps_worker --cluster_resolver=slurm --slurm_num_ps=2   (deploy/slurm/)
//   ps_worker --cluster_spec=/etc/ps/cluster.json --task_from_hostname   (a StatefulSet's pod
//   worker-N: deploy/kubernetes/)
//
// Runs until SIGTERM or SIGINT: then it stops its jobs, lets calls in flight finish, exits 0.
#include <csignal>
#include <cstdlib>
#include <iostream>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/process/build_info.h"
#include "common/cluster/cluster_flags.h"
#include "common/cluster/cluster_spec.h"
#include "common/process/daemon.h"
#include "common/cluster/environment.h"
#include "common/process/flag_help.h"
#include "common/net/grpc_deadline.h"
#include "common/net/grpc_server.h"
#include "common/cluster/host_port.h"
#include "common/metrics/metrics.h"
#include "common/net/metrics_flags.h"
#include "common/net/metrics_http_server.h"
#include "common/metrics/process_stats.h"
#include "common/metrics/rpc_metrics.h"
#include "common/cluster/task_service.h"
#include "common/security/peer_identity.h"
#include "common/security/security_flags.h"
#include "common/cluster/slurm_cluster.h"
#include "worker/allreduce/ring_mailbox.h"
#include "worker/allreduce/ring_service.h"
#include "worker/compute/cpu_threads.h"
#include "worker/compute/device.h"
#include "worker/worker_service.h"

DEFINE_string(cluster_spec, "", "ClusterSpec JSON file (TensorFlow's form); TF_CONFIG if empty");
DEFINE_string(task, "", "this task, TYPE:INDEX (worker:0); the spec's \"task\" field if empty");
DEFINE_string(device, "auto",
              "auto (a GPU if usable, else the CPU; under --cluster_resolver=slurm the k-th "
              "worker of a node takes visible GPU k mod their number), cpu, or cuda:N");
DEFINE_string(data_root, "",
              "directories (comma-separated) under which jobs' data files may be read; a file "
              "elsewhere is refused (PERMISSION_DENIED); empty: synthetic data only");
DEFINE_int32(port, -1, "listen on this port instead of the spec's (0: any free port)");
DEFINE_string(bind_host, "",
              "interface to listen on; default: 127.0.0.1 when the ClusterSpec puts this task on "
              "a loopback host, else every interface (plaintext then needs --insecure)");
DEFINE_string(port_file, "", "if set, write the bound port here once listening (for tests)");
DEFINE_int32(compute_threads, 0,
             "CPU backend threads (0: one per core); workers sharing a machine should split it");
DEFINE_int32(max_message_mb, 1024, "largest request or response, in MiB");
DEFINE_int32(ps_wait_timeout_s, 60, "how long a pull may wait at a barrier or SSP bound");
DEFINE_bool(shared_memory, true,
            "with a ps on this host, send the dense tensors of jobs that allow it through "
            "memory both map instead of in the requests (docs/shared_memory.md)");
DEFINE_int32(ring_mailbox_mb, 1024,
             "ring all-reduce messages from the previous worker held at once, in MiB; more are "
             "refused (RESOURCE_EXHAUSTED)");
DEFINE_int32(finished_job_retention_s, 3600,
             "how long a job that ended stays (for psctl status) before this worker forgets it; "
             "-1: never");
DEFINE_bool(allow_programs, false,
            "run program jobs (JobSpec.program: the submitter's own program, e.g. a PyTorch "
            "worker, as this daemon's user); off: such jobs are refused");

namespace {

constexpr char kUsage[] = R"(ps_worker: a worker daemon (a worker task of the ClusterSpec). It runs the jobs psctl starts on
it: reads its shard of the data, computes gradients (CPU or CUDA), and pulls and pushes to the
ps tasks; it runs until SIGINT or SIGTERM.

Usage: ps_worker --cluster_spec=cluster.json --task=worker:0 [--device=auto] [flags]

Examples:
  ps_worker --cluster_spec=cluster.json --task=worker:0
  ps_worker --cluster_spec=cluster.json --task=worker:1 --device=cuda:0 --data_root=/data
  TF_CONFIG='{"cluster": {...}, "task": {"type": "worker", "index": 0}}' ps_worker)";

// The device this worker computes on: --device (under Slurm, "auto" picks this worker's GPU of
// its node), a GPU checked to work now rather than when the first job starts; "auto" falls back
// to the CPU, saying why. INVALID_ARGUMENT or the backend's error for a device that cannot work.
absl::StatusOr<ps::Device> ChooseDevice(const ps::ClusterConfig& config) {
  // --device=cpu loads nothing of CUDA (its plugin, the runtime).
  const ps::GpuQueryResult gpus =
      FLAGS_device == "cpu" ? ps::GpuQueryResult() : ps::QueryUsableGpus();
  std::string device_flag = FLAGS_device;
  if (device_flag == "auto" && config.node_worker_index.has_value()) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    device_flag = ps::SlurmWorkerDevice(*config.node_worker_index,
                                        static_cast<int>(gpus.gpus.size()));
    LOG(INFO) << "Slurm: worker " << *config.node_worker_index << " of its node, "
              << gpus.gpus.size() << " GPUs visible (CUDA_VISIBLE_DEVICES="
              << (visible == nullptr ? "unset" : visible) << "): --device=" << device_flag;
  }
  absl::StatusOr<ps::Device> device = ps::SelectDevice(device_flag, gpus);
  if (!device.ok() || device->kind != ps::Device::Kind::kCuda) return device;
  absl::StatusOr<std::unique_ptr<ps::ComputeBackend>> probe = ps::CreateBackend(*device);
  if (probe.ok()) return device;
  if (FLAGS_device != "auto") {
    return absl::Status(probe.status().code(), absl::StrCat("--device=", FLAGS_device, ": ",
                                                            probe.status().message()));
  }
  return ps::Device{ps::Device::Kind::kCpu, -1,
                    absl::StrCat("cpu (auto: ", probe.status().message(), ")")};
}

// The security flags: this worker's certificates (--certs: its task's own, else its host's),
// checked; the tokens it checks on the calls it serves and presents to the ps (`ps_client`);
// the admin users. INVALID_ARGUMENT naming the flag.
absl::StatusOr<ps::TransportSecurity> ConfigureSecurity(const ps::ClusterConfig& config,
                                                        ps::PsClientOptions* ps_client) {
  if (absl::Status certs = ps::ApplyCertsFlag(
          {absl::StrCat(ps::kWorkerJob, "-", config.task.index()),
           ps::ParseHostPort(config.cluster.Address(config.task))->host});
      !certs.ok()) {
    return certs;
  }
  const ps::TransportSecurity security = ps::TransportSecurityFromFlags();
  if (absl::Status tls = ps::ValidateTransportSecurity(security, /*server=*/true); !tls.ok()) {
    return tls;
  }
  ps_client->security = security;
  absl::StatusOr<ps::AuthTokens> tokens = ps::AuthTokensFromFlags();
  if (!tokens.ok()) return tokens.status();
  ps::SetProcessAuthTokens(*tokens);  // Checked on the calls this worker serves.
  ps::SetProcessAdminUsers(ps::AdminUsersFromFlags());
  ps_client->token = tokens->task;  // What it presents to the ps: a task's token.
  return security;
}

int Run() {
  absl::StatusOr<ps::ClusterConfig> config = ps::ResolveClusterConfig(
      ps::ClusterSourceFromFlags(FLAGS_cluster_spec, FLAGS_task), ps::ProcessEnvironment());
  if (!config.ok()) {
    std::cerr << "ps_worker: " << config.status().message() << "\n";
    return 2;
  }
  if (config->task.type() != ps::kWorkerJob) {
    std::cerr << "ps_worker: this task is " << ps::TaskName(config->task) << " ("
              << config->origin
              << "), not a worker task; start ps_server for ps tasks, or pass --task=worker:N\n";
    return 2;
  }
  LOG(INFO) << ps::TaskName(config->task) << " (" << config->origin
            << ") of cluster " << config->cluster.ToJson(std::nullopt, -1);
  absl::StatusOr<ps::Device> device = ChooseDevice(*config);
  if (!device.ok()) {
    std::cerr << "ps_worker: " << device.status().message() << "\n";
    return 2;
  }
  ps::SetCpuComputeThreads(FLAGS_compute_threads);
  LOG(INFO) << "computing on " << device->description;

  ps::WorkerServiceOptions options{
      config->cluster, config->task.index(), *device, {}, absl::Hours(1), ps::DataRoots()};
  options.ps_client.wait_timeout = absl::Seconds(FLAGS_ps_wait_timeout_s);
  options.ps_client.shared_memory = FLAGS_shared_memory;
  absl::StatusOr<ps::TransportSecurity> security = ConfigureSecurity(*config, &options.ps_client);
  if (!security.ok()) {
    std::cerr << "ps_worker: " << security.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<ps::DataRoots> roots =
      ps::DataRoots::Create(absl::StrSplit(FLAGS_data_root, ',', absl::SkipEmpty()));
  if (!roots.ok()) {
    std::cerr << "ps_worker: " << roots.status().message() << "\n";
    return 2;
  }
  options.data_roots = *std::move(roots);
  options.allow_programs = FLAGS_allow_programs;
  options.finished_job_retention = FLAGS_finished_job_retention_s < 0
                                       ? absl::InfiniteDuration()
                                       : absl::Seconds(FLAGS_finished_job_retention_s);
  absl::StatusOr<int> metrics_port = ps::MetricsPortFromFlags();
  if (!metrics_port.ok()) {
    std::cerr << "ps_worker: " << metrics_port.status().message() << "\n";
    return 2;
  }
  // The ring all-reduce messages other workers send this one (worker/allreduce/); before the
  // service, whose jobs' links read it.
  ps::RingMailboxOptions mailbox_options;
  mailbox_options.max_bytes = int64_t{FLAGS_ring_mailbox_mb} << 20;
  ps::RingMailbox ring_mailbox(mailbox_options);
  ps::RingService ring_service(&ring_mailbox);
  options.ring_mailbox = &ring_mailbox;
  ps::WorkerService service(options);
  ps::TaskService task_service("worker", config->task.index(), options.device.description);
  // Outlives the server, whose calls it counts.
  ps::RpcMetrics rpc_metrics("ps_worker",
                             {ps::Worker::service_full_name(), ps::Task::service_full_name(),
                              ps::Ring::service_full_name()});

  absl::StatusOr<ps::HostPort> own = ps::ParseHostPort(config->cluster.Address(config->task));
  int port = FLAGS_port >= 0 ? FLAGS_port : own->port;
  const std::string bind_host = ps::ListenHost(FLAGS_bind_host, own->host);
  std::string listen =
      ps::HostPort{bind_host, port, bind_host.find(':') != std::string::npos}.ToString();

  task_service.set_insecure(!security->tls() && !ps::IsLoopbackHost(bind_host));
  ps::TuneForTensorTraffic();
  ps::BlockStopSignals();  // Before any thread starts.

  absl::StatusOr<ps::StartedServer> started = ps::StartGrpcServer(
      listen, {&service, &task_service, &ring_service}, FLAGS_max_message_mb << 20, *security,
      ps::ReflectionFromFlags(), *metrics_port >= 0 ? &rpc_metrics : nullptr);
  if (!started.ok()) {
    std::cerr << "ps_worker: " << started.status().message() << "\n";
    return 1;
  }
  std::unique_ptr<grpc::Server> server = std::move(started->server);
  int bound_port = started->bound_port;
  LOG(INFO) << ps::TaskName(config->task) << " listening on port " << bound_port;
  ps::MetricsRegistry metrics;
  std::unique_ptr<ps::MetricsHttpServer> metrics_server;
  if (*metrics_port >= 0) {
    metrics.AddCollector([&service, &rpc_metrics](ps::MetricsWriter* writer) {
      ps::WriteProcessMetrics(writer);
      rpc_metrics.WriteMetrics(writer);
      service.WriteMetrics(writer);
    });
    absl::StatusOr<std::unique_ptr<ps::MetricsHttpServer>> started_metrics =
        ps::MetricsHttpServer::Start(ps::MetricsBindHostFromFlags(), *metrics_port, &metrics);
    if (!started_metrics.ok()) {
      std::cerr << "ps_worker: " << started_metrics.status().message() << "\n";
      return 1;
    }
    metrics_server = *std::move(started_metrics);
    LOG(INFO) << "metrics on port " << metrics_server->bound_port();
    task_service.set_metrics_port(metrics_server->bound_port());
    if (absl::Status written = ps::WriteMetricsPortFileFromFlags(metrics_server->bound_port());
        !written.ok()) {
      std::cerr << "ps_worker: " << written.message() << "\n";
      return 1;
    }
  }
  // Announced once everything listens (the metrics port too), as ps_server does.
  if (!FLAGS_port_file.empty()) {
    absl::Status written = ps::WritePortFile(FLAGS_port_file, bound_port);
    if (!written.ok()) {
      std::cerr << "ps_worker: " << written.message() << "\n";
      return 1;
    }
  }
  int signal = ps::WaitForStopSignal();
  LOG(INFO) << "signal " << signal << ": stopping jobs";
  if (metrics_server != nullptr) metrics_server->Stop();
  service.StopAll();
  server->Shutdown(ps::GrpcDeadline(absl::Seconds(5)));
  LOG(INFO) << "stopped";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ps::HandleHelp(argc, argv, kUsage);
  gflags::SetUsageMessage(kUsage);
  ps::SetVersionFlag();
  ps::ParseFlags(&argc, &argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return Run();
}
