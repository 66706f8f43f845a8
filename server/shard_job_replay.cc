// ShardJob's apply log and its replay (shard_job.h: GetApplyLog, StartReplay). Recording is in
// the paths it orders (ApplyNow in shard_job.cc, Snapshot in shard_job_pull.cc); this file holds
// the replay: pushes held until their turn, parked pulls served at theirs.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/shard_job.h"

namespace ps {

ApplyLogEntry ShardJob::UpdateEntry(const PushRequestHeader& header, ApplyLogEntry::Kind kind,
                                    float learning_rate, const std::string& drop_reason) {
  ApplyLogEntry entry;
  entry.set_kind(kind);
  entry.set_worker(header.worker());
  entry.set_push_id(header.push_id());
  entry.set_clock(header.clock());
  entry.set_version(header.read_version());
  entry.set_learning_rate(learning_rate);
  entry.set_drop_reason(drop_reason);
  return entry;
}

ApplyLog ShardJob::GetApplyLog() const {
  ApplyLog log;
  absl::MutexLock order(&order_mu_);
  log.mutable_entries()->Reserve(static_cast<int>(log_.size()));
  for (const ApplyLogEntry& entry : log_) *log.add_entries() = entry;
  return log;
}

void ShardJob::StartReplay(ApplyLog log) {
  replay_.assign(log.entries().begin(), log.entries().end());
  replaying_ = true;
}

absl::StatusOr<PushResponse> ShardJob::QueueForReplay(const PushRequestHeader& header,
                                                      absl::Span<const float> gradient) {
  {
    absl::MutexLock lock(&mu_);
    absl::Status incarnation =
        AdoptIncarnationLocked(header.worker(), header.incarnation(), header.clock());
    if (!incarnation.ok()) return incarnation;
    if (header.push_id() <= last_push_id_[header.worker()]) return DuplicateLocked();
    last_push_id_[header.worker()] = header.push_id();
    HeardLocked(header.worker());
    queued_.emplace(std::make_pair(header.worker(), header.push_id()),
                    QueuedPush{header, std::vector<float>(gradient.begin(), gradient.end())});
  }
  AdvanceReplay();
  PushResponse response;
  response.set_outcome(PushResponse::QUEUED);
  absl::MutexLock lock(&mu_);
  response.set_version(version_);
  return response;
}

std::string ShardJob::ReplayWaitReasonLocked(const PullRequest& request) const {
  if (cursor_ >= replay_.size()) {
    return absl::StrCat("replay: worker ", request.worker(), " pulled after the recorded run's ",
                        replay_.size(), " events ended: the run differs from the recorded one");
  }
  const ApplyLogEntry& next = replay_[cursor_];
  return absl::StrCat("replay: worker ", request.worker(), "'s pull waits for event ", cursor_,
                      " of ", replay_.size(), ", worker ", next.worker(), "'s ",
                      next.kind() == ApplyLogEntry::PULL
                          ? std::string("pull")
                          : absl::StrCat("push ", next.push_id()),
                      ", which has not arrived");
}

void ShardJob::AdvanceReplay() {
  // One advancer at a time, in the log's order; a caller that finds it taken leaves the work
  // to the thread holding it, which looks again before it lets go.
  while (true) {
    if (!order_mu_.TryLock()) return;
    while (true) {
      std::optional<Waiter> pull;
      std::optional<QueuedPush> push;
      ApplyLogEntry entry;
      size_t event;  // The entry's index in the log.
      {
        absl::MutexLock lock(&mu_);
        if (cursor_ >= replay_.size()) break;
        event = cursor_;
        entry = replay_[cursor_];
        if (entry.kind() == ApplyLogEntry::PULL) {
          for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
            if (it->second.request.worker() == entry.worker()) {
              pull = std::move(it->second);
              waiters_.erase(it);
              break;
            }
          }
          if (!pull.has_value()) break;
        } else {
          auto it = queued_.find({entry.worker(), entry.push_id()});
          if (it == queued_.end()) break;
          push = std::move(it->second);
          queued_.erase(it);
        }
        ++cursor_;
      }
      if (pull.has_value()) {
        const absl::Duration parked = EndPark(*pull);
        PullSnapshot snapshot = ReadSnapshot(pull->request);
        if (snapshot.header.version() != entry.version()) {
          pull->done(absl::DataLossError(absl::StrCat(
              JobPrefix(spec().job_id()), "replay: worker ", entry.worker(), "'s pull (event ",
              event, ") read version ", snapshot.header.version(), " where the recorded run "
              "read ", entry.version(), ": the run differs from the recorded one")));
          continue;
        }
        snapshot.header.set_parked_us(absl::ToInt64Microseconds(parked));
        if (recording()) log_.push_back(entry);
        pull->done(std::move(snapshot));
        continue;
      }
      if (entry.kind() == ApplyLogEntry::DROP) {
        absl::MutexLock lock(&mu_);
        ++dropped_[entry.drop_reason()];
        if (recording()) log_.push_back(entry);
        continue;
      }
      // APPLY, at the recorded rate; the gradient was computed from the version it read.
      ApplyUpdate(entry.learning_rate(), push->header, push->gradient);
      std::vector<ArmedCheckpoint> due;
      {
        absl::MutexLock lock(&mu_);
        ++updates_started_;
        CountAppliedLocked(entry.worker(), version_ - push->header.read_version());
        steps_pushed_[entry.worker()] =
            std::max(steps_pushed_[entry.worker()], push->header.clock() + 1);
        due = TakeDueLocked();
      }
      if (recording()) log_.push_back(entry);
      for (ArmedCheckpoint& armed : due) TakeCheckpoint(std::move(armed));
    }
    order_mu_.Unlock();  // Taken by the TryLock above (clang's analysis checks the pair).
    // What came in while this thread held the order found it taken: look again.
    bool more;
    {
      absl::MutexLock lock(&mu_);
      more = NextReplayEventHereLocked();
    }
    if (!more) return;
  }
}

bool ShardJob::NextReplayEventHereLocked() const {
  if (cursor_ >= replay_.size()) return false;
  const ApplyLogEntry& next = replay_[cursor_];
  if (next.kind() != ApplyLogEntry::PULL) {
    return queued_.count({next.worker(), next.push_id()}) > 0;
  }
  for (const auto& [id, waiter] : waiters_) {
    if (waiter.request.worker() == next.worker()) return true;
  }
  return false;
}

}  // namespace ps
