#include "ctl/job/job_trace.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/client/ps_client.h"
#include "ctl/export/trace_file.h"
#include "proto/trace.pb.h"

namespace ps {

void WriteJobTrace(const ClusterClient& client, const JobSpec& spec, ResultsWriter* results) {
  JobTrace trace;
  trace.job_id = spec.job_id();
  trace.workers.resize(client.num_workers());
  TraceRequest request;
  request.set_job_id(spec.job_id());
  for (int w = 0; w < client.num_workers(); ++w) {
    absl::StatusOr<Trace> worker = client.GetWorkerTrace(w, request);
    if (worker.ok()) {
      trace.workers[w] = *std::move(worker);
    } else {
      results->RecordEvent({"trace_incomplete", absl::StrCat("worker:", w), -1, "", -1,
                            std::string(worker.status().message())});
    }
  }
  absl::StatusOr<std::vector<Trace>> shards =
      client.ps()->GetTraces(spec.job_id(), spec.replicas() > 1);
  if (shards.ok()) {
    trace.shards = *std::move(shards);
  } else {
    trace.shards.resize(client.num_ps());
    results->RecordEvent(
        {"trace_incomplete", "", -1, "", -1, std::string(shards.status().message())});
  }
  absl::Status written = WriteTraceFile(results->dir() + "/trace.json", trace);
  if (!written.ok()) {
    results->RecordEvent({"trace_lost", "", -1, "", -1, std::string(written.message())});
  }
}

}  // namespace ps
