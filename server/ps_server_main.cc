// ps_server: one shard of the parameter store.
//
//   ps_server --cluster_spec=cluster.json --task=ps:0 [--port=N]
//   TF_CONFIG='{"cluster": {...}, "task": {"type": "ps", "index": 0}}' ps_server
//   srun ps_server --cluster_resolver=slurm --slurm_num_ps=2   (deploy/slurm/)
//   ps_server --cluster_spec=/etc/ps/cluster.json --task_from_hostname   (a StatefulSet's pod
//   ps-N: deploy/kubernetes/)
//
// Runs until SIGTERM or SIGINT: then it stops taking calls, ends waiting pulls with
// UNAVAILABLE, lets calls in flight finish, and exits 0.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "common/process/build_info.h"
#include "common/cluster/cluster_flags.h"
#include "common/cluster/cluster_spec.h"
#include "common/process/daemon.h"
#include "common/cluster/environment.h"
#include "common/process/flag_help.h"
#include "common/cluster/host_port.h"
#include "common/job/job_schema.h"
#include "common/net/metrics_flags.h"
#include "common/security/peer_identity.h"
#include "common/security/security_flags.h"
#include "server/ps_server.h"

DEFINE_string(cluster_spec, "", "ClusterSpec JSON file (TensorFlow's form); TF_CONFIG if empty");
DEFINE_string(task, "", "this task, TYPE:INDEX (ps:0); the spec's \"task\" field if empty");
DEFINE_int32(port, -1, "listen on this port instead of the spec's (0: any free port)");
DEFINE_string(bind_host, "",
              "interface to listen on; default: 127.0.0.1 when the ClusterSpec puts this task on "
              "a loopback host, else every interface (plaintext then needs --insecure)");
DEFINE_int32(wait_timeout_s, 60, "how long a pull may wait (barrier, SSP) unless it says");
DEFINE_int32(finished_job_retention_s, 3600,
             "how long a job whose every worker has left stays (for psctl status and its "
             "results) before this ps forgets it; -1: never");
DEFINE_string(checkpoint_dir, "",
              "where this ps writes the checkpoints of jobs that name no checkpoint.dir: a "
              "directory on this host's disk (docs/checkpoints.md); empty: such jobs cannot "
              "checkpoint");
DEFINE_int32(max_message_mb, 1024, "largest request or response, in MiB");
DEFINE_int32(max_jobs, 64, "jobs this ps holds at most (finished ones count until forgotten)");
DEFINE_int32(max_workers, 4096, "workers one job may have");
DEFINE_int64(max_job_mb, 64 << 10,
             "MiB one job may hold on this ps (its values and optimizer slots, twice)");
DEFINE_int64(max_memory_mb, 0,
             "MiB all jobs together may hold; 0: 3/4 of the memory this process may use (the "
             "machine's, or its cgroup's limit when lower)");
DEFINE_int32(max_requests_per_peer, 1024,
             "calls one peer may have in flight at once (waiting pulls included); more are "
             "refused with RESOURCE_EXHAUSTED. A peer is a certificate's identity under mutual "
             "TLS (every task of a host shares its host's), else one TCP connection");
DEFINE_int64(max_inflight_mb, -1,
             "MiB of pushes this ps holds at once, all jobs and connections together: push "
             "buffers being filled or applied (3/4; a push that would start one waits for room) "
             "and push requests received (1/4, shared out as windows the clients keep to); "
             "-1: a quarter of the memory this process may use (the machine's, or its cgroup's "
             "limit when lower); 0: no budget");
DEFINE_int64(shared_memory_mb, 1024,
             "MiB of shared memory segments this ps opens, all together, for workers on its "
             "host, whose dense tensors then go through memory instead of in the requests "
             "(docs/shared_memory.md); 0: none");
DEFINE_string(shared_memory_dir, "/tmp",
              "directory of the socket through which workers on this host fetch their segments");
DEFINE_int32(bulk_port, 0,
             "port of the bulk streams on which this ps sends workers the values of large pulls "
             "outside gRPC's messages (docs/bulk_streams.md), on the --bind_host interface; 0: a free "
             "one; -1: none. Never with TLS: the streams are plaintext");
DEFINE_int32(replica_unreachable_after_ms, 1000,
             "replicated shards (docs/replication.md): how long a primary waits for a backup out "
             "of reach before it goes on alone; a copy that handed a shard back takes it over "
             "again when its own ps is gone, or was started again empty, within half of this");
DEFINE_string(port_file, "", "if set, write the bound port here once listening (for tests)");

namespace {

constexpr char kUsage[] = R"(ps_server: one shard of the parameter server (a ps task of the ClusterSpec). It holds its part of
every job's model, applies the workers' updates under the job's consistency mode, and runs until
SIGINT or SIGTERM.

Usage: ps_server --cluster_spec=cluster.json --task=ps:0 [--port=N] [flags]

Examples:
  ps_server --cluster_spec=cluster.json --task=ps:0
  ps_server --cluster_spec=cluster.json --task=ps:1 --checkpoint_dir=/var/lib/ps --metrics_port=9100
  TF_CONFIG='{"cluster": {...}, "task": {"type": "ps", "index": 0}}' ps_server)";

int Run() {
  absl::StatusOr<ps::ClusterConfig> config = ps::ResolveClusterConfig(
      ps::ClusterSourceFromFlags(FLAGS_cluster_spec, FLAGS_task), ps::ProcessEnvironment());
  if (!config.ok()) {
    std::cerr << "ps_server: " << config.status().message() << "\n";
    return 2;
  }
  if (config->task.type() != ps::kPsJob) {
    std::cerr << "ps_server: this task is " << ps::TaskName(config->task) << " ("
              << config->origin
              << "), not a ps task; start ps_worker for workers, or pass --task=ps:N\n";
    return 2;
  }
  LOG(INFO) << ps::TaskName(config->task) << " (" << config->origin
            << ") of cluster " << config->cluster.ToJson(std::nullopt, -1);
  absl::StatusOr<ps::HostPort> own = ps::ParseHostPort(config->cluster.Address(config->task));
  int port = FLAGS_port >= 0 ? FLAGS_port : own->port;

  ps::PsServerOptions options;
  const std::string bind_host = ps::ListenHost(FLAGS_bind_host, own->host);
  options.listen_address =
      ps::HostPort{bind_host, port, bind_host.find(':') != std::string::npos}.ToString();
  options.service.ps_index = config->task.index();
  options.service.num_ps = config->cluster.NumTasks(ps::kPsJob);
  options.service.worker_addresses = config->cluster.Tasks(ps::kWorkerJob);
  options.service.default_wait_timeout = absl::Seconds(FLAGS_wait_timeout_s);
  options.service.finished_job_retention = FLAGS_finished_job_retention_s < 0
                                               ? absl::InfiniteDuration()
                                               : absl::Seconds(FLAGS_finished_job_retention_s);
  options.max_message_bytes = FLAGS_max_message_mb << 20;
  options.service.checkpoint_dir = FLAGS_checkpoint_dir;
  options.service.limits.max_jobs = FLAGS_max_jobs;
  options.service.limits.max_workers = FLAGS_max_workers;
  options.service.limits.max_job_bytes = FLAGS_max_job_mb << 20;
  options.service.limits.max_total_bytes = FLAGS_max_memory_mb << 20;
  options.service.limits.max_requests_per_peer = FLAGS_max_requests_per_peer;
  options.service.limits.max_inflight_bytes =
      FLAGS_max_inflight_mb < 0 ? -1 : FLAGS_max_inflight_mb << 20;
  options.service.shared_memory_bytes = FLAGS_shared_memory_mb << 20;
  options.service.shared_memory_dir = FLAGS_shared_memory_dir;
  if (FLAGS_replica_unreachable_after_ms <= 0) {
    std::cerr << "ps_server: --replica_unreachable_after_ms must be at least 1\n";
    return 2;
  }
  options.service.replica_unreachable_after =
      absl::Milliseconds(FLAGS_replica_unreachable_after_ms);
  if (FLAGS_bulk_port < -1 || FLAGS_bulk_port > 65535) {
    std::cerr << "ps_server: --bulk_port must be a port, 0 (a free one) or -1 (none)\n";
    return 2;
  }
  options.bulk_port = FLAGS_bulk_port;
  if (FLAGS_shared_memory_mb < 0) {
    std::cerr << "ps_server: --shared_memory_mb must be at least 0 (0: no shared memory)\n";
    return 2;
  }
  if (FLAGS_max_jobs < 1 || FLAGS_max_workers < 1 || FLAGS_max_job_mb < 1 ||
      FLAGS_max_requests_per_peer < 1 || FLAGS_max_memory_mb < 0 || FLAGS_max_inflight_mb < -1) {
    std::cerr << "ps_server: --max_jobs, --max_workers, --max_job_mb and --max_requests_per_peer "
                 "must be at least 1, --max_memory_mb at least 0, --max_inflight_mb at least -1\n";
    return 2;
  }
  if (FLAGS_max_workers > ps::kMaxWorkers) {
    std::cerr << "ps_server: --max_workers is at most " << ps::kMaxWorkers
              << " (the most workers any job may have)\n";
    return 2;
  }
  if (absl::Status certs = ps::ApplyCertsFlag(
          {absl::StrCat(ps::kPsJob, "-", config->task.index()), own->host});
      !certs.ok()) {
    std::cerr << "ps_server: " << certs.message() << "\n";
    return 2;
  }
  absl::StatusOr<ps::AuthTokens> tokens = ps::AuthTokensFromFlags();
  if (!tokens.ok()) {
    std::cerr << "ps_server: " << tokens.status().message() << "\n";
    return 2;
  }
  ps::SetProcessAuthTokens(*tokens);
  ps::SetProcessAdminUsers(ps::AdminUsersFromFlags());
  options.security = ps::TransportSecurityFromFlags();
  options.reflection = ps::ReflectionFromFlags();
  // Replicated shards: this ps calls the next one as a task of the cluster.
  options.service.ps_addresses = config->cluster.Tasks(ps::kPsJob);
  options.service.token = tokens->task;
  absl::StatusOr<int> metrics_port = ps::MetricsPortFromFlags();
  if (!metrics_port.ok()) {
    std::cerr << "ps_server: " << metrics_port.status().message() << "\n";
    return 2;
  }
  options.metrics_port = *metrics_port;
  options.metrics_host = ps::MetricsBindHostFromFlags();
  if (absl::Status tls = ps::ValidateTransportSecurity(options.security, /*server=*/true);
      !tls.ok()) {
    std::cerr << "ps_server: " << tls.message() << "\n";
    return 2;
  }

  ps::TuneForTensorTraffic();
  ps::BlockStopSignals();  // Before any thread starts.

  absl::StatusOr<std::unique_ptr<ps::PsServer>> server = ps::PsServer::Start(options);
  if (!server.ok()) {
    std::cerr << "ps_server: " << server.status().message() << "\n";
    return 1;
  }
  if (!FLAGS_port_file.empty()) {
    absl::Status written = ps::WritePortFile(FLAGS_port_file, (*server)->bound_port());
    if (!written.ok()) {
      std::cerr << "ps_server: " << written.message() << "\n";
      return 1;
    }
  }
  if (absl::Status written = ps::WriteMetricsPortFileFromFlags((*server)->metrics_port());
      !written.ok()) {
    std::cerr << "ps_server: " << written.message() << "\n";
    return 1;
  }
  int signal = ps::WaitForStopSignal();
  LOG(INFO) << "signal " << signal << ": stopping (in-flight calls finish, waiting pulls end)";
  (*server)->Shutdown();
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
