#include "ctl/cluster/prometheus_config.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/cluster/host_port.h"

namespace ps {
namespace {

// Prometheus's duration syntax (model.ParseDuration): one or more of <digits><unit>, the units
// in the order y, w, d, h, m, s, ms, each at most once; the whole above zero.
bool IsPrometheusDuration(absl::string_view text) {
  static const char* const kUnits[] = {"y", "w", "d", "h", "m", "s", "ms"};
  constexpr int kNumUnits = sizeof(kUnits) / sizeof(kUnits[0]);
  auto is_digit = [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); };
  int next_unit = 0;
  bool positive = false;
  while (!text.empty()) {
    size_t digits = 0;
    for (; digits < text.size() && is_digit(text[digits]); ++digits) {
      positive = positive || text[digits] != '0';
    }
    size_t letters = digits;
    while (letters < text.size() && !is_digit(text[letters])) ++letters;
    const absl::string_view unit = text.substr(digits, letters - digits);
    int index = next_unit;
    while (index < kNumUnits && unit != kUnits[index]) ++index;
    if (digits == 0 || index == kNumUnits) return false;
    next_unit = index + 1;
    text.remove_prefix(letters);
  }
  return positive;
}

}  // namespace

MetricsPorts FixedMetricsPorts(const ClusterSpec& cluster, int ps_port, int worker_port) {
  return {{std::string(kPsJob), std::vector<int>(cluster.NumTasks(kPsJob), ps_port)},
          {std::string(kWorkerJob), std::vector<int>(cluster.NumTasks(kWorkerJob), worker_port)}};
}

absl::StatusOr<MetricsPorts> AskMetricsPorts(const ClusterClient& client) {
  MetricsPorts ports;
  std::vector<std::string> problems;
  bool down = false;
  for (absl::string_view job : {kPsJob, kWorkerJob}) {
    std::vector<int>& job_ports = ports[std::string(job)];
    for (int i = 0; i < client.cluster().NumTasks(job); ++i) {
      absl::StatusOr<TaskInfo> info = client.GetTaskInfo(job, i);
      if (!info.ok()) {
        down = true;
        problems.push_back(absl::StrCat(client.TaskName(job, i), ": cannot ask for its /metrics ",
                                        "port (", ClusterClient::Detail(info.status()),
                                        "); is the daemon running?"));
      } else if (info->job() != job || info->index() != i) {
        problems.push_back(absl::StrCat(client.TaskName(job, i), ": this is ", info->job(), ":",
                                        info->index(),
                                        "; the daemons use a different ClusterSpec"));
      } else if (info->metrics_port() <= 0) {
        problems.push_back(absl::StrCat(client.TaskName(job, i), ": serves no /metrics; start it ",
                                        "with --metrics_port"));
      }
      job_ports.push_back(info.ok() ? info->metrics_port() : 0);
    }
  }
  if (problems.empty()) return ports;
  const std::string message = absl::StrCat(
      absl::StrJoin(problems, "\n"),
      "\n(where the tasks serve /metrics on fixed ports, as the systemd and Kubernetes "
      "deployments do, pass them instead of asking the tasks: --metrics_port=PORT for every "
      "task, and --worker_metrics_port=PORT for the workers where theirs differs)");
  return down ? absl::UnavailableError(message) : absl::FailedPreconditionError(message);
}

absl::StatusOr<std::string> PrometheusConfig(const ClusterSpec& cluster, const MetricsPorts& ports,
                                             absl::string_view scrape_interval,
                                             absl::string_view source) {
  if (!IsPrometheusDuration(scrape_interval)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--scrape_interval=", scrape_interval,
        " is not a Prometheus duration above zero; write one like 5s, 1m30s or 500ms"));
  }
  std::string yaml = absl::StrCat(
      "# Prometheus scrape configuration for the cluster of ",
      absl::StrReplaceAll(source, {{"\n", " "}}), ",\n# written by psctl prometheus-config.\n",
      "global:\n  scrape_interval: ", scrape_interval, "\nscrape_configs:\n");
  for (absl::string_view job : {kPsJob, kWorkerJob}) {
    const std::vector<std::string>& tasks = cluster.Tasks(job);
    auto job_ports = ports.find(job);
    if (job_ports == ports.end() || job_ports->second.size() != tasks.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the metrics ports do not cover the ", job, " tasks of the cluster"));
    }
    absl::StrAppend(&yaml, "  - job_name: \"", job, "\"\n    static_configs:\n");
    for (size_t i = 0; i < tasks.size(); ++i) {
      const int port = job_ports->second[i];
      if (port < 1 || port > 65535) {
        return absl::InvalidArgumentError(
            absl::StrCat(job, ":", i, ": metrics port ", port, " is not in 1..65535"));
      }
      // The ClusterSpec's addresses were validated when it was read.
      absl::StatusOr<HostPort> address = ParseHostPort(tasks[i]);
      if (!address.ok()) return address.status();
      address->port = port;
      absl::StrAppend(&yaml, "      - targets: [\"", address->ToString(), "\"]\n",
                      "        labels:\n          task: \"", job, ":", i, "\"\n");
    }
  }
  return yaml;
}

}  // namespace ps
