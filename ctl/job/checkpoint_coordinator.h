// How psctl submit takes a job's periodic checkpoints (docs/ARCHITECTURE.md section 6;
// docs/checkpoints.md): psctl runs the job, so it coordinates its checkpoints, as TensorFlow's
// chief does. Two phases:
//   1. Arm checkpoint N on every shard at an agreed clock (ArmCheckpoint): SYNC and SSP the same
//      global step on every shard (the next multiple of every_steps, or, for every_seconds, a
//      step just ahead of the furthest shard); ASYNC and SOFTSYNC each shard's own version
//      (every_steps) or "now" (every_seconds). Each shard snapshots itself there and writes
//      its file in the background.
//   2. Once every shard reports its file written, write the manifest naming them all through
//      every shard (CommitCheckpoint): the checkpoint is complete. A shard that failed to write
//      abandons the checkpoint (training goes on; the failure is printed and counted).
// A replicated job (docs/replication.md) reads each shard's statistics from whichever copy serves
// it, and takes no checkpoint while a shard is served away from its own ps (taken over): each
// shard's file is written on its own ps's disk, where a recovery reads it. It says so once; the
// latest complete checkpoint stays the job's fallback.
#ifndef PS_CTL_JOB_CHECKPOINT_COORDINATOR_H_
#define PS_CTL_JOB_CHECKPOINT_COORDINATOR_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "ctl/cluster/cluster_client.h"
#include "ctl/job/results_writer.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"

namespace ps {

// Not thread-safe: one per running job, polled from psctl submit's loop.
class CheckpointCoordinator {
 public:
  // `client`, `out` and `clock` must outlive it. `spec` is the run's (its run_id set). `clock`
  // times Finish's wait for the shards' files and dates each manifest (a test passes a
  // SimulatedClock); Poll takes the time from its caller.
  CheckpointCoordinator(const ClusterClient& client, const JobSpec& spec, std::ostream* out,
                        Clock* clock = Clock::Real());

  // Where complete and abandoned checkpoints are recorded as events too (not owned; may be
  // null).
  void set_results(ResultsWriter* results) { results_ = results; }
  // Takes Finish's last checkpoint of a finished job only when one was taken during the run:
  // for psctl's default checkpoints (ctl/job/job_defaults.h), which a short job should not pay for.
  void set_final_only_after_one() { final_only_after_one_ = true; }
  // Whether the job asks for checkpoints.
  bool enabled() const;
  // FAILED_PRECONDITION, saying how to give one, unless every ps has a checkpoint directory
  // for the job: checked before the job starts.
  absl::Status CheckDirectories() const;
  // Arms the next checkpoint when one is due, completes one every shard has written, and says
  // when one is abandoned. Call every few hundred milliseconds; `now` is the caller's clock.
  void Poll(absl::Time now);
  // Once the job has ended: with `final` (it finished), takes a last checkpoint of its final
  // state unless the latest is of it; completes the checkpoints its shards took (waiting up to
  // `timeout` for their files), and forgets those armed at a clock the shards never reached.
  void Finish(bool final, absl::Duration timeout);
  // Checkpoints armed and not yet complete or abandoned.
  int pending() const { return static_cast<int>(armed_.size()); }
  // The latest complete checkpoint of this run, if any.
  const std::optional<CheckpointManifest>& last_complete() const { return last_complete_; }
  int64_t failed() const { return failed_; }

 private:
  struct Armed {
    int64_t seq = 0;
    int64_t at_clock = 0;  // -1: now.
  };
  // SYNC, SSP, ALLREDUCE and LOCAL_SGD: every shard passes the same steps.
  bool agreed_step() const;
  // Every shard's statistics of the job; false when a shard did not answer.
  bool ReadShards(std::vector<JobStats>* shards) const;
  // Settles what it can of armed_; returns the shards' furthest clock.
  int64_t SettleArmed(const std::vector<JobStats>& shards);
  // Once the job has ended: settles armed_ until it is empty or `deadline`, dropping those
  // armed at a clock some shard never reached; `shards` ends as the shards' last statistics
  // (empty when one did not answer).
  void SettleBy(absl::Time deadline, std::vector<JobStats>* shards);
  // Whether the latest complete checkpoint is of the shards' state now (no update since).
  bool LatestIsOf(const std::vector<JobStats>& shards) const;
  // False, saying so the first time, while a shard is served by a copy away from its own ps;
  // true again, saying so, once every shard is home.
  bool EveryShardAtHome(const std::vector<JobStats>& shards);
  void Arm(int64_t at_clock);
  // Completes or abandons each armed checkpoint every shard has reported; true for those
  // settled, which leave armed_.
  bool Settle(const Armed& armed, const std::vector<JobStats>& shards);
  void Complete(const Armed& armed, const std::vector<ShardCheckpoint>& entries,
                const ParameterSpec& parameters);
  void Abandon(const Armed& armed, const std::string& why);

  const ClusterClient& client_;
  const JobSpec spec_;
  std::ostream& out_;
  Clock* const clock_;
  int64_t next_seq_ = 1;
  std::vector<Armed> armed_;
  absl::Time last_timed_ = absl::InfinitePast();  // every_seconds: when it fired last,
  int64_t last_timed_clock_ = -1;                 // and the shards' furthest clock then.
  int64_t last_step_clock_ = 0;  // every_steps: the multiple armed last.
  ResultsWriter* results_ = nullptr;
  std::optional<CheckpointManifest> last_complete_;
  bool final_only_after_one_ = false;
  bool paused_ = false;  // EveryShardAtHome said it.
  int64_t failed_ = 0;
};

}  // namespace ps

#endif  // PS_CTL_JOB_CHECKPOINT_COORDINATOR_H_
