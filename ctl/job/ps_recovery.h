// How psctl recovers a run after a ps lost it (docs/checkpoints.md, "Recovery"): which ps the run
// cannot go on with, whether a failed worker calls for a recovery, and the recovery itself
// (wait for every ps, stop the run, restore the run's own latest complete checkpoint as a new
// run, start the workers there). What it does to the cluster beyond ClusterClient's calls goes
// through RecoveryEnvironment, and its waits through a Clock, so that tests drive it with a fake
// cluster on a SimulatedClock.
#ifndef PS_CTL_JOB_PS_RECOVERY_H_
#define PS_CTL_JOB_PS_RECOVERY_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "ctl/cluster/cluster_client.h"
#include "ctl/job/checkpoint_restore.h"
#include "ctl/job/results_writer.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"

namespace ps {

// A ps the run cannot go on with: it is down, or it was started again and lost the job.
struct LostShard {
  int ps = -1;
  bool down = false;
  std::string why;  // "ps:1 is down (...)", "ps:1 no longer holds the job (...)".
};

// The first ps, in task order, that does not answer ListJobs, else the first that does not list
// `job_id` while another does (it was started again); a shard moved to another ps (MoveShard)
// is held by the ps that serves it, not its own: its own ps may be down or started again, and
// the ps it moved to counts in its place; nullopt when every shard is held
// (whatever state it holds it in), or none does: the job was never made on the shards (a worker
// that failed before making it, such as a program job's that exited at once), which no ps
// restart explains. `replicated` (the job keeps a backup of each shard, docs/replication.md):
// the first shard of which no ps holds a copy (ListJobs: its own shard, or a copy of it; `ps` is
// the shard's own, `down` whether a ps did not answer), else nullopt.
std::optional<LostShard> FindLostShard(const ClusterClient& client, const std::string& job_id,
                                       bool replicated = false);

// Why a run is to be recovered, and where it was.
struct Recovery {
  LostShard shard;
  std::vector<int64_t> worker_steps;  // The step each worker had reached.

  int64_t furthest_step() const {
    return worker_steps.empty() ? 0 : *std::max_element(worker_steps.begin(), worker_steps.end());
  }
};

// When a worker failed because a ps lost the job, the run is to be recovered (rolled back to a
// checkpoint) rather than the worker being lost: says why; else nullopt (no worker failed, or
// every ps still holds the job; `replicated`: every shard is served by one of its copies). The
// records of `not_started` (workers the job grew by that never started) are placeholders, not
// failures.
std::optional<Recovery> RecoveryNeeded(const ClusterClient& client, const std::string& job_id,
                                       const std::vector<JobProgress>& workers,
                                       bool replicated = false,
                                       const std::set<int>& not_started = {});

// How long a recovery may take: waiting for every ps to be up again, and trying again when a ps
// goes down while the job is restored.
inline constexpr absl::Duration kRecoveryDeadline = absl::Seconds(60);

// What a recovery does to the cluster beyond ClusterClient's calls. job_runner.cc binds these
// to the cluster's daemons; a test, to a fake cluster. Every field is required.
struct RecoveryEnvironment {
  // A client on channels made afresh, none from before the ps went away (one per probe).
  std::function<absl::StatusOr<std::unique_ptr<ClusterClient>>()> connect;
  // Stops the job on every worker and deletes it on every ps; errors are ignored.
  std::function<void(const std::string& job_id)> stop_everywhere;
  // A fresh run id for the recovered run.
  std::function<std::string()> new_run_id;
  // Starts `spec` on every worker w that is up from first_steps[w] (one that is down is skipped
  // and rejoins later). UNAVAILABLE starts the recovery over; another error ends it.
  std::function<absl::Status(const ClusterClient& client, const JobSpec& spec,
                             const std::vector<int64_t>& first_steps)>
      start_workers;
  Clock* clock = Clock::Real();  // Times the waits and the deadline.
  std::ostream* out = nullptr;   // What the recovery says.
  bool live_line = false;        // The progress line is live: end it first.
  ResultsWriter* results = nullptr;  // Gets "recovering" and "recovered" events.
};

// Recovers the job after a ps lost it (docs/ARCHITECTURE.md section 6, recovery as a rollback):
// once every ps answers (polled every 500 ms; a ps that answers but no longer holds the job, or
// holds it in whatever state, counts as up: the job is never taken from a ps as it stands),
// stops the run everywhere, restores on every shard the latest complete checkpoint of this
// submission's own runs (`*restorable`, never another run's; ctl/job/checkpoint_restore.h) as a
// new run (`spec`'s run_id is renewed and added to `*restorable`) and starts every worker that
// is up at its step, which it returns. Before the run's first checkpoint it starts the run over
// from step 0 instead, saying so. A ps lost again meanwhile (UNAVAILABLE) starts the recovery
// over after 500 ms. At kRecoveryDeadline it stops the job everywhere and returns UNAVAILABLE
// naming the ps still down. `*client` is replaced by each probe's fresh client.
absl::StatusOr<int64_t> RecoverRun(const RecoveryEnvironment& env, const Recovery& recovery,
                                   std::unique_ptr<ClusterClient>* client, JobSpec* spec,
                                   RestorableCheckpoints* restorable);

}  // namespace ps

#endif  // PS_CTL_JOB_PS_RECOVERY_H_
