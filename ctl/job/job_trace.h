// A traced job's timeline (JobSpec.trace) gathered from its tasks into the results, when the
// job ends (SubmitJob).
#ifndef PS_CTL_JOB_JOB_TRACE_H_
#define PS_CTL_JOB_JOB_TRACE_H_

#include "ctl/cluster/cluster_client.h"
#include "ctl/job/results_writer.h"
#include "proto/job.pb.h"

namespace ps {

// Every worker's and shard's trace of `spec`'s job into RESULTS/trace.json
// (ctl/export/trace_file.h). A task that does not answer leaves its part empty, and an event
// (trace_incomplete) says so; a file that cannot be written is an event too (trace_lost).
void WriteJobTrace(const ClusterClient& client, const JobSpec& spec, ResultsWriter* results);

}  // namespace ps

#endif  // PS_CTL_JOB_JOB_TRACE_H_
