// ShardJob::Grow: a running elastic job gets workers its ClusterSpec did not have
// (docs/elastic.md "A ClusterSpec that grows").
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/shard_job.h"

namespace ps {
namespace {

// Why a job of `spec` may not grow to `worker_addresses`; "" when it may.
std::string WhyNotGrow(const ParameterSpec& spec, const std::vector<std::string>& worker_addresses) {
  if (!spec.lost_workers_leave()) {
    return "only an elastic job (min_workers) grows: its mode then follows who is in it; submit "
           "the job with min_workers to add workers while it runs";
  }
  if (!spec.has_data_handout()) {
    return "its workers read fixed shards of the data (sharding STATIC), which depend on the "
           "number of workers; submit it with \"sharding\": \"DYNAMIC\" to add workers while it "
           "runs";
  }
  const int workers = spec.num_workers();
  if (static_cast<int>(worker_addresses.size()) < workers) {
    return absl::StrCat("it has ", workers, " workers and the grown cluster lists ",
                        worker_addresses.size(), ": a job does not shrink this way (psctl "
                        "remove-worker takes a worker out)");
  }
  // Bounded by both lists: a spec a caller made may list more addresses than workers.
  const int known = std::min(spec.worker_addresses_size(), static_cast<int>(worker_addresses.size()));
  for (int w = 0; w < known; ++w) {
    if (worker_addresses[w] != spec.worker_addresses(w)) {
      return absl::StrCat("it runs worker:", w, " at ", spec.worker_addresses(w),
                          ", and the grown cluster at ", worker_addresses[w],
                          ": a worker the job has keeps its address");
    }
  }
  return "";
}

}  // namespace

absl::Status ShardJob::Grow(const std::string& run_id,
                            const std::vector<std::string>& worker_addresses) {
  absl::Status run = CheckRun(run_id, "grow request");
  if (!run.ok()) return run;
  const int grown = static_cast<int>(worker_addresses.size());
  {
    // Room for the new workers' chunked pushes first: a worker is served once spec() has it.
    absl::MutexLock chunks_lock(&chunks_mu_);
    if (static_cast<int>(assemblies_.size()) < grown) assemblies_.resize(grown);
  }
  absl::MutexLock lock(&mu_);
  const ParameterSpec& now = spec();
  if (const std::string why = WhyNotGrow(now, worker_addresses); !why.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(JobPrefix(now.job_id()), "cannot grow to ", grown, " workers: ", why));
  }
  if (grown == now.num_workers() && now.worker_addresses_size() == grown) {
    return absl::OkStatus();
  }
  auto next = std::make_unique<ParameterSpec>(now);
  if (now.worker_addresses().empty()) next->set_workers_before_growth(now.num_workers());
  next->set_num_workers(grown);
  next->clear_worker_addresses();
  for (const std::string& address : worker_addresses) next->add_worker_addresses(address);
  parked_pushes_.resize(grown, 0);
  last_push_id_.resize(grown, 0);
  applied_by_worker_.resize(grown, 0);
  staleness_by_worker_.resize(grown);
  incarnation_.resize(grown, kNotJoined);
  steps_pushed_.resize(grown, 0);
  leases_.AddWorkers(grown);
  rule_->AddWorkers(grown);
  if (handout_ != nullptr) handout_->AddWorkers(grown);
  specs_.push_back(std::move(next));
  spec_now_.store(specs_.back().get(), std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace ps
