// A run's identity when psctl submits it: a fresh run id, and the job id made free for it.
#ifndef PS_CTL_JOB_RUN_CLAIM_H_
#define PS_CTL_JOB_RUN_CLAIM_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "common/cluster/cluster_spec.h"
#include "ctl/cluster/cluster_client.h"

namespace ps {

// A fresh run id: the submission's time and 48 random bits, e.g. "20261123-111500-3f9a2c4b1d0e".
std::string NewRunId();

// Makes `job_id` free for a new run: refuses it (FAILED_PRECONDITION) if a ps holds it, unless
// `replace`, which stops that run on every worker and deletes it on every ps.
absl::Status ClaimJobId(const ClusterSpec& cluster, const ClusterClient& client,
                        const std::string& job_id, bool replace, std::ostream& out);

}  // namespace ps

#endif  // PS_CTL_JOB_RUN_CLAIM_H_
