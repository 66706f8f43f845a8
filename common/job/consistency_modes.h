// The consistency modes' facts, one row per mode of proto/parameter.proto's
// ConsistencyConfig::Mode. Outside this table and the two factories that build a mode's parts
// (server/consistency/rule_factory.cc, the ps's rule; worker/exchange/exchange_factory.cc, the
// worker's exchange), no production code names a mode: it asks the mode's row. A new mode is a
// new row: FindModeTraits's switch has no `default:`, so the build (-Wswitch -Werror) fails until
// the row exists, and consistency_modes_test walks every mode through the table, the schema and
// both factories.
#ifndef PS_COMMON_JOB_CONSISTENCY_MODES_H_
#define PS_COMMON_JOB_CONSISTENCY_MODES_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/job.pb.h"
#include "proto/parameter.pb.h"

namespace ps {

// ConsistencyConfig.delay: a shard keeps that many old copies of its values.
inline constexpr int kMaxDelay = 1024;

// Who applies the updates.
enum class ModeFamily {
  kPs,    // The shards apply the workers' pushes and hold the model.
  kRing,  // The workers average among themselves over a ring all-reduce and each applies the
          // optimizer to its own copy; the shards hold the initial values and the model the
          // chief (worker 0) publishes.
};

// How stale the values a gradient is computed on may be, in updates of the shards.
enum class Staleness {
  kNone,       // Every worker computes on the same values (SYNC's barrier, ALLREDUCE's mean).
  kFromPace,   // As stale as the other workers' pace makes it (ASYNC, SOFTSYNC).
  kUpToBound,  // At most ssp_bound clocks (SSP); none at a bound of 0.
  kFixed,      // Exactly `delay` updates, by design (DELAYED).
  kOwnCopies,  // Each worker trains a copy of its own between meetings (EASGD, LOCAL_SGD).
};

// When a checkpoint can be taken.
enum class CheckpointPolicy {
  kNone,            // Never: the shards do not hold all of the model (why_no_checkpoints).
  kAgreedStep,      // Every shard at the same clock (ConsistencyRule::agreed_checkpoint_clock).
  kPublishedStep,   // At steps the chief publishes the model (checkpoint.every_steps only).
  kCurrentVersion,  // Each shard as it is when the checkpoint is armed.
};

// What the loss of a worker does to a running job (psctl's lost-worker handling, the ps's
// lease expiry).
enum class LostWorkerPolicy {
  kGoesOn,            // The others go on without it.
  kLeavesAfterLease,  // Its lease (worker_lease_s) runs out and it leaves the clocks; the others
                      // go on. Without a lease the job waits, then fails.
  kBackupWorkers,     // Goes on while replicas_to_aggregate workers remain (backup workers);
                      // otherwise the barrier waits for the worker's return (with a lease).
  kFails,             // The job fails (a ring needs every worker).
};

struct ModeTraits {
  ConsistencyConfig::Mode mode;
  ModeFamily family;
  Staleness staleness;
  CheckpointPolicy checkpoints;
  LostWorkerPolicy lost_worker;
  // The shards keep the model and update it in place: sparse tables and sparse models may run.
  bool shards_hold_the_model;
  // Its shards report a barrier step (JobStats.step) and the workers the barrier waits for.
  bool barrier;
  // A worker's push is a difference that moves the shards' center as it is (the ps runs SGD at
  // rate 1, whatever the job's optimizer, which is the workers').
  bool center_moves_by_differences;
  // DownpourSpec (n_fetch, n_push, local_learning_rate, overlap_communication) is used.
  bool downpour;
  // max_staleness and staleness_learning_rate bound or damp the staleness.
  bool staleness_settings;
  // record_apply_log: the result depends on the order updates arrive in, which a replay
  // reproduces.
  bool replayable;
  // Why a DownpourSpec is refused ("" when it is used, or accepted and unused).
  const char* why_no_downpour;
  // Why a checkpoint is refused, for kNone.
  const char* why_no_checkpoints;
  // The mode's own settings of ConsistencyConfig, for `num_workers` workers; INVALID_ARGUMENT
  // naming the field and the fix.
  absl::Status (*validate_settings)(const ConsistencyConfig& consistency, int num_workers);
  // What else the mode asks of the job (null: nothing).
  absl::Status (*validate_job)(const JobSpec& spec);
};

// The row of `mode`; null for MODE_UNSPECIFIED and values outside the enum.
const ModeTraits* FindModeTraits(ConsistencyConfig::Mode mode);
// The row of `mode`. REQUIRES: a mode of the enum other than MODE_UNSPECIFIED (a validated job's).
const ModeTraits& ModeTraitsOf(ConsistencyConfig::Mode mode);

// Every mode, in the enum's order (MODE_UNSPECIFIED left out).
std::vector<ConsistencyConfig::Mode> AllModes();

// The names of the modes whose row satisfies `which`, in the enum's order, joined by ", " and
// `last` before the last: "SYNC, ASYNC, SSP and SOFTSYNC".
std::string ModeNames(const std::function<bool(const ModeTraits&)>& which,
                      const std::string& last);

}  // namespace ps

#endif  // PS_COMMON_JOB_CONSISTENCY_MODES_H_
