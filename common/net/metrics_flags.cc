#include "common/net/metrics_flags.h"

#include <gflags/gflags.h>

#include "common/process/daemon.h"

DEFINE_int32(metrics_port, -1,
             "serve Prometheus metrics at http://METRICS_BIND_HOST:PORT/metrics (0: any free "
             "port, see --metrics_port_file); -1: no metrics. Plaintext HTTP even with TLS");
DEFINE_string(metrics_bind_host, "127.0.0.1",
              "interface of the /metrics page: loopback by default (plaintext, no token); "
              "0.0.0.0 or an address for a Prometheus on another host, on a network you trust");
DEFINE_string(metrics_port_file, "",
              "if set, write the bound metrics port here once listening (with --metrics_port=0)");

namespace ps {

absl::StatusOr<int> MetricsPortFromFlags() {
  if (FLAGS_metrics_port < -1 || FLAGS_metrics_port > 65535) {
    return absl::InvalidArgumentError(
        "--metrics_port is a port (0: any free one) or -1 (no metrics)");
  }
  if (!FLAGS_metrics_port_file.empty() && FLAGS_metrics_port < 0) {
    return absl::InvalidArgumentError(
        "--metrics_port_file needs --metrics_port (0: any free port)");
  }
  return FLAGS_metrics_port;
}

std::string MetricsBindHostFromFlags() { return FLAGS_metrics_bind_host; }

absl::Status WriteMetricsPortFileFromFlags(int port) {
  if (FLAGS_metrics_port_file.empty()) return absl::OkStatus();
  return WritePortFile(FLAGS_metrics_port_file, port);
}

}  // namespace ps
