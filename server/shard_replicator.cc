#include "server/shard_replicator.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/job/job_schema.h"
#include "glog/logging.h"
#include "common/net/grpc_status.h"
#include "server/replica_input.h"

namespace ps {

namespace {

// The state of `channel` once a connection attempt begun now has settled (READY, or
// TRANSIENT_FAILURE: refused, unreachable, or a failed TLS handshake), or as it is at `deadline`.
grpc_connectivity_state SettledState(grpc::Channel& channel, absl::Time deadline) {
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY && state != GRPC_CHANNEL_TRANSIENT_FAILURE &&
         channel.WaitForStateChange(state, absl::ToChronoTime(deadline))) {
    state = channel.GetState(/*try_to_connect=*/true);
  }
  return state;
}

}  // namespace

ShardReplicator::ShardReplicator(std::shared_ptr<ShardJob> job, ShardReplicatorOptions options)
    : job_(std::move(job)),
      options_(std::move(options)),
      stub_(ParameterServer::NewStub(options_.channel)),
      move_ahead_bytes_(options_.move_ahead_bytes > 0 ? options_.move_ahead_bytes
                                                      : kMoveAheadBytes) {
  stats_.set_backup(options_.backup_name);
  stats_.set_state(ReplicationStats::CONNECTING);
  thread_ = std::thread([this] { Run(); });
}

ShardReplicator::~ShardReplicator() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (open_context_ != nullptr) open_context_->TryCancel();
  }
  thread_.join();
  std::deque<std::shared_ptr<Pending>> left;
  bool stays_here;  // A move that ended with the shard here: what waits is applied here.
  {
    absl::MutexLock lock(&mu_);
    left.swap(pending_);
    stays_here = moving() && move_ended_ && !handed_back_;
  }
  if (moving()) {
    EndMove(absl::UnavailableError(absl::StrCat(
        JobPrefix(job_->spec().job_id()), "the ps stopped (or the job was deleted) before shard ",
        job_->ps_index(), " moved to ", options_.backup_name)));
  }
  for (const std::shared_ptr<Pending>& pending : left) {
    if (pending->applied_ahead) continue;  // Applied and answered.
    if (stays_here && !pending->input.has_hand_back()) {
      // In their order, before the shard changes directly again (ParameterService::MoveEnded
      // holds its changes back meanwhile): a lost worker's input has no one to retry it.
      pending->done(ApplyReplicaInput(*job_, pending->input,
                                      pending->push.has_value() ? &*pending->push : nullptr));
      continue;
    }
    pending->done(absl::UnavailableError(
        absl::StrCat(JobPrefix(job_->spec().job_id()),
                     "the shard stopped (job deleted or ps stopping) before the update was applied")));
  }
}

std::optional<absl::StatusOr<ReplicaOutcome>> ShardReplicator::Submit(
    ReplicaInput input, Done done, std::optional<ShardJob::ReadyPush> push) {
  if (moving()) return SubmitToMove(std::move(input), std::move(done), std::move(push));
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    refused = fenced_;
    if (!stopping_ && refused.ok()) {
      input.set_seq(++submitted_);
      pending_.push_back(std::make_shared<Pending>(
          Pending{std::move(input), std::move(push), std::move(done)}));
      return std::nullopt;
    }
  }
  if (refused.ok()) {
    refused = absl::UnavailableError(
        absl::StrCat(JobPrefix(job_->spec().job_id()), "the shard is stopping"));
  }
  done(refused);
  return std::nullopt;
}

absl::Status ShardReplicator::Fenced() const {
  absl::MutexLock lock(&mu_);
  return fenced_;
}

bool ShardReplicator::HandedBack() const {
  absl::MutexLock lock(&mu_);
  return handed_back_;
}

bool ShardReplicator::HandingBack() const {
  absl::MutexLock lock(&mu_);
  return handing_back_;
}

ShardReplicator::HomeAfterHandBack ShardReplicator::AskHomeAfterHandBack(
    absl::Duration within, absl::Duration wait) const {
  using Steady = std::chrono::steady_clock;
  Steady::time_point at;  // When the hand-back was queued, on a clock no one sets.
  {
    absl::MutexLock lock(&mu_);
    if (!handed_back_) return HomeAfterHandBack::kUnknown;
    at = hand_back_queued_at_;
  }
  const Steady::duration window = absl::ToChronoNanoseconds(within);
  if (Steady::now() - at < window &&
      SettledState(*options_.channel, absl::Now() + absl::Milliseconds(100)) ==
          GRPC_CHANNEL_TRANSIENT_FAILURE) {
    return HomeAfterHandBack::kGoneInTime;
  }
  if (asking_home_.exchange(true, std::memory_order_acq_rel)) return HomeAfterHandBack::kUnknown;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + wait));
  ListJobsResponse listed;
  const grpc::Status answered = stub_->ListJobs(&context, ListJobsRequest(), &listed);
  const Steady::time_point now = Steady::now();
  asking_home_.store(false, std::memory_order_release);
  // A ps that does not say how long it has run (0: an older one) cannot be judged.
  if (!answered.ok() || listed.uptime_ms() <= 0) return HomeAfterHandBack::kUnknown;
  const std::string& job_id = job_->spec().job_id();
  for (const std::string& held : listed.job_ids()) {
    if (held == job_id) return HomeAfterHandBack::kUnknown;  // It serves the shard.
  }
  for (const ListJobsResponse::ShardCopy& copy : listed.copies()) {
    // It holds the copy this one installed there and may serve it (a worker's call takes it
    // over once this copy's stream is gone, the hand-back unread): it is not empty.
    if (copy.job_id() == job_id && copy.shard() == job_->ps_index()) {
      return HomeAfterHandBack::kUnknown;
    }
  }
  // This start of it began no later than `started` (the answer left it before `now`); the one
  // that took the shard back ended before that.
  const Steady::time_point started = now - std::chrono::milliseconds(listed.uptime_ms());
  return started - at < window ? HomeAfterHandBack::kGoneInTime
                               : HomeAfterHandBack::kStartedAgainTooLate;
}

bool ShardReplicator::Superseded() const {
  absl::MutexLock lock(&mu_);
  return stats_.state() == ReplicationStats::FENCED || handed_back_;
}

bool ShardReplicator::Superseding() const {
  absl::MutexLock lock(&mu_);
  return options_.superseding && stats_.installs() == 0;
}

void ShardReplicator::QueueHandBackLocked() {
  handing_back_ = true;
  hand_back_sent_ = false;
  hand_back_queued_at_ = std::chrono::steady_clock::now();
  fenced_ = absl::UnavailableError(
      moving() ? absl::StrCat(JobPrefix(job_->spec().job_id()), "shard ", job_->ps_index(),
                              " is moving to ", options_.backup_name, ": retry in a moment")
               : absl::StrCat(JobPrefix(job_->spec().job_id()), "shard ", job_->ps_index(),
                              " is going back to its own ps, ", options_.backup_name,
                              "; a replicated job's worker retries there"));
  ReplicaInput input;
  input.mutable_hand_back();
  input.set_seq(++submitted_);
  pending_.push_back(std::make_shared<Pending>(
      Pending{std::move(input), std::nullopt, [](absl::StatusOr<ReplicaOutcome>) {}}));
}

void ShardReplicator::FinishHandBack(const ReplicaAck* ack) {
  const std::string prefix = JobPrefix(job_->spec().job_id());
  const bool refused_there = ack != nullptr && ack->code() != 0;
  bool sent;
  {
    absl::MutexLock lock(&mu_);
    sent = hand_back_sent_;
  }
  // A move's hand-back sent and unanswered: the new ps is asked whether it took the shard.
  const bool unlanded = moving() && ack == nullptr && sent && !MoveMayHaveLanded();
  bool stays;  // Here: refused, or unanswered and never sent (the own ps cannot have it).
  absl::Status gone;
  {
    absl::MutexLock lock(&mu_);
    stays = refused_there || (ack == nullptr && !hand_back_sent_) || unlanded;
    // Handing back until HANDED_BACK below (an install seeing neither would be fenced off).
    if (stays) handing_back_ = false;
    if (stays) {
      fenced_ = absl::OkStatus();
      hand_back_refused_ = refused_there;
    } else {
      // Acknowledged; or sent and unanswered (the stream broke, the own ps is out of reach): it
      // may have taken the shard, so this copy stops serving either way (ParameterService's
      // RetakeFromGonePs serves it again here if that ps turns out gone right away).
      if (moving()) {
        fenced_ = WithShardMovedTo(
            absl::UnavailableError(absl::StrCat(
                prefix, "shard ", job_->ps_index(), " moved to ", options_.backup_name,
                ack == nullptr ? " (the answer to its hand-over was lost)" : "",
                ", which serves it now: its calls go there")),
            options_.move_to);
      } else {
        fenced_ = absl::UnavailableError(absl::StrCat(
            prefix, "shard ", job_->ps_index(), " went back to its own ps, ",
            options_.backup_name, ack == nullptr ? " (its answer was lost)" : "",
            ", which serves it now; a replicated job's worker retries there"));
      }
      gone = fenced_;
    }
  }
  if (stays && moving()) {
    EndMove(absl::FailedPreconditionError(absl::StrCat(
        prefix, "shard ", job_->ps_index(), " stays on this ps: ", options_.backup_name, " ",
        refused_there ? absl::StrCat("refused the hand-over: ", ack->message())
        : unlanded    ? std::string("did not take the hand-over before its stream ended")
                      : std::string("went out of reach before the hand-over was sent"))));
    return;
  }
  if (stays) {
    LOG(WARNING) << prefix << "shard " << job_->ps_index() << " did not go back to "
                 << options_.backup_name << " ("
                 << (refused_there ? ack->message()
                                   : std::string("out of reach before the hand-back was sent"))
                 << "): it is served here still, and is handed back after a new install there";
    return;
  }
  // Pulls parked here (a barrier, a bound) are answered there; closed before HandedBack says
  // so, which a retake (RetakeFromGonePs, then ShardJob::Reopen) waits for.
  job_->CancelAllWaiters(gone);
  const int64_t version = job_->Stats().version();  // No change after the hand-back.
  {
    absl::MutexLock lock(&mu_);
    handed_back_ = true;
    handing_back_ = false;
    moved_at_version_ = version;
    stats_.set_state(ReplicationStats::HANDED_BACK);
    if (ack != nullptr) stats_.set_inputs_replicated(stats_.inputs_replicated() + 1);
  }
  LOG(INFO) << prefix << "shard " << job_->ps_index()
            << (moving() ? " moved to " : " went back to its own ps, ") << options_.backup_name
            << (ack == nullptr ? " (unanswered: that ps went out of reach)" : "")
            << ", which serves it now";
  if (moving()) EndMove(absl::OkStatus());
}

void ShardReplicator::ServeAlone() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !pending_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_ || handed_back_) return;
    }
    ApplyOldest(nullptr);
  }
}

void ShardReplicator::Fence(const absl::Status& why) {
  std::deque<std::shared_ptr<Pending>> left;
  {
    absl::MutexLock lock(&mu_);
    handing_back_ = false;
    fenced_ = absl::UnavailableError(absl::StrCat(
        JobPrefix(job_->spec().job_id()), "shard ", job_->ps_index(), " moved to ",
        options_.backup_name, ", which took it over (", why.message(),
        "); a replicated job's worker retries there"));
    stats_.set_state(ReplicationStats::FENCED);
    stats_.set_last_error(std::string(why.message()));
    left.swap(pending_);
  }
  LOG(WARNING) << JobPrefix(job_->spec().job_id()) << "shard " << job_->ps_index()
               << " is fenced off here: " << options_.backup_name << " took it over";
  for (const std::shared_ptr<Pending>& pending : left) pending->done(Fenced());
  // Pulls parked here (a barrier, a bound) would never be released: they go to the other copy.
  job_->CancelAllWaiters(Fenced());
}

ReplicationStats ShardReplicator::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void ShardReplicator::SetState(ReplicationStats::State state, const std::string& error) {
  absl::MutexLock lock(&mu_);
  stats_.set_state(state);
  if (!error.empty()) stats_.set_last_error(error);
}

void ShardReplicator::Run() {
  const std::string prefix = JobPrefix(job_->spec().job_id());
  // Until the first stream opens; a backup found gone has been out of reach long enough.
  absl::Time unreachable_since = absl::Now();
  if (options_.backup_found_gone) unreachable_since -= options_.unreachable_after;
  while (true) {
    grpc::ClientContext context;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      open_context_ = &context;
    }
    std::unique_ptr<Stream> stream;
    bool refused = false;
    const absl::Status opened = Open(&context, &stream, &refused);
    if (opened.ok()) {
      uint64_t generation;
      {
        absl::MutexLock lock(&mu_);
        generation = ++generation_;
        next_to_send_ = applied_ + 1;
        compared_ = applied_;  // The install holds them.
        repair_ = false;
        stats_.set_installs(stats_.installs() + 1);
        stats_.set_state(ReplicationStats::REPLICATING);
        // Installed on the shard's own ps, with every input before it to follow: the shard goes
        // home after them.
        if (moving()) {
          move_installed_at_ = absl::Now();
          if (!handing_back_ && pending_.empty()) QueueHandBackLocked();
        } else if (options_.hand_back && !handing_back_) {
          QueueHandBackLocked();
        }
      }
      LOG(INFO) << prefix << "shard " << job_->ps_index() << " is replicated on "
                << options_.backup_name
                << (moving()             ? ", where it moves"
                    : options_.hand_back ? ", its own ps, and goes back there"
                                         : "");
      std::thread sender([&] { Send(stream.get(), &context, generation); });
      std::string broke = "the backup closed the stream";
      ReplicaAck ack;
      while (stream->Read(&ack)) {
        {
          absl::MutexLock lock(&mu_);
          if (pending_.empty() || ack.seq() != applied_ + 1 || ack.seq() >= next_to_send_) {
            broke = absl::StrCat("the backup acknowledged input ", ack.seq(), " where ",
                                 applied_ + 1, " was next");
            break;
          }
        }
        ApplyOldest(&ack);
        absl::MutexLock lock(&mu_);
        // A move hands the shard over once caught up (or after kMoveCatchUp, refusing new
        // inputs from then on so that it gets there).
        if (moving() && !handing_back_ && !handed_back_ && !hand_back_refused_ && !repair_ &&
            (pending_.empty() || absl::Now() - move_installed_at_ > kMoveCatchUp)) {
          QueueHandBackLocked();
        }
        if (repair_) {
          broke = "the backup's outcome differed: installing it anew";
          break;
        }
        if (handed_back_) break;
        if (hand_back_refused_) {
          broke = "the own ps refused the hand-back: it is tried again with a new install";
          break;
        }
      }
      context.TryCancel();
      {
        absl::MutexLock lock(&mu_);
        ++generation_;  // Stops the sender.
      }
      sender.join();
      const grpc::Status finished = stream->Finish();
      if (!finished.ok() && finished.error_code() != grpc::StatusCode::CANCELLED) {
        broke = finished.error_message();
      }
      {
        absl::MutexLock lock(&mu_);
        open_context_ = nullptr;
        if (stopping_ || handed_back_) return;
      }
      if (moving()) {
        // The inputs not acknowledged are applied here, in order; a hand-back among them was
        // either never sent (the shard stays) or may have arrived (it went: FinishHandBack).
        // None queued yet (still catching up): the shard stays.
        LOG(WARNING) << prefix << "the stream moving shard " << job_->ps_index() << " to "
                     << options_.backup_name << " ended (" << broke << ")";
        bool queued;
        {
          absl::MutexLock lock(&mu_);
          queued = handing_back_;
        }
        if (!queued) {
          EndMove(absl::UnavailableError(absl::StrCat(
              prefix, "shard ", job_->ps_index(), " stays on this ps: the stream to ",
              options_.backup_name, " ended before the hand-over (", broke, ")")));
        }
        ServeAlone();
        return;
      }
      LOG(WARNING) << prefix << "the replication stream of shard " << job_->ps_index() << " to "
                   << options_.backup_name << " broke (" << broke
                   << "); updates wait while it reopens";
      SetState(ReplicationStats::CONNECTING, broke);
      {
        absl::MutexLock lock(&mu_);
        if (std::exchange(hand_back_refused_, false)) {  // Not at once: each try is an install.
          mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.retry_interval);
          if (stopping_) return;
        }
      }
      unreachable_since = absl::Now();
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      open_context_ = nullptr;
      if (stopping_) return;
    }
    if (moving()) {
      // A ps that may be a moment away is waited for, as for a backup; then the move ends.
      if (!refused && absl::IsUnavailable(opened) &&
          absl::Now() - unreachable_since < options_.unreachable_after) {
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(100));
        continue;
      }
      EndMove(absl::Status(opened.code(),
                           absl::StrCat(prefix, "shard ", job_->ps_index(), " stays on this ps: ",
                                        opened.message())));
      ServeAlone();
      return;
    }
    if (absl::IsAborted(opened)) {  // The backup took the shard over.
      Fence(opened);
      return;
    }
    // A backup that refused the connection is not running (or cannot be trusted): waiting for
    // it only holds the workers up. One that does not answer may be a moment away.
    if (!refused && absl::Now() - unreachable_since < options_.unreachable_after) {
      absl::MutexLock lock(&mu_);
      stats_.set_last_error(std::string(opened.message()));
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(100));
      continue;
    }
    bool newly = false;
    {
      absl::MutexLock lock(&mu_);
      newly = stats_.state() != ReplicationStats::DEGRADED;
      stats_.set_state(ReplicationStats::DEGRADED);
      stats_.set_last_error(std::string(opened.message()));
    }
    if (newly) {
      LOG(ERROR) << prefix << "the backup of shard " << job_->ps_index() << ", "
                 << options_.backup_name << ", "
                 << (refused ? std::string("could not be connected to")
                             : absl::StrCat("has been out of reach for ",
                                            absl::FormatDuration(options_.unreachable_after)))
                 << " (" << opened.message()
                 << "): the shard goes on unreplicated, and is rebuilt there once it answers";
    }
    // Alone: apply inputs as they come until it is time to try the backup again (a backup ps
    // without room for the copy, less often: each try sends the whole shard).
    const absl::Time retry_at =
        absl::Now() + (absl::IsResourceExhausted(opened) ? 10 : 1) * options_.retry_interval;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !pending_.empty();
        };
        mu_.AwaitWithDeadline(absl::Condition(&ready), retry_at);
        if (stopping_) return;
        if (pending_.empty()) break;
      }
      ApplyOldest(nullptr);
      absl::MutexLock lock(&mu_);
      if (handed_back_) return;  // Unanswered: see FinishHandBack.
    }
  }
}

absl::Status ShardReplicator::Open(grpc::ClientContext* context, std::unique_ptr<Stream>* stream,
                                   bool* refused) {
  ReplicaInput install;
  bool degraded;
  {
    absl::MutexLock lock(&mu_);
    install.set_seq(applied_);  // Only this thread applies inputs (but a move's: see below).
    degraded = stats_.state() == ReplicationStats::DEGRADED;
  }
  // Not connected: no snapshot taken, and at most 200 ms of wait for a host that does not answer
  // (while DEGRADED none at all: inputs are applied on this thread meanwhile); none for one that
  // refused the connection.
  const absl::Time deadline = absl::Now() + (degraded ? absl::ZeroDuration()
                                                      : absl::Milliseconds(200));
  const grpc_connectivity_state state = SettledState(*options_.channel, deadline);
  if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    *refused = true;
    return absl::UnavailableError(
        absl::StrCat("connecting to ", options_.backup_name,
                     " failed: refused (its ps is not running), unreachable, or the TLS "
                     "handshake failed"));
  }
  if (state != GRPC_CHANNEL_READY) {
    return absl::UnavailableError(
        absl::StrCat(options_.backup_name, " does not answer (is its host up?)"));
  }
  if (moving()) {
    // Inputs are applied as they come (SubmitToMove): the snapshot holds those numbered so far,
    // and the new ps gets the ones after it.
    {
      absl::MutexLock lock(&mu_);
      snapshotting_ = true;  // New inputs wait rather than block on apply_mu_ meanwhile.
    }
    absl::MutexLock apply(&apply_mu_);
    *install.mutable_install() = job_->ReplicaSnapshot();
    absl::MutexLock lock(&mu_);
    snapshotting_ = false;
    // Those applied here (ahead, the first ones) are in it; those that wait follow it.
    while (!pending_.empty() && pending_.front()->applied_ahead) pending_.pop_front();
    ahead_bytes_ = 0;
    applied_ = submitted_ - static_cast<int64_t>(pending_.size());
    install.set_seq(applied_);
    install.mutable_install()->set_moving_from(options_.move_from);
  } else {
    *install.mutable_install() = job_->ReplicaSnapshot();
  }
  std::unique_ptr<Stream> opened = stub_->Replicate(context);
  absl::Status status;
  ReplicaAck ack;
  if (!opened->Write(install) || !opened->Read(&ack)) {
    // The stream is over: its status says why (no cancelling, which would hide it).
    const grpc::Status finished = opened->Finish();
    // The backup's refusal keeps its code (ABORTED: it took the shard over).
    return absl::Status(
        finished.ok() || finished.error_code() == grpc::StatusCode::CANCELLED
            ? absl::StatusCode::kUnavailable
            : static_cast<absl::StatusCode>(finished.error_code()),
        absl::StrCat("cannot install the backup on ", options_.backup_name, ": ",
                     finished.ok() ? std::string("the stream closed") : finished.error_message()));
  }
  if (ack.code() != 0 || ack.seq() != install.seq()) {
    context->TryCancel();
    opened->Finish();
    return absl::Status(ack.code() != 0 ? static_cast<absl::StatusCode>(ack.code())
                                        : absl::StatusCode::kInternal,
                        absl::StrCat(options_.backup_name, " refused the install: ",
                                     ack.code() != 0 ? ack.message() : "wrong sequence number"));
  }
  {
    absl::MutexLock lock(&mu_);
    stats_.set_bytes_replicated(stats_.bytes_replicated() +
                                static_cast<int64_t>(install.ByteSizeLong()));
  }
  *stream = std::move(opened);
  return absl::OkStatus();
}

void ShardReplicator::Send(Stream* stream, grpc::ClientContext* context, uint64_t generation) {
  while (true) {
    std::shared_ptr<Pending> next;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (stopping_ || generation_ != generation) return true;
        if (next_to_send_ > submitted_) return false;
        // A move's hand-back goes once every input before it is acknowledged: a stream that
        // breaks before then leaves the shard here for sure.
        return !moving() || next_to_send_ == compared_ + 1 ||
               !pending_[static_cast<size_t>(next_to_send_ - applied_ - 1)]->input.has_hand_back();
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_ || generation_ != generation) return;
      next = pending_[static_cast<size_t>(next_to_send_ - applied_ - 1)];
      ++next_to_send_;
      // From here the own ps may have it (even if the write fails).
      if (next->input.has_hand_back()) hand_back_sent_ = true;
    }
    const int64_t bytes = static_cast<int64_t>(next->input.ByteSizeLong());
    if (!stream->Write(next->input)) {
      context->TryCancel();  // Ends the reader's Read too.
      return;
    }
    absl::MutexLock lock(&mu_);
    stats_.set_bytes_replicated(stats_.bytes_replicated() + bytes);
  }
}

void ShardReplicator::ApplyOldest(const ReplicaAck* ack) {
  // A move's inputs are applied one at a time in their order: by their submitters ahead of the
  // new ps (SubmitToMove, which holds apply_mu_ until each has its outcome), or here.
  std::optional<absl::MutexLock> apply;
  if (moving()) apply.emplace(&apply_mu_);
  std::shared_ptr<Pending> oldest;
  {
    absl::MutexLock lock(&mu_);
    oldest = std::move(pending_.front());
    pending_.pop_front();
    ahead_bytes_ -= oldest->bytes;
    if (moving() && !oldest->applied_ahead && !oldest->input.has_hand_back()) --waiting_;
    ++applied_;  // With the pop: Send finds input seq at pending_[seq - applied_ - 1].
  }
  if (oldest->input.has_hand_back()) apply.reset();  // Its end may ask the new ps (seconds).
  absl::StatusOr<ReplicaOutcome> result =
      oldest->applied_ahead
          ? *oldest->outcome
          : ApplyReplicaInput(*job_, oldest->input,
                              oldest->push.has_value() ? &*oldest->push : nullptr);
  apply.reset();
  if (oldest->input.has_hand_back()) {  // The backup's answer is its own: no divergence.
    FinishHandBack(ack);
    oldest->done(std::move(result));
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (ack == nullptr) {
      stats_.set_inputs_unreplicated(stats_.inputs_unreplicated() + 1);
    } else {
      stats_.set_inputs_replicated(stats_.inputs_replicated() + 1);
      if (!SameOutcome(*ack, result)) {
        stats_.set_divergences(stats_.divergences() + 1);
        repair_ = true;
        LOG(ERROR) << JobPrefix(job_->spec().job_id()) << "input " << oldest->input.seq()
                   << " of shard " << job_->ps_index() << " had another outcome on "
                   << options_.backup_name << " (code " << ack->code() << ", version "
                   << ack->outcome().push().version() << ") than here (" << result.status()
                   << "): the copies diverged; installing the backup anew";
      }
    }
    compared_ = oldest->input.seq();
  }
  oldest->done(std::move(result));
}

}  // namespace ps
