// This process's CPU time, memory and threads, read from /proc/self, for TaskInfo (psctl top)
// and the standard process_* families of a /metrics page.
#ifndef PS_COMMON_METRICS_PROCESS_STATS_H_
#define PS_COMMON_METRICS_PROCESS_STATS_H_

#include <cstdint>

#include "common/metrics/metrics.h"

namespace ps {

struct ProcessStats {
  double cpu_seconds = 0;  // User + system, all threads.
  int64_t resident_bytes = 0;
  int threads = 0;
  double start_time_seconds = 0;  // Unix time the process started.
};

// Where /proc cannot be read (not Linux), the fields it could not read stay 0.
ProcessStats ReadProcessStats();

// process_cpu_seconds_total, process_resident_memory_bytes, process_threads and
// process_start_time_seconds, as Prometheus's client libraries name them.
void WriteProcessMetrics(MetricsWriter* writer);

}  // namespace ps

#endif  // PS_COMMON_METRICS_PROCESS_STATS_H_
