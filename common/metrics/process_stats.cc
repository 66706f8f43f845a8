#include "common/metrics/process_stats.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ps {
namespace {

// The boot time (Unix seconds) from /proc/stat's btime line; 0 if unknown.
double BootTimeSeconds() {
  std::ifstream stat("/proc/stat");
  std::string line;
  while (std::getline(stat, line)) {
    if (line.rfind("btime ", 0) == 0) return std::stod(line.substr(6));
  }
  return 0;
}

}  // namespace

ProcessStats ReadProcessStats() {
  ProcessStats stats;
  std::ifstream file("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  // The second field (the command) is in parentheses and may hold spaces: fields are counted
  // from the last ')'.
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return stats;
  std::istringstream rest(text.substr(paren + 1));
  std::vector<std::string> fields;  // fields[0] is field 3 (state).
  for (std::string field; rest >> field;) fields.push_back(field);
  if (fields.size() < 22) return stats;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // Fields 14 utime, 15 stime, 20 num_threads, 22 starttime (ticks since boot), 24 rss (pages).
  stats.cpu_seconds = (std::stod(fields[11]) + std::stod(fields[12])) / ticks;
  stats.threads = std::stoi(fields[17]);
  stats.start_time_seconds = BootTimeSeconds() + std::stod(fields[19]) / ticks;
  stats.resident_bytes = static_cast<int64_t>(std::stod(fields[21]) * page);
  return stats;
}

void WriteProcessMetrics(MetricsWriter* writer) {
  const ProcessStats stats = ReadProcessStats();
  writer->Family("process_cpu_seconds_total", "User and system CPU time spent, in seconds.",
                 MetricType::kCounter);
  writer->Sample("process_cpu_seconds_total", {}, stats.cpu_seconds);
  writer->Family("process_resident_memory_bytes", "Resident memory size in bytes.",
                 MetricType::kGauge);
  writer->Sample("process_resident_memory_bytes", {}, static_cast<double>(stats.resident_bytes));
  writer->Family("process_threads", "Threads of the process.", MetricType::kGauge);
  writer->Sample("process_threads", {}, stats.threads);
  writer->Family("process_start_time_seconds", "When the process started, in Unix seconds.",
                 MetricType::kGauge);
  writer->Sample("process_start_time_seconds", {}, stats.start_time_seconds);
}

}  // namespace ps
