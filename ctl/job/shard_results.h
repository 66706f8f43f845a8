// What psctl reads from the shards at a run's end into its results/: the shards' statistics,
// their parameters, a traced job's timeline and a recorded apply log (ctl/job/job_runner.cc).
#ifndef PS_CTL_JOB_SHARD_RESULTS_H_
#define PS_CTL_JOB_SHARD_RESULTS_H_

#include <ostream>
#include <vector>

#include "absl/status/status.h"
#include "ctl/cluster/cluster_client.h"
#include "ctl/job/results_writer.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"

namespace ps {

// The shards' statistics and parameters, and a traced job's timeline, into `results` (into
// `*shards` the statistics). What could not be read is said on `out`, recorded as a
// "results_incomplete" event, and returned.
// REQUIRES: the job is still on the shards (SubmitJob deletes a stopped job only after this).
absl::Status WriteShardResults(const ClusterClient& client, const JobSpec& spec,
                               ResultsWriter* results, std::ostream& out,
                               std::vector<JobStats>* shards);

}  // namespace ps

#endif  // PS_CTL_JOB_SHARD_RESULTS_H_
