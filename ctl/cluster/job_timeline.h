// The status page's view of a traced job (JobSpec.trace): the last seconds of each task's trace,
// taken with each cluster snapshot (cluster_snapshot.h) and drawn by ctl/dashboard/timeline.js.
#ifndef PS_CTL_CLUSTER_JOB_TIMELINE_H_
#define PS_CTL_CLUSTER_JOB_TIMELINE_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/time/time.h"
#include "ctl/cluster/cluster_client.h"
#include "proto/trace.pb.h"

namespace ps {

// How much of each task's trace the page shows, up to the newest event: kTimelineWindow, or less
// where every worker's last kTimelineSteps steps fit in less.
constexpr absl::Duration kTimelineWindow = absl::Seconds(10);
constexpr int kTimelineSteps = 50;
// The most events asked of one task (the newest): a fast job's 10 s may hold many more.
constexpr int kTimelineMaxEvents = 5000;

struct TaskTrace {
  std::string task;  // "worker:1", "ps:0".
  Trace trace;
};

// The last kTimelineWindow (at most kTimelineMaxEvents events) of the trace of `job_id` on each
// of `workers` and on each ps of `ps` (its own shard), one call each with the client's
// status_timeout; a task that does not answer is left out.
std::vector<TaskTrace> TakeTimeline(const ClusterClient& client, const std::string& job_id,
                                    const std::vector<int>& workers, const std::vector<int>& ps);

// The page's JSON of `traces`: {"window_ms", "kinds": [the TraceEvent kinds' names in lower
// case, by number], "rows": [{"task", "spans": [[kind, start_ms, duration_ms, step, staleness,
// worker]]}]}, times from the window's start. The window ends at the workers' newest event (of
// all tasks' where no worker has any) and starts `window` before, or later where every worker's
// last kTimelineSteps pulls began later; spans are cut to it, and those outside left out.
nlohmann::json TimelineJson(const std::vector<TaskTrace>& traces,
                            absl::Duration window = kTimelineWindow);

}  // namespace ps

#endif  // PS_CTL_CLUSTER_JOB_TIMELINE_H_
