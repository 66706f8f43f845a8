// A consistency mode's rules on one ps shard (docs/ARCHITECTURE.md section 5), apart from the data
// they govern: what becomes of an admitted push (apply it now, add it to the open aggregate, apply
// the aggregate it completes, drop it or reject it, and why), the learning rate of an update, when
// a pull may proceed and what it waits for, and how the step and the workers' clocks advance.
// ShardJob (server/shard_job.h) holds the slices, values, chunk assembly, parked pulls and
// statistics, and asks its rule.
//
// One class per mode, each in a file of its own (sync_rule, async_rule, ssp_rule, softsync_rule,
// publish_rule, delayed_rule), created once from the spec by CreateConsistencyRule
// (rule_factory.h). A new mode is a new class in a file of its own and one line in
// rule_factory.cc.
//
// Not thread-safe: ShardJob calls a rule under its own lock. Rules hold no slices and start no
// threads, so their tests drive them call by call.
#ifndef PS_SERVER_CONSISTENCY_CONSISTENCY_RULE_H_
#define PS_SERVER_CONSISTENCY_CONSISTENCY_RULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/parameter.pb.h"
#include "proto/ps_service.pb.h"

namespace ps {

// A gradient in the open aggregate: who gave it and which version it was computed from.
// `repeat`: its batches were trained on this shard before (see AdmitRepeat); it counts for the
// step's completion but is not in the aggregate's sum or its mean.
struct Contribution {
  int worker = 0;
  int64_t read_version = 0;
  bool repeat = false;
};

// What a rule decided about an admitted push.
struct PushDecision {
  enum Action {
    kReject,          // Refused: `status`; counted as rejected for `reason`; changes nothing.
    kDrop,            // Accepted but not applied: counted as dropped for `reason`.
    kApply,           // Apply this gradient alone, now.
    kAccumulate,      // Added to the open aggregate, which needs more gradients.
    kApplyAggregate,  // Added to the open aggregate, which is now complete: apply its mean.
    kAssign,          // Its values replace the shard's (a model published, not a gradient).
  };
  Action action = kApply;
  std::string reason;   // kReject, kDrop: the counter's name ("stale_step", "clock", ...).
  absl::Status status;  // kReject: the error, its message without the job's prefix.

  static PushDecision Reject(std::string reason, absl::Status status);
  static PushDecision Drop(std::string reason);
  static PushDecision Of(Action action);
};

class ConsistencyRule {
 public:
  virtual ~ConsistencyRule() = default;
  ConsistencyRule(const ConsistencyRule&) = delete;
  ConsistencyRule& operator=(const ConsistencyRule&) = delete;

  // Whether pushes go to an aggregate (kAccumulate / kApplyAggregate) rather than being applied
  // one by one (kApply). Fixed for the rule's life.
  virtual bool aggregates() const { return false; }

  // Decides about a push from `header.worker()` (in range, not a duplicate) whose gradient is
  // `staleness` versions old. An aggregating rule adds an accepted push to the open aggregate.
  virtual PushDecision Admit(const PushRequestHeader& header, int64_t staleness) = 0;
  // Decides, as Admit, about a push all of whose batches the shard took before: a job's handed-out
  // batch given to another worker after its first worker's push reached this shard but not the
  // first one (docs/data_handout.md, "Limits"). It must not be trained on twice: by default the
  // push is taken for Admit's bookkeeping (SSP's clock moves on) and dropped ("batch_seen").
  // SYNC counts it for its step where the step cannot complete without it (a repeat: see
  // Contribution), SOFTSYNC drops it.
  virtual PushDecision AdmitRepeat(const PushRequestHeader& header, int64_t staleness);

  // The learning rate of the update about to be applied, from `schedule`: the schedule's position
  // is `updates_started` (updates begun before this one) unless the mode counts otherwise (SYNC:
  // its step); `staleness` is the gradient's for an update of one gradient, 0 for an aggregate.
  virtual float LearningRate(const LearningRateSchedule& schedule, int64_t updates_started,
                             int64_t staleness) const;

  // A kApply push from `header` has been applied.
  virtual void Applied(const PushRequestHeader& header) { (void)header; }

  // The open aggregate, in arrival order (empty for rules that do not aggregate).
  const std::vector<Contribution>& open_aggregate() const { return open_aggregate_; }
  // The open aggregate's contributions that are not repeats: what its mean divides by.
  int SummedContributions() const;
  // Ends the open aggregate as applied and returns it; advances the step where the mode has one.
  virtual std::vector<Contribution> TakeAggregate();

  // Marks `worker` (in range) as done with the job. Returns true when that completes the open
  // aggregate (it was waiting only for workers that have now all left): the caller applies it.
  virtual bool Leave(int worker);
  // A worker that left (or was lost) is back, a new incarnation of it, at `clock` (SSP: the
  // clock it resumes at; its pushes from then on count). The other modes only take it back.
  virtual void Rejoin(int worker, int64_t clock);
  // The job grew to `num_workers` (ShardJob::Grow): each new worker is out of it, as one that
  // left, until it joins (Rejoin). REQUIRES: num_workers >= num_workers().
  virtual void AddWorkers(int num_workers);

  // Whether a pull may be answered now, and, while it may not, what it waits for (a sentence
  // naming the workers, for the DEADLINE_EXCEEDED that ends a pull that waited too long).
  virtual bool PullReady(const PullRequest& request) const {
    (void)request;
    return true;
  }
  virtual std::string WaitReason(const PullRequest& request) const;

  // SYNC: steps applied; 0 in the other modes.
  virtual int64_t step() const { return 0; }
  // SSP: the clocks `worker` has completed; 0 in the other modes.
  virtual int64_t clock(int worker) const {
    (void)worker;
    return 0;
  }
  // The clock checkpoints are agreed in (ShardJob::ArmCheckpoint), on a shard at `version`:
  // SYNC the steps applied, SSP the slowest worker's clock, ALLREDUCE and LOCAL_SGD the steps of
  // the model published, else the version itself.
  virtual int64_t checkpoint_clock(int64_t version) const { return version; }
  // Whether every shard passes through the same clocks (SYNC, SSP, the ring modes' publishes),
  // so that a checkpoint armed at a clock a shard has passed cannot be taken at one point on
  // every shard (ArmCheckpoint refuses it); else each shard takes it at its own version.
  virtual bool agreed_checkpoint_clock() const { return false; }
  // How many updates old the values a pull is served are (DELAYED); 0: the latest. Fixed for
  // the rule's life.
  virtual int served_delay() const { return 0; }
  // The workers the open step waits for (SYNC); empty in the other modes.
  virtual std::vector<int> WaitingFor() const { return {}; }

  // A checkpoint's part of the rule: the workers that left and the open aggregate, and the
  // mode's own state (SYNC's step, SSP's clocks). RestoreState takes back what SaveState wrote;
  // DATA_LOSS for a state that does not fit this rule (another number of workers, say).
  virtual void SaveState(ShardCheckpointState* state) const;
  virtual absl::Status RestoreState(const ShardCheckpointState& state);

  int num_workers() const { return static_cast<int>(left_.size()); }
  bool left(int worker) const { return left_[worker]; }

 protected:
  explicit ConsistencyRule(int num_workers) : left_(num_workers, false) {}

  std::vector<bool> left_;                    // Per worker: Leave was called.
  std::vector<Contribution> open_aggregate_;  // Aggregating rules only.
};

}  // namespace ps

#endif  // PS_SERVER_CONSISTENCY_CONSISTENCY_RULE_H_
