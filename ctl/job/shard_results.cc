#include "ctl/job/shard_results.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/client/worker_session.h"
#include "ctl/export/apply_log_files.h"
#include "ctl/job/job_trace.h"

namespace ps {

// The shards' statistics and parameters, and a traced job's timeline, into `results` (into
// `*shards` the statistics). What could not be read is said on `out`, recorded as a
// "results_incomplete" event, and returned.
// REQUIRES: the job is still on the shards (SubmitJob deletes a stopped job only after this).
absl::Status WriteShardResults(const ClusterClient& client, const JobSpec& spec,
                               ResultsWriter* results, std::ostream& out,
                               std::vector<JobStats>* shards) {
  shards->clear();
  if (spec.trace()) WriteJobTrace(client, spec, results);
  absl::StatusOr<std::vector<JobStats>> stats =
      client.ps()->GetJobStats(spec.job_id(), spec.replicas() > 1);
  absl::Status read = stats.status();
  if (stats.ok()) {
    results->WriteStaleness(*stats).IgnoreError();
    results->RecordStalenessSnapshot(*stats).IgnoreError();
    const ParameterSpec& parameters = (*stats)[0].spec();
    std::vector<std::vector<float>> storage;
    MutableVariables values;
    for (const VariableDef& variable : parameters.variables()) {
      int64_t count = 1;
      for (int64_t dimension : variable.shape()) count *= dimension;
      storage.emplace_back(count);
      values[variable.name()] = absl::MakeSpan(storage.back());
    }
    read = PullCurrentValues(client.ps(), parameters, values);
    if (read.ok()) read = results->WriteParameters(parameters, values);
    if (spec.record_apply_log()) {
      absl::StatusOr<std::vector<ApplyLog>> logs = client.ps()->GetApplyLogs(spec.job_id());
      absl::Status written = logs.status();
      if (logs.ok()) written = WriteApplyLogFiles(results->dir(), parameters, *logs);
      if (!written.ok()) {
        results->RecordEvent({"apply_log_lost", "", -1, "", -1, std::string(written.message())});
      }
    }
    *shards = *std::move(stats);
  }
  if (!read.ok()) {
    const std::string line = absl::StrCat(
        "results incomplete: the job's ", stats.ok() ? "parameters" : "statistics and parameters",
        " could not be read from its ps (", read.message(), "); no params/ in ",
        results->dir());
    out << line << "\n";
    results->RecordEvent({"results_incomplete", "", -1, "", -1, line});
  }
  return read;
}

}  // namespace ps
