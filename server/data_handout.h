// The training batches of a job whose data is handed out (DataSpec.sharding DYNAMIC;
// docs/data_handout.md), as the job's first shard keeps them. Batches are numbered epoch after
// epoch: batch g is batch g % batches_per_epoch of epoch g / batches_per_epoch, whose examples
// every worker finds the same way (worker/data/handed_out_reader.h). A batch goes to one worker
// at a time, whichever asks; it is used once a push carrying it is admitted here (applied, added
// to an aggregate, or dropped by the mode's rule as any gradient may be). It goes back, to be
// handed out again before any new one, when its worker leaves or restarts holding it; a worker
// that is lost (its lease ran out) keeps its batches until the new batches of their epoch run
// out, and only then are they handed to others (a slow worker that comes back in time pushes
// them itself). So each epoch's every batch is pushed exactly once, whoever computes it.
//
// Not thread-safe: ShardJob calls it under its lock.
#ifndef PS_SERVER_DATA_HANDOUT_H_
#define PS_SERVER_DATA_HANDOUT_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/checkpoint.pb.h"
#include "proto/parameter.pb.h"
#include "proto/ps_service.pb.h"

namespace ps {

class DataHandout {
 public:
  // The most batches one worker holds at once (what a NextBatches may ask for, and what a worker
  // may hold in all): a worker cannot hoard the data.
  static constexpr int kMaxHeld = 64;

  // REQUIRES: a spec ValidateParameterSpec accepts (common/job/job_schema.h), num_workers >= 1.
  DataHandout(const DataHandoutSpec& spec, int num_workers);

  // Up to `count` (at most kMaxHeld less what the worker holds already) batches for request
  // `request_id` of `worker`'s process `incarnation`, now its own: batches given back first,
  // oldest first; then new ones in order, except that before a new epoch begins (and once there
  // are no new batches) those a lost worker holds of an earlier epoch are taken from it. Empty
  // when none is left to hand out (every batch of the last epoch is used or held by a worker
  // that is not lost). A newer incarnation than the last seen here (the worker restarted) gives
  // every batch the older one held back first. A process numbers its requests 1, 2, 3, ...: a
  // repeat of its last request gets that request's answer again (a retry whose answer was
  // lost). FAILED_PRECONDITION for an older incarnation or request, or a worker that holds
  // kMaxHeld already; INVALID_ARGUMENT for a count out of range or a request id that skips.
  // REQUIRES: 0 <= worker < num_workers.
  absl::StatusOr<std::vector<int64_t>> Take(int worker, int incarnation, int64_t request_id,
                                            int count);
  // OK when `worker` holds every one of `batches` (distinct); else FAILED_PRECONDITION naming
  // the first it does not, and why it may not (given back when the worker was lost, say).
  absl::Status CheckHeld(int worker, absl::Span<const int64_t> batches) const;
  // A push carrying `batches` was admitted (applied, aggregated or dropped): they are used, and
  // the worker is no longer taken for lost. REQUIRES: CheckHeld is OK.
  void Trained(int worker, absl::Span<const int64_t> batches);
  // Whether `worker` holds batches it has not pushed and is not lost (a lost worker's batches
  // go to others already).
  bool Holds(int worker) const { return !held_[worker].empty() && !lost_[worker]; }
  // `worker` left: every batch it holds goes back.
  void GiveBackAll(int worker);
  // `worker` was lost (its lease ran out): what it holds goes to others once the new batches
  // of that epoch run out, unless it pushes them first.
  void Lost(int worker);
  // The job grew to `num_workers` (ShardJob::Grow): the new workers hold nothing yet.
  // REQUIRES: num_workers >= the workers it has.
  void AddWorkers(int num_workers);

  // Epochs whose every batch is trained on.
  int64_t epochs_completed() const;
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  DataHandoutStats Stats() const;

  // What a checkpoint keeps: the batches not trained on; those held count as given back.
  void Save(DataHandoutState* state) const;
  // Takes back what Save wrote. DATA_LOSS for a state that does not fit `spec` (a batch past
  // the last, one listed twice or out of order).
  absl::Status Restore(const DataHandoutState& state);
  // Everything, exactly (who holds what, the last request of each worker), for a replicated
  // shard's backup; CopyFrom takes it back (DATA_LOSS as Restore, or for another number of
  // workers or a batch held twice).
  void CopyTo(DataHandoutCopy* copy) const;
  absl::Status CopyFrom(const DataHandoutCopy& copy);

 private:
  // The first batch not trained on (the total when all are).
  int64_t FirstUntrained() const;

  const int64_t batches_per_epoch_;
  const int64_t epochs_;
  const int64_t total_;  // batches_per_epoch * epochs; INT64_MAX when epochs is 0.
  int64_t next_ = 0;     // Never handed out: next_ and after.
  std::set<int64_t> waiting_;                // Given back, not handed out again yet.
  // The lowest batch a lost worker holds, and that worker; nullopt when none.
  std::optional<std::pair<int64_t, int>> LowestReclaimable() const;

  // Per worker: the batches it holds, whether it is lost, its newest incarnation, and that
  // process's last request and that request's answer.
  std::vector<std::set<int64_t>> held_;
  std::vector<bool> lost_;
  std::vector<int> incarnation_;
  std::vector<int64_t> last_request_;
  std::vector<std::vector<int64_t>> last_answer_;
  int64_t given_back_ = 0;
};

}  // namespace ps

#endif  // PS_SERVER_DATA_HANDOUT_H_
