// A job's timeline (JobSpec.trace) as a Chrome trace: the Trace Event Format's JSON object form,
// which Perfetto (ui.perfetto.dev), chrome://tracing and the dashboard's timeline open. psctl
// writes it to RESULTS/trace.json when a traced job ends.
//
// Layout:
//   - one process per task: "worker:W" (pid W + 1) with one thread, its training loop, whose
//     spans nest (a WAIT inside its PULL or PUSH); "ps shard K" (pid num_workers + K + 1) with a
//     thread per worker ("gradients of worker:W", tid W + 1: its applies, accumulations and
//     drops, which overlap with other workers') and one for SYNC's aggregates ("aggregates",
//     tid 0);
//   - span events ("ph": "X", a DROP an instant "ph": "i") named after TraceEvent's kind in
//     lower case, "ts" and "dur" in microseconds from the earliest event, with the step, and on
//     a shard the staleness and the version after, in "args";
//   - "otherData": the job id, the earliest event's time (Unix microseconds) and, per task, the
//     events it did not keep (TraceRecorder::kMaxEvents).
#ifndef PS_CTL_EXPORT_TRACE_FILE_H_
#define PS_CTL_EXPORT_TRACE_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/file_system.h"
#include "proto/trace.pb.h"

namespace ps {

// Every task's trace of one job.
struct JobTrace {
  std::string job_id;
  std::vector<Trace> workers;  // By worker index; a worker that gave none has an empty one.
  std::vector<Trace> shards;   // By shard (ps) index.
};

// The Chrome trace JSON of `trace`.
std::string ChromeTraceJson(const JobTrace& trace);

// Writes ChromeTraceJson(trace) to `path` (replaced whole, or left as it was).
absl::Status WriteTraceFile(const std::string& path, const JobTrace& trace,
                            FileSystem* fs = FileSystem::Default());

}  // namespace ps

#endif  // PS_CTL_EXPORT_TRACE_FILE_H_
