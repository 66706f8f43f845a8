#include "ctl/job/checkpoint_coordinator.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_store.h"
#include "common/job/consistency_modes.h"

namespace ps {

CheckpointCoordinator::CheckpointCoordinator(const ClusterClient& client, const JobSpec& spec,
                                             std::ostream* out, Clock* clock)
    : client_(client), spec_(spec), out_(*out), clock_(clock) {}

bool CheckpointCoordinator::enabled() const {
  return spec_.checkpoint().every_steps() > 0 || spec_.checkpoint().every_seconds() > 0;
}

bool CheckpointCoordinator::agreed_step() const {
  const CheckpointPolicy policy = ModeTraitsOf(spec_.consistency().mode()).checkpoints;
  return policy == CheckpointPolicy::kAgreedStep || policy == CheckpointPolicy::kPublishedStep;
}

absl::Status CheckpointCoordinator::CheckDirectories() const {
  ListCheckpointsRequest request;
  request.set_job_id(spec_.job_id());
  for (int ps = 0; ps < client_.num_ps(); ++ps) {
    absl::Status status = client_.ListCheckpoints(ps, request).status();
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("the job asks for checkpoints, but ", status.message()));
    }
  }
  return absl::OkStatus();
}

bool CheckpointCoordinator::ReadShards(std::vector<JobStats>* shards) const {
  shards->clear();
  for (int ps = 0; ps < client_.num_ps(); ++ps) {
    absl::StatusOr<JobStats> stats =
        client_.GetShardStats(ps, spec_.job_id(), spec_.replicas() > 1);
    if (!stats.ok()) return false;  // The job's own loop reports a ps that is gone.
    shards->push_back(*std::move(stats));
  }
  return true;
}

int64_t CheckpointCoordinator::SettleArmed(const std::vector<JobStats>& shards) {
  armed_.erase(std::remove_if(armed_.begin(), armed_.end(),
                              [&](const Armed& armed) { return Settle(armed, shards); }),
               armed_.end());
  int64_t furthest = 0;
  for (const JobStats& shard : shards) furthest = std::max(furthest, shard.checkpoint_clock());
  return furthest;
}

void CheckpointCoordinator::Finish(bool final, absl::Duration timeout) {
  if (!enabled()) return;
  const absl::Time deadline = clock_->Now() + timeout;
  std::vector<JobStats> shards;
  SettleBy(deadline, &shards);
  const bool taken_one = next_seq_ > 1;
  if (final && (taken_one || !final_only_after_one_) && !shards.empty() && !LatestIsOf(shards) &&
      EveryShardAtHome(shards)) {
    Arm(-1);
    SettleBy(deadline, &shards);
  }
  for (const Armed& armed : armed_) {
    Abandon(armed, absl::StrCat("not written by every shard within ", absl::FormatDuration(timeout),
                                " of the job's end"));
  }
  armed_.clear();
}

void CheckpointCoordinator::SettleBy(absl::Time deadline, std::vector<JobStats>* shards) {
  while (ReadShards(shards)) {
    int64_t nearest = std::numeric_limits<int64_t>::max();  // The shards' least clock.
    for (const JobStats& shard : *shards) nearest = std::min(nearest, shard.checkpoint_clock());
    SettleArmed(*shards);
    if (!EveryShardAtHome(*shards)) return;  // Abandons what is armed: nothing more completes.
    // Armed at a clock some shard never reached: never taken everywhere.
    armed_.erase(std::remove_if(armed_.begin(), armed_.end(),
                                [nearest](const Armed& armed) {
                                  return armed.at_clock >= 0 && armed.at_clock > nearest;
                                }),
                 armed_.end());
    if (armed_.empty() || clock_->Now() >= deadline) return;
    clock_->SleepFor(absl::Milliseconds(50));
  }
  shards->clear();
}

bool CheckpointCoordinator::LatestIsOf(const std::vector<JobStats>& shards) const {
  if (!last_complete_ || last_complete_->shards_size() != static_cast<int>(shards.size())) {
    return false;
  }
  for (size_t i = 0; i < shards.size(); ++i) {
    if (last_complete_->shards(static_cast<int>(i)).version() != shards[i].version()) return false;
  }
  return true;
}

void CheckpointCoordinator::Poll(absl::Time now) {
  if (!enabled()) return;
  if (last_timed_ == absl::InfinitePast()) last_timed_ = now;  // The job's start.
  std::vector<JobStats> shards;
  if (!ReadShards(&shards)) return;
  const int64_t furthest = SettleArmed(shards);
  if (!EveryShardAtHome(shards)) return;
  const CheckpointSpec& every = spec_.checkpoint();
  if (every.every_steps() > 0 && last_step_clock_ <= furthest) {
    // Armed ahead: every shard takes it when it gets there.
    last_step_clock_ = (furthest / every.every_steps() + 1) * every.every_steps();
    Arm(last_step_clock_);
  }
  // Not again while the shards have not moved (a SYNC barrier waiting for a lost worker).
  if (every.every_seconds() > 0 && now - last_timed_ >= absl::Seconds(every.every_seconds()) &&
      furthest > last_timed_clock_) {
    last_timed_ = now;
    last_timed_clock_ = furthest;
    // SYNC and SSP: a step no shard has reached (they are at most one step apart in SYNC);
    // the others: each shard now, at its own version.
    Arm(agreed_step() ? furthest + 2 : -1);
  }
}

bool CheckpointCoordinator::EveryShardAtHome(const std::vector<JobStats>& shards) {
  for (size_t shard = 0; shard < shards.size(); ++shard) {
    // A moved copy is named as moved even where its ps also reports a replicator.
    const bool moved = shards[shard].moved_in();
    const bool taken_over = !moved && shards[shard].replication().took_over();
    if (!taken_over && !moved) continue;
    if (!paused_) {
      paused_ = true;
      const std::string line = absl::StrCat(
          "checkpoints paused: shard ", shard,
          taken_over ? " is served by a copy that took it over (its ps was taken for gone)"
                     : " was moved to another ps (psctl move-shard)",
          ", and each shard's checkpoint is written by the shard's own ps; ",
          last_complete_.has_value()
              ? absl::StrCat("checkpoint ", last_complete_->name(), " (step ",
                             last_complete_->resume_step(), ") stays the job's fallback")
              : std::string("the job has no checkpoint to fall back to"));
      out_ << line << "\n";
      if (results_ != nullptr) {
        results_->RecordEvent(
            {"checkpoints_paused", absl::StrCat("ps:", shard), -1, "", -1, line});
      }
      // The copy that took the shard over was never armed: none of these can complete.
      for (const Armed& armed : armed_) {
        Abandon(armed, absl::StrCat("shard ", shard, " was taken over before it wrote it"));
      }
      armed_.clear();
    }
    return false;
  }
  if (paused_) {
    paused_ = false;
    const std::string line =
        "checkpoints resumed: every shard is served by its own ps again (the copies that took "
        "shards over handed them back; moved shards came home)";
    out_ << line << "\n";
    if (results_ != nullptr) results_->RecordEvent({"checkpoints_resumed", "", -1, "", -1, line});
  }
  return true;
}

void CheckpointCoordinator::Arm(int64_t at_clock) {
  ArmCheckpointRequest request;
  request.set_job_id(spec_.job_id());
  request.set_run_id(spec_.run_id());
  request.set_seq(next_seq_++);
  request.set_at_clock(at_clock);
  const Armed armed{request.seq(), at_clock};
  for (int ps = 0; ps < client_.num_ps(); ++ps) {
    absl::Status status = client_.ArmCheckpoint(ps, request);
    if (!status.ok()) {
      // The shards armed before it take theirs; without a manifest it is never complete.
      Abandon(armed, std::string(status.message()));
      return;
    }
  }
  armed_.push_back(armed);
}

bool CheckpointCoordinator::Settle(const Armed& armed, const std::vector<JobStats>& shards) {
  std::vector<ShardCheckpoint> entries;
  for (const JobStats& shard : shards) {
    for (const ShardCheckpoint& entry : shard.checkpoints()) {
      if (entry.seq() != armed.seq) continue;
      if (!entry.error().empty()) {
        Abandon(armed, entry.error());
        return true;
      }
      entries.push_back(entry);
    }
  }
  if (entries.size() < shards.size()) return false;  // Not every shard has written it yet.
  if (agreed_step()) {
    for (const ShardCheckpoint& entry : entries) {
      if (entry.clock() != entries[0].clock()) {
        Abandon(armed, absl::StrCat("ps:", entry.ps_index(), " took it at step ", entry.clock(),
                                    ", ps:", entries[0].ps_index(), " at ", entries[0].clock()));
        return true;
      }
    }
  }
  Complete(armed, entries, shards[0].spec());
  return true;
}

void CheckpointCoordinator::Complete(const Armed& armed,
                                     const std::vector<ShardCheckpoint>& entries,
                                     const ParameterSpec& parameters) {
  CheckpointManifest manifest;
  manifest.set_job_id(spec_.job_id());
  manifest.set_run_id(spec_.run_id());
  manifest.set_seq(armed.seq);
  // The shards name the checkpoint's directory: "<name>/shard-<i>-of-<n>.ckpt".
  manifest.set_name(entries[0].file().substr(0, entries[0].file().find('/')));
  manifest.set_mode(spec_.consistency().mode());
  manifest.set_num_ps(client_.num_ps());
  int64_t min_steps = entries[0].min_steps_pushed();
  for (const ShardCheckpoint& entry : entries) {
    *manifest.add_shards() = entry;
    min_steps = std::min(min_steps, entry.min_steps_pushed());
  }
  // ASYNC, SOFTSYNC: every worker in the job's count had pushed at least min_steps steps to
  // every shard, and each worker its own count (the fewest to any shard). A growth reaches the
  // shards in turn: the workers every shard lists (a worker the others lack resumes at the
  // resume step: WorkerResumeSteps).
  manifest.set_resume_step(agreed_step() ? entries[0].clock() : min_steps);
  int workers = entries[0].steps_pushed_size();
  for (const ShardCheckpoint& entry : entries) workers = std::min(workers, entry.steps_pushed_size());
  for (int w = 0; w < workers; ++w) {
    int64_t steps = manifest.resume_step();
    if (!agreed_step()) {
      steps = entries[0].steps_pushed(w);
      for (const ShardCheckpoint& entry : entries) steps = std::min(steps, entry.steps_pushed(w));
      // A worker the job grew by that has not joined pushed nothing; it is not in the resume
      // step's count (min_steps_pushed) and resumes there, as the others' slowest.
      steps = std::max(steps, manifest.resume_step());
    }
    manifest.add_worker_resume_steps(steps);
  }
  *manifest.mutable_job() = spec_;
  manifest.set_written_at_ms(absl::ToUnixMillis(clock_->Now()));
  *manifest.mutable_parameters() = parameters;
  CommitCheckpointRequest request;
  *request.mutable_manifest() = manifest;
  request.set_keep(spec_.checkpoint().keep());
  for (int ps = 0; ps < client_.num_ps(); ++ps) {
    absl::Status status = client_.CommitCheckpoint(ps, request);
    if (!status.ok()) {
      Abandon(armed, absl::StrCat("its manifest could not be written: ", status.message()));
      return;
    }
  }
  const std::string line = absl::StrCat("checkpoint ", armed.seq, " complete: ", manifest.name(),
                                        ", resumes at step ", manifest.resume_step());
  out_ << line << "\n";
  if (results_ != nullptr) {
    results_->RecordEvent(
        {"checkpoint_complete", "", manifest.resume_step(), manifest.name(), -1, line});
  }
  last_complete_ = std::move(manifest);
}

void CheckpointCoordinator::Abandon(const Armed& armed, const std::string& why) {
  ++failed_;
  const std::string line =
      absl::StrCat("checkpoint ", armed.seq, " abandoned (training goes on): ", why);
  out_ << line << "\n";
  // Named, for a recovery that finds it complete after all: a ps that wrote the manifest and
  // died before answering leaves it on every disk.
  if (results_ != nullptr) {
    results_->RecordEvent({"checkpoint_abandoned", "", -1,
                           CheckpointStore::CheckpointName(spec_.run_id(), armed.seq), -1, line});
  }
}

}  // namespace ps
