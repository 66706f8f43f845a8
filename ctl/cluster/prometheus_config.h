// psctl prometheus-config: a Prometheus scrape configuration (YAML) for a cluster's /metrics
// pages. Scrape jobs "ps" and "worker" (the ClusterSpec's jobs, which Prometheus puts in each
// series' `job` label), one static target per task, host:metrics_port with the host of its
// ClusterSpec address, labelled with the task ("ps:0"):
//
//   global:
//     scrape_interval: 5s
//   scrape_configs:
//     - job_name: "ps"
//       static_configs:
//         - targets: ["10.0.0.1:9100"]
//           labels:
//             task: "ps:0"
//     ...
#ifndef PS_CTL_CLUSTER_PROMETHEUS_CONFIG_H_
#define PS_CTL_CLUSTER_PROMETHEUS_CONFIG_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cluster/cluster_spec.h"
#include "ctl/cluster/cluster_client.h"

namespace ps {

// The /metrics port of each task: by job (kPsJob, kWorkerJob), in index order.
using MetricsPorts = std::map<std::string, std::vector<int>, std::less<>>;

// Every ps task of `cluster` on `ps_port`, every worker on `worker_port`: fixed ports, as the
// systemd and Kubernetes deployments give them (9100 and 9101).
MetricsPorts FixedMetricsPorts(const ClusterSpec& cluster, int ps_port, int worker_port);

// Asks every task for its /metrics port (ClusterClient::GetTaskInfo, one task at a time). A task
// that does not answer, answers as another task, or serves no /metrics is an error (UNAVAILABLE
// when any is down, else FAILED_PRECONDITION) with one line per such task, naming it, and the fix.
absl::StatusOr<MetricsPorts> AskMetricsPorts(const ClusterClient& client);

// The configuration, as above: a comment naming `source` (where the cluster came from), then
// the YAML. IPv6 hosts are bracketed ("[::1]:9100"). INVALID_ARGUMENT when `scrape_interval` is
// not a Prometheus duration ("5s", "1m30s", "500ms"), or `ports` lacks a task of `cluster` or
// gives one a port outside 1..65535.
absl::StatusOr<std::string> PrometheusConfig(const ClusterSpec& cluster, const MetricsPorts& ports,
                                             absl::string_view scrape_interval,
                                             absl::string_view source);

}  // namespace ps

#endif  // PS_CTL_CLUSTER_PROMETHEUS_CONFIG_H_
