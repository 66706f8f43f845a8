// ShardReplicator's live move of a shard without replicas to another ps (shard_replicator.h,
// docs/replication.md "A live move to another ps"): the changes applied ahead of the new ps,
// where the shard went, whether a hand-over whose answer was lost landed, and the move's end.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/job/job_schema.h"
#include "glog/logging.h"
#include "server/replica_input.h"
#include "server/shard_replicator.h"

namespace ps {

std::optional<absl::StatusOr<ReplicaOutcome>> ShardReplicator::SubmitToMove(
    ReplicaInput input, Done done, std::optional<ShardJob::ReadyPush> push) {
  const int64_t bytes = static_cast<int64_t>(input.ByteSizeLong());
  auto pending = std::make_shared<Pending>();
  // Numbered and queued under mu_, in order with a hand-back queued meanwhile, for the new ps
  // (or, once the move ended, to be dropped). Waits (nullopt, `done` answers it) where it may
  // not go ahead; else `ahead`, to be applied now.
  auto queue = [&](bool may_go_ahead) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
      -> std::optional<absl::StatusOr<ReplicaOutcome>> {
    if (stopping_) {
      return absl::StatusOr<ReplicaOutcome>(absl::UnavailableError(
          absl::StrCat(JobPrefix(job_->spec().job_id()), "the shard is stopping")));
    }
    if (!fenced_.ok()) return absl::StatusOr<ReplicaOutcome>(fenced_);  // Handing over, gone.
    input.set_seq(++submitted_);
    pending->input = std::move(input);
    if (!may_go_ahead || snapshotting_ || waiting_ > 0 ||
        (ahead_bytes_ > 0 && ahead_bytes_ + bytes > move_ahead_bytes_)) {
      // Far enough ahead of the new ps, behind inputs that wait, or during the snapshot:
      // applied once the new ps holds it, as a replica's, and answered then (the submitter
      // waits; its thread does not).
      pending->push = std::move(push);
      pending->done = std::move(done);
      pending_.push_back(pending);
      ++waiting_;
      return std::nullopt;
    }
    pending->done = [](absl::StatusOr<ReplicaOutcome>) {};  // Its caller answers.
    pending->applied_ahead = true;
    pending->bytes = bytes;
    pending_.push_back(pending);
    ahead_bytes_ += bytes;
    return absl::StatusOr<ReplicaOutcome>(ReplicaOutcome());  // Ahead: applied below.
  };
  {
    // A thread never waits for the snapshot (seconds for a big shard) nor for the new ps.
    absl::MutexLock lock(&mu_);
    if (snapshotting_ || waiting_ > 0 || stopping_ || !fenced_.ok()) {
      return queue(/*may_go_ahead=*/false);  // Waits, or refused.
    }
  }
  // Only another input's application holds this (or, rarely, a snapshot begun just now).
  absl::MutexLock apply(&apply_mu_);
  {
    absl::MutexLock lock(&mu_);
    std::optional<absl::StatusOr<ReplicaOutcome>> queued = queue(/*may_go_ahead=*/true);
    if (!queued.has_value() || !queued->ok()) return queued;  // Waits, or refused.
  }
  absl::StatusOr<ReplicaOutcome> result =
      ApplyReplicaInput(*job_, pending->input, push.has_value() ? &*push : nullptr);
  absl::MutexLock lock(&mu_);
  pending->outcome = result;
  return result;
}

int64_t ShardReplicator::MovedAtVersion() const {
  absl::MutexLock lock(&mu_);
  return moved_at_version_;
}

std::optional<int> ShardReplicator::MovedTo() const {
  absl::MutexLock lock(&mu_);
  if (!moving() || !handed_back_) return std::nullopt;
  return options_.move_to;
}

bool ShardReplicator::MoveMayHaveLanded() const {
  // The copy there goes when its stream's end is handled, which a ps that answers does soon.
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (absl::Now() < until) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(500)));
    ListJobsResponse listed;
    if (stub_->ListJobs(&context, ListJobsRequest(), &listed).ok()) {
      const std::optional<bool> landed =
          Landed(listed, job_->spec().job_id(), job_->ps_index(), job_->Stats().version(),
                 /*home=*/options_.move_to == job_->ps_index());
      if (landed.has_value()) return *landed;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return true;  // Out of reach: it may serve the shard, so this copy must not.
}

std::optional<bool> ShardReplicator::Landed(const ListJobsResponse& listed,
                                            const std::string& job_id, int shard,
                                            int64_t version, bool home) {
  bool left_copy = false;
  for (const ListJobsResponse::ShardCopy& copy : listed.copies()) {
    if (copy.job_id() != job_id || copy.shard() != shard) continue;
    if (copy.serving()) return true;
    if (copy.incoming()) return std::nullopt;  // Its stream's end not handled there yet.
    left_copy = true;  // One that moved on from there (its record is listed too).
  }
  for (const ListJobsResponse::MovedShard& moved : listed.moved()) {
    if (moved.job_id() != job_id || moved.shard() != shard) continue;
    // Moved on from there after updates this copy never saw: it landed there first. At this
    // copy's version it may be either (no update since): ask again. Before it: the record of
    // an earlier move away, and the stream ended there without the hand-back.
    if (moved.version() > version) return true;
    if (moved.version() == version) return std::nullopt;
    return false;
  }
  if (left_copy) return std::nullopt;
  // Home: its own again (or the job is gone from there: then no copy serves it anywhere).
  // Away: its copy is gone, the stream ended there without the hand-back.
  return home && std::find(listed.job_ids().begin(), listed.job_ids().end(), job_id) !=
                     listed.job_ids().end();
}

void ShardReplicator::EndMove(const absl::Status& outcome) {
  {
    absl::MutexLock lock(&mu_);
    if (std::exchange(move_ended_, true)) return;
    if (!outcome.ok()) stats_.set_last_error(std::string(outcome.message()));
  }
  if (!outcome.ok()) LOG(WARNING) << outcome.message();
  options_.on_move_end(outcome);
}

}  // namespace ps
