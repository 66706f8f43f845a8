#include "ctl/job/run_claim.h"

#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "ctl/job/job_runner.h"

namespace ps {

// A fresh run id: the submission's time and 48 random bits, e.g. "20261123-111500-3f9a2c4b1d0e".
std::string NewRunId() {
  std::random_device device;
  const uint64_t bits = (uint64_t{device()} << 16) ^ device();
  const absl::Time now = Clock::Real()->Now();
  return absl::StrCat(absl::FormatTime("%Y%m%d-%H%M%S", now, absl::UTCTimeZone()), "-",
                      absl::Hex(bits & ((uint64_t{1} << 48) - 1), absl::kZeroPad12));
}

// Makes `job_id` free for a new run: refuses it (FAILED_PRECONDITION) if a ps holds it, unless
// `replace`, which stops that run on every worker and deletes it on every ps.
absl::Status ClaimJobId(const ClusterSpec& cluster, const ClusterClient& client,
                        const std::string& job_id, bool replace, std::ostream& out) {
  std::vector<std::string> holders;
  for (int ps = 0; ps < client.num_ps(); ++ps) {
    absl::StatusOr<ListJobsResponse> jobs = client.ListJobs(ps);
    if (!jobs.ok()) return jobs.status();
    for (const std::string& id : jobs->job_ids()) {
      if (id == job_id) holders.push_back(absl::StrCat("ps:", ps));
    }
  }
  if (holders.empty()) return absl::OkStatus();
  if (!replace) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job \"", job_id, "\" already exists on ", absl::StrJoin(holders, ", "),
        " from an earlier run; the runs of a job id never share state: submit under another "
        "job_id, or pass --replace to stop that run and delete its state on every task first"));
  }
  out << "replacing the earlier run of job " << job_id << ": stopping it everywhere\n";
  absl::Status stopped = StopJobEverywhere(cluster, job_id);
  if (!stopped.ok() && !absl::IsNotFound(stopped)) return stopped;
  return absl::OkStatus();
}

}  // namespace ps
