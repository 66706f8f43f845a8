// What psctl does when a worker of the job it follows fails (docs/ARCHITECTURE.md section 8): go on
// without it where the job's mode allows, wait for its return where the mode needs it, or stop
// the job; and take it back when its daemon is started again.
#ifndef PS_CTL_JOB_LOST_WORKERS_H_
#define PS_CTL_JOB_LOST_WORKERS_H_

#include <functional>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/cluster/cluster_spec.h"
#include "ctl/cluster/cluster_client.h"
#include "ctl/job/results_writer.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"

namespace ps {

// Whether the job goes on without `failed` of its `num_workers` workers: an elastic job
// (min_workers) while min_workers are left; else ASYNC and SOFTSYNC need no worker in
// particular; SSP stops waiting for a worker whose lease ran out (worker_lease_s); SYNC with
// backup workers needs replicas_to_aggregate of them.
bool GoesOnWithout(const JobSpec& spec, int num_workers, int failed);

// Not thread-safe: one per followed job, updated from psctl's loop.
class LostWorkers {
 public:
  // `refollow(worker)` follows a worker again once it has been started anew. The references
  // must outlive this.
  // `first_step`: where the run's workers started (a worker that rejoins before it has
  // reported a step starts there); `run_start`: when (Update's clock), from which a worker that
  // rejoins counts the job's time_limit_s.
  // The workers are `client`'s (its cluster, which may grow: AddWorkers).
  LostWorkers(const ClusterClient& client, const JobSpec& spec, int64_t first_step,
              absl::Time run_start, std::ostream& out, ResultsWriter* results,
              std::function<void(int)> refollow);

  // Takes the workers' latest progress and those `gone` (their stream broke: the daemon or its
  // host died). A worker gone is lost: the job goes on without it, or, SYNC without backup
  // workers with a lease, waits up to worker_lease_s for its return; a lost worker whose
  // daemon is back (tried every second) rejoins as a new incarnation at the step it had
  // reached; so is one whose process alone died (JobProgress.process_died: a program job's
  // program killed). A worker that reported its own failure (bad data, a NaN gradient, a
  // program that exited with an error) fails the job.
  // Returns why the job must stop ("worker:1 failed", "worker:1 did not return within 3s"),
  // or "" while it goes on.
  std::string Update(const std::vector<JobProgress>& now, const std::set<int>& gone,
                     absl::Time time);

  // The job grew: every worker the client has from `first_new` on is new, and joins as a lost
  // worker rejoins, once its daemon is up (TryRejoin, as incarnation 1). Says so.
  void AddWorkers(int first_new);
  // The workers the job grew by that have not started yet: neither lost nor failed, and not in
  // the job's count until they start.
  const std::set<int>& not_started() const { return not_started_; }

  // The workers lost and not back that the job goes on (or waits) without; one that did not
  // return in time is a failure of the job again.
  const std::set<int>& lost() const { return lost_; }
  // The workers that left the running job (psctl remove-worker: LEFT) and are not back. Update
  // takes one back once its daemon says rejoin_asked (psctl add-worker), as a lost one.
  const std::set<int>& left() const { return left_; }

 private:
  // Starts lost `worker` again if its daemon is back, as its next incarnation from the step it
  // had reached (SYNC: the shards' step), and says so. True when it rejoined.
  bool TryRejoin(const JobProgress& last, absl::Time time);
  // Whether `worker`'s daemon holds the job as LEFT with rejoin_asked (psctl add-worker).
  bool RejoinAsked(int worker) const;

  const ClusterClient& client_;
  const JobSpec& spec_;
  const int64_t first_step_;
  const absl::Time run_start_;
  std::ostream& out_;
  ResultsWriter* const results_;
  const std::function<void(int)> refollow_;
  std::set<int> lost_;
  std::set<int> left_;
  std::set<int> added_;  // The workers the job grew by (AddWorkers).
  std::set<int> not_started_;
  std::map<int, absl::Time> lost_at_;    // When each lost worker failed.
  std::map<int, int> incarnations_;      // Of the workers started again.
  absl::Time last_rejoin_try_ = absl::InfinitePast();
};

}  // namespace ps

#endif  // PS_CTL_JOB_LOST_WORKERS_H_
