#include "ctl/export/trace_file.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include <nlohmann/json.hpp>

#include "common/trace/trace_recorder.h"

namespace ps {
namespace {

// The events of a SYNC or SOFTSYNC aggregate on a shard's "aggregates" thread.
constexpr int kAggregateThread = 0;

bool IsShardEvent(TraceEvent::Kind kind) {
  return kind == TraceEvent::APPLY || kind == TraceEvent::ACCUMULATE || kind == TraceEvent::DROP;
}

// A metadata event naming process `pid` (thread `tid` where given).
void AppendName(int pid, int tid, const std::string& name, std::string* out) {
  const std::string quoted = nlohmann::json(name).dump();
  if (tid < 0) {
    absl::StrAppend(out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":", pid,
                    ",\"args\":{\"name\":", quoted, "}},\n");
  } else {
    absl::StrAppend(out, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", pid, ",\"tid\":", tid,
                    ",\"args\":{\"name\":", quoted, "}},\n");
  }
}

// One event of task `pid`, its time from `origin_us`.
void AppendEvent(const TraceEvent& event, int pid, int64_t origin_us, std::string* out) {
  const bool on_shard = IsShardEvent(event.kind());
  const int tid = !on_shard ? 1 : event.worker() < 0 ? kAggregateThread : event.worker() + 1;
  const int64_t ts = event.start_us() - origin_us;
  absl::StrAppend(out, "{\"name\":\"", TraceKindName(event.kind()), "\",\"cat\":\"",
                  on_shard ? "shard" : "worker", "\",");
  if (event.kind() == TraceEvent::DROP) {
    absl::StrAppend(out, "\"ph\":\"i\",\"s\":\"t\",\"ts\":", ts);
  } else {
    absl::StrAppend(out, "\"ph\":\"X\",\"ts\":", ts, ",\"dur\":", event.duration_us());
  }
  absl::StrAppend(out, ",\"pid\":", pid, ",\"tid\":", tid, ",\"args\":{\"step\":", event.step());
  if (on_shard) {
    absl::StrAppend(out, ",\"worker\":", event.worker(), ",\"staleness\":", event.staleness(),
                    ",\"version\":", event.version());
  }
  absl::StrAppend(out, "}},\n");
}

}  // namespace

std::string ChromeTraceJson(const JobTrace& trace) {
  int64_t origin_us = std::numeric_limits<int64_t>::max();
  for (const std::vector<Trace>* tasks : {&trace.workers, &trace.shards}) {
    for (const Trace& task : *tasks) {
      for (const TraceEvent& event : task.events()) origin_us = std::min(origin_us, event.start_us());
    }
  }
  if (origin_us == std::numeric_limits<int64_t>::max()) origin_us = 0;
  const int num_workers = static_cast<int>(trace.workers.size());
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (int w = 0; w < num_workers; ++w) {
    AppendName(w + 1, -1, absl::StrCat("worker:", w), &out);
    AppendName(w + 1, 1, "training loop", &out);
    for (const TraceEvent& event : trace.workers[w].events()) {
      AppendEvent(event, w + 1, origin_us, &out);
    }
  }
  for (int k = 0; k < static_cast<int>(trace.shards.size()); ++k) {
    const int pid = num_workers + k + 1;
    AppendName(pid, -1, absl::StrCat("ps shard ", k), &out);
    AppendName(pid, kAggregateThread, "aggregates", &out);
    for (int w = 0; w < num_workers; ++w) {
      AppendName(pid, w + 1, absl::StrCat("gradients of worker:", w), &out);
    }
    for (const TraceEvent& event : trace.shards[k].events()) AppendEvent(event, pid, origin_us, &out);
  }
  if (absl::EndsWith(out, ",\n")) out.erase(out.size() - 2, 1);  // JSON allows no last comma.
  absl::StrAppend(&out, "],\n");
  nlohmann::json other = {{"job_id", trace.job_id}, {"origin_unix_us", origin_us}};
  for (int w = 0; w < num_workers; ++w) {
    other["dropped_events"][absl::StrCat("worker:", w)] = trace.workers[w].dropped();
  }
  for (int k = 0; k < static_cast<int>(trace.shards.size()); ++k) {
    other["dropped_events"][absl::StrCat("ps shard ", k)] = trace.shards[k].dropped();
  }
  absl::StrAppend(&out, "\"otherData\":", other.dump(), "}\n");
  return out;
}

absl::Status WriteTraceFile(const std::string& path, const JobTrace& trace, FileSystem* fs) {
  return fs->WriteFileAtomically(path, ChromeTraceJson(trace));
}

}  // namespace ps
