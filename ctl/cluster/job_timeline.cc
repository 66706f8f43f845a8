#include "ctl/cluster/job_timeline.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/trace/trace_recorder.h"

namespace ps {

std::vector<TaskTrace> TakeTimeline(const ClusterClient& client, const std::string& job_id,
                                    const std::vector<int>& workers, const std::vector<int>& ps) {
  TraceRequest request;
  request.set_job_id(job_id);
  request.set_last_us(absl::ToInt64Microseconds(kTimelineWindow));
  request.set_max_events(kTimelineMaxEvents);
  std::vector<TaskTrace> traces;
  for (int worker : workers) {
    absl::StatusOr<Trace> trace = client.GetWorkerTrace(worker, request);
    if (trace.ok()) traces.push_back({absl::StrCat("worker:", worker), *std::move(trace)});
  }
  for (int task : ps) {
    absl::StatusOr<Trace> trace = client.GetPsTrace(task, request);
    if (trace.ok()) traces.push_back({absl::StrCat("ps:", task), *std::move(trace)});
  }
  return traces;
}

nlohmann::json TimelineJson(const std::vector<TaskTrace>& traces, absl::Duration window) {
  // The window's end: the newest event of the workers, asked first (TakeTimeline), where they
  // have any, so that the shards, asked later, show no more than the workers could.
  int64_t end_us = 0;
  for (const bool workers_only : {true, false}) {
    for (const TaskTrace& task : traces) {
      if (workers_only && !absl::StartsWith(task.task, "worker:")) continue;
      for (const TraceEvent& event : task.trace.events()) {
        end_us = std::max(end_us, event.start_us() + event.duration_us());
      }
    }
    if (end_us > 0) break;
  }
  // The window's start: `window` before the newest event, or later where every worker's last
  // kTimelineSteps pulls began after that.
  int64_t start_us = end_us - absl::ToInt64Microseconds(window);
  int64_t steps_start_us = end_us;
  bool any_pulls = false;
  for (const TaskTrace& task : traces) {
    std::vector<int64_t> pulls;
    for (const TraceEvent& event : task.trace.events()) {
      if (event.kind() == TraceEvent::PULL) pulls.push_back(event.start_us());
    }
    if (pulls.empty()) continue;
    any_pulls = true;
    if (pulls.size() < static_cast<size_t>(kTimelineSteps)) {
      steps_start_us = start_us;  // A worker with fewer steps: the whole window.
      break;
    }
    std::nth_element(pulls.begin(), pulls.end() - kTimelineSteps, pulls.end());
    steps_start_us = std::min(steps_start_us, *(pulls.end() - kTimelineSteps));
  }
  if (any_pulls) start_us = std::max(start_us, steps_start_us);
  const int64_t window_us = std::max<int64_t>(1, end_us - start_us);
  nlohmann::json json = {{"window_ms", window_us / 1000.0}};
  json["kinds"] = nlohmann::json::array();
  for (int kind = 0; kind <= TraceEvent::Kind_MAX; ++kind) {
    json["kinds"].push_back(TraceKindName(static_cast<TraceEvent::Kind>(kind)));
  }
  json["rows"] = nlohmann::json::array();
  for (const TaskTrace& task : traces) {
    nlohmann::json spans = nlohmann::json::array();
    for (const TraceEvent& event : task.trace.events()) {
      const int64_t event_end = std::min(event.start_us() + event.duration_us(), end_us);
      if (event_end < start_us || event.start_us() > end_us) continue;
      const int64_t begin = std::max(event.start_us(), start_us);
      spans.push_back({static_cast<int>(event.kind()), (begin - start_us) / 1000.0,
                       (event_end - begin) / 1000.0, event.step(), event.staleness(),
                       event.worker()});
    }
    json["rows"].push_back({{"task", task.task}, {"spans", std::move(spans)}});
  }
  return json;
}

}  // namespace ps
