// The metrics flags ps_server and ps_worker share: --metrics_port, --metrics_bind_host and
// --metrics_port_file (common/net/metrics_http_server.h serves the port).
#ifndef PS_COMMON_NET_METRICS_FLAGS_H_
#define PS_COMMON_NET_METRICS_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ps {

// --metrics_port: a port, 0 for any free one, or -1 for none. INVALID_ARGUMENT naming the flag
// for any other value, or for --metrics_port_file without a metrics port.
absl::StatusOr<int> MetricsPortFromFlags();

// --metrics_bind_host: the /metrics page's interface (loopback by default).
std::string MetricsBindHostFromFlags();

// Writes the bound metrics `port` to --metrics_port_file when that is given.
absl::Status WriteMetricsPortFileFromFlags(int port);

}  // namespace ps

#endif  // PS_COMMON_NET_METRICS_FLAGS_H_
