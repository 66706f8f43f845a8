// ParameterService's part in replication (docs/replication.md): the primary's replicators
// (server/shard_replicator.h) and the backup's Replicate stream.
#include <chrono>
#include <utility>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "common/cluster/host_port.h"
#include "common/net/grpc_keepalive.h"
#include "common/net/grpc_reconnect.h"
#include "common/net/grpc_status.h"
#include "common/security/auth_token.h"
#include "server/ps_service.h"

#include "server/mib_text.h"
#include "server/replica_input.h"

namespace ps {

void ParameterService::SetPsAddresses(std::vector<std::string> addresses) {
  absl::MutexLock lock(&mu_);
  ps_addresses_ = std::move(addresses);
}

absl::Status ParameterService::CheckReplicas(const ParameterSpec& spec) {
  const std::string prefix = JobPrefix(spec.job_id());
  if (spec.replicas() < 0 || spec.replicas() > 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "replicas is ", spec.replicas(), ": it is 0 or 1 (none) or 2 (one backup)"));
  }
  if (spec.replicas() < 2) return absl::OkStatus();
  if (options_.num_ps < 2) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "replicas 2 keeps each shard's backup on another ps, and the cluster has ",
        options_.num_ps, " ps task: add one, or set replicas to 0"));
  }
  size_t known;
  {
    absl::MutexLock lock(&mu_);
    known = ps_addresses_.size();
  }
  if (static_cast<int>(known) != options_.num_ps) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, TaskName(), " does not know the other ps tasks' addresses (ps_server reads them "
        "from the ClusterSpec), so it cannot replicate; set replicas to 0"));
  }
  if (spec.record_apply_log()) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix, "a job that records its apply log runs without replicas"));
  }
  return absl::OkStatus();
}

std::shared_ptr<ShardReplicator> ParameterService::MakeReplicatorLocked(
    const std::shared_ptr<ShardJob>& job, int backup, bool superseding, bool backup_found_gone) {
  if (job->spec().replicas() < 2) return nullptr;
  ShardReplicatorOptions replicator;
  replicator.channel = ChannelToPsLocked(backup, &replicator.backup_name);
  if (replicator.channel == nullptr) {
    LOG(ERROR) << JobPrefix(job->spec().job_id()) << TaskName() << " does not know where ps:"
               << backup << " listens: shard " << job->ps_index() << " is not replicated";
    return nullptr;
  }
  replicator.unreachable_after = options_.replica_unreachable_after;
  replicator.hand_back = job->ps_index() != options_.ps_index && backup == job->ps_index();
  replicator.superseding = superseding;
  replicator.backup_found_gone = backup_found_gone;
  return std::make_shared<ShardReplicator>(job, std::move(replicator));
}

std::shared_ptr<grpc::Channel> ParameterService::ChannelToPsLocked(int ps, std::string* name) {
  if (ps < 0 || ps >= static_cast<int>(ps_addresses_.size())) return nullptr;
  const std::string& address = ps_addresses_[ps];
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  arguments.SetMaxSendMessageSize(-1);
  SetQuickReconnect(&arguments, absl::Milliseconds(500));
  SetKeepalive(&arguments);
  *name = absl::StrCat("ps:", ps, " (", address, ")");
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, ChannelCredentialsFor(options_.security), arguments,
      BearerTokenInterceptors(options_.token));
}

std::shared_ptr<ShardReplicator> ParameterService::ReplicatorFor(
    const std::shared_ptr<ShardJob>& job) {
  // Every pull and push asks (FindJobFor): a job without replicas takes no lock for it until
  // this ps has moved a shard (its replicator then answers where the shard went).
  if (job->spec().replicas() < 2 && !any_move_.load(std::memory_order_acquire)) return nullptr;
  absl::MutexLock lock(&mu_);
  auto it = replicators_.find({job->spec().job_id(), job->ps_index()});
  return it == replicators_.end() || it->second->job() != job ? nullptr : it->second;
}

absl::StatusOr<std::shared_ptr<ShardReplicator>> ParameterService::ChangesThrough(
    const std::shared_ptr<ShardJob>& job) {
  std::shared_ptr<ShardReplicator> replicator = ReplicatorFor(job);
  if (replicator == nullptr && job->spec().replicas() < 2 &&
      any_move_.load(std::memory_order_acquire)) {
    // A copy a move replaced (its own shard come home, a copy that moved on and came back): a
    // change found it before and is made again on the one served now.
    absl::MutexLock lock(&mu_);
    const std::string& id = job->spec().job_id();
    auto own = jobs_.find(id);
    auto copy = backups_.find({id, job->ps_index()});
    const bool served = job->ps_index() == options_.ps_index
                            ? own != jobs_.end() && own->second == job
                            : copy != backups_.end() && copy->second.job == job;
    if (!served) {
      return absl::UnavailableError(absl::StrCat(
          JobPrefix(id), TaskName(), " no longer holds this copy of shard ", job->ps_index(),
          " (a move replaced it, or the job was deleted): retry"));
    }
  }
  // Without replicas: changed here at once, or through the replicator of a move.
  if (replicator != nullptr || job->spec().replicas() < 2) return replicator;
  return absl::UnavailableError(absl::StrCat(
      JobPrefix(job->spec().job_id()), TaskName(), " no longer serves shard ", job->ps_index(),
      " (stopping, or its other copy took it over): retry the other copy"));
}

absl::StatusOr<std::shared_ptr<ShardJob>> ParameterService::PromotedCopy(
    const std::string& job_id, int shard, const Peer& peer, JobAccess access,
    absl::string_view method) {
  std::shared_ptr<ShardJob> promoted;
  std::shared_ptr<ShardReplicator> dropped;    // Stopped outside mu_.
  std::shared_ptr<ShardReplicator> went_back;  // The copy's, once it went back to its own ps.
  int backup = -1;  // Set under mu_ below before every use; gcc -O2 cannot see it.
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      return absl::UnavailableError(TaskName() + " is shutting down; retry once it is back");
    }
    auto it = backups_.find({job_id, shard});
    // The shard's two homes are ps `shard` and the next one: this ps is one, the other is
    // where the copy came from.
    const int other = shard == options_.ps_index ? (shard + 1) % options_.num_ps : shard;
    if (it == backups_.end()) {
      return absl::UnavailableError(absl::StrCat(
          JobPrefix(job_id), TaskName(), " holds no copy of shard ", shard,
          " (none was installed since it started, or it was dropped as out of date): retry ps:",
          other));
    }
    BackupCopy& copy = it->second;
    absl::Status allowed =
        RequireJobAccess(peer, copy.job->spec().owner(), job_id, access, method);
    if (!allowed.ok()) return allowed;
    if (copy.moving_from >= 0) {  // A copy of a job without replicas: not taken over.
      return absl::UnavailableError(absl::StrCat(
          JobPrefix(job_id), "shard ", shard, " was moved to ", TaskName(), " from ps:",
          copy.moving_from, "; the job has no replicas, and its calls say so (unreplicated)"));
    }
    if (copy.promoted) {
      auto serving = replicators_.find({job_id, shard});
      if (access != JobAccess::kData || serving == replicators_.end() ||
          !serving->second->HandedBack()) {
        return copy.job;
      }
      went_back = serving->second;
    } else {
      if (access != JobAccess::kData) {
        return absl::UnavailableError(absl::StrCat(
            JobPrefix(job_id), TaskName(), " holds a backup of shard ", shard,
            ", which only a worker's call takes over: ask ps:", other));
      }
      if (copy.streaming) {
        // With the stream's age: a worker that found ps:other hung before it opened knows the
        // primary is back (PsConnections::RecentlyHung).
        return WithPrimaryStreamAge(
            absl::UnavailableError(absl::StrCat(JobPrefix(job_id), "ps:", other,
                                                " still replicates shard ", shard, " to ",
                                                TaskName(), ", so it is alive: retry it there")),
            absl::FromChrono(std::chrono::steady_clock::now() - copy.installed_at));
      }
      absl::StatusOr<std::shared_ptr<ShardJob>> made = PromoteLocked(
          job_id, shard, /*superseding=*/false, &dropped, /*backup_found_gone=*/true);
      if (!made.ok()) return made.status();
      promoted = *std::move(made);
      backup = other;
    }
  }
  if (went_back != nullptr) return RetakeFromGonePs(job_id, shard, went_back);
  dropped.reset();
  LOG(WARNING) << JobPrefix(job_id) << TaskName() << " takes over shard " << shard
               << " (at version " << promoted->Stats().version() << "): ps:" << backup
               << ", which served it, stopped replicating to it and a worker found it gone; its "
               << "backup is rebuilt on ps:" << backup << " once that is back";
  // The copy's signs of the workers are the inputs its primary sent, none since that primary
  // went: each worker's lease starts here (as after a retake).
  promoted->RenewLeases();
  WatchLeases(job_id, promoted);
  return promoted;
}

absl::Status ParameterService::ReplicatedHereAgain(const std::string& job_id, int shard) const {
  return absl::UnavailableError(absl::StrCat(JobPrefix(job_id), "ps:", shard,
                                             " replicates its shard ", shard, " to ", TaskName(),
                                             " again, so it is alive: retry it there"));
}

absl::StatusOr<std::shared_ptr<ShardJob>> ParameterService::RetakeFromGonePs(
    const std::string& job_id, int shard, const std::shared_ptr<ShardReplicator>& went_back) {
  const std::shared_ptr<ShardJob> job = went_back->job();
  // The own ps, having taken its shard back, applies nothing before this copy holds it too,
  // unless it finds this ps out of reach for replica_unreachable_after (it then goes on alone):
  // one gone sooner than half that after the hand-back has applied nothing this copy lacks.
  const absl::Duration within = options_.replica_unreachable_after / 2;
  switch (went_back->AskHomeAfterHandBack(within, /*wait=*/absl::Milliseconds(500))) {
    case ShardReplicator::HomeAfterHandBack::kUnknown:
      return job;  // The request hears where the shard went (FindJobFor: Fenced).
    case ShardReplicator::HomeAfterHandBack::kStartedAgainTooLate:
      return DropOutdatedCopy(job_id, shard, went_back, within);
    case ShardReplicator::HomeAfterHandBack::kGoneInTime:
      break;
  }
  // Ready to serve before a request can find it serving (the replicator below): its workers'
  // signs of life went to the own ps meanwhile, so each has a full lease from now, and it parks
  // pulls again (closed when it went back, ShardJob::CancelAllWaiters). Harmless if another
  // call took it over first, or the own ps's install replaced it.
  job->RenewLeases();
  job->Reopen();
  std::shared_ptr<ShardReplicator> dropped;  // The one that went back; stopped outside mu_.
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      return absl::UnavailableError(TaskName() + " is shutting down; retry once it is back");
    }
    auto it = backups_.find({job_id, shard});
    auto serving = replicators_.find({job_id, shard});
    if (it == backups_.end() || it->second.job != job || serving == replicators_.end()) {
      return ReplicatedHereAgain(job_id, shard);
    }
    if (serving->second != went_back) return job;  // Another call took it over again.
    absl::StatusOr<std::shared_ptr<ShardJob>> made =
        PromoteLocked(job_id, shard, /*superseding=*/false, &dropped);
    if (!made.ok()) return made.status();
  }
  dropped.reset();
  LOG(WARNING) << JobPrefix(job_id) << TaskName() << " takes shard " << shard
               << " over again (at version " << job->Stats().version() << "): its own ps, ps:"
               << shard << ", took it back and stopped before replicating it here; the shard "
               << "goes back once ps:" << shard << " is started again";
  WatchLeases(job_id, job);
  return job;
}

absl::Status ParameterService::DropOutdatedCopy(
    const std::string& job_id, int shard, const std::shared_ptr<ShardReplicator>& went_back,
    absl::Duration within) {
  const std::shared_ptr<ShardJob> job = went_back->job();
  std::shared_ptr<ShardReplicator> dropped;  // Stopped outside mu_.
  {
    absl::MutexLock lock(&mu_);
    auto serving = replicators_.find({job_id, shard});
    auto it = backups_.find({job_id, shard});
    const bool replaced = (serving != replicators_.end() && serving->second != went_back) ||
                          (it != backups_.end() && it->second.job != job);
    if (replaced) {
      // The own ps installed a new copy here meanwhile (it took the shard back and is alive).
      return ReplicatedHereAgain(job_id, shard);
    }
    if (serving != replicators_.end()) {
      dropped = std::move(serving->second);
      replicators_.erase(serving);
    }
    if (it != backups_.end()) backups_.erase(it);
  }
  // Dropped here, or by another call a moment ago.
  const absl::Status lost = absl::DataLossError(absl::StrCat(
      JobPrefix(job_id), "shard ", shard, " lost both its copies: its own ps, ps:", shard,
      ", took it back from ", TaskName(), " and was started again empty more than ",
      absl::FormatDuration(within), " after that (it may have applied updates alone first), so ",
      TaskName(), "'s copy (version ", job->Stats().version(),
      ") may be out of date and is dropped: psctl recovers a job with checkpoints from its "
      "latest one, and stops one without"));
  if (dropped != nullptr) {
    dropped.reset();
    job->CancelAllWaiters(lost);
    LOG(ERROR) << lost.message();
  }
  return lost;
}

absl::StatusOr<std::shared_ptr<ShardJob>> ParameterService::PromoteLocked(
    const std::string& job_id, int shard, bool superseding,
    std::shared_ptr<ShardReplicator>* dropped, bool backup_found_gone) {
  auto it = backups_.find({job_id, shard});
  if (it == backups_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(JobPrefix(job_id), TaskName(),
                                                      " holds no copy of shard ", shard));
  }
  const bool home = shard == options_.ps_index;
  const int other = home ? (shard + 1) % options_.num_ps : shard;
  auto own_replicator = replicators_.find({job_id, shard});
  const bool own_job = home && jobs_.count(job_id) > 0;
  // Its own copy of the shard, fenced off when the other ps took the shard over, is dropped;
  // one that still serves keeps the shard.
  if (own_job &&
      (own_replicator == replicators_.end() || !own_replicator->second->Superseded())) {
    return absl::FailedPreconditionError(
        absl::StrCat(JobPrefix(job_id), TaskName(), " serves shard ", shard, " itself already"));
  }
  // Made before any request can reach the promoted copy: every change to it is replicated, to
  // the ps it came from (a new install there once that is back).
  std::shared_ptr<ShardReplicator> replicator =
      MakeReplicatorLocked(it->second.job, other, superseding, backup_found_gone);
  if (replicator == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        JobPrefix(job_id), TaskName(), " cannot serve shard ", shard,
        ": it does not know where the other ps listen (ps_server reads the ClusterSpec)"));
  }
  if (own_job) {
    *dropped = std::move(own_replicator->second);
    jobs_.erase(job_id);
  }
  std::shared_ptr<ShardJob> job = it->second.job;
  if (home) {
    jobs_[job_id] = job;
    backups_.erase(it);
  } else {
    it->second.promoted = true;
    it->second.generation = ++backup_generation_;  // No stream of the old primary binds to it.
  }
  std::shared_ptr<ShardReplicator>& slot = replicators_[{job_id, shard}];
  if (slot != nullptr) *dropped = std::move(slot);  // One that went back (RetakeFromGonePs).
  slot = std::move(replicator);
  return job;
}

ReplicaAck ParameterService::TakeShardBack(const BackupBinding& binding, int64_t seq) {
  const std::string& job_id = binding.job_id;
  const int shard = binding.job->ps_index();
  bool moving;
  {
    absl::MutexLock lock(&mu_);
    auto it = incoming_.find({job_id, shard});
    moving = it != incoming_.end() && it->second.generation == binding.generation;
  }
  if (moving) return TakeMovedShard(binding, seq);
  const int from = (shard + 1) % options_.num_ps;
  std::shared_ptr<ShardReplicator> dropped;  // Stopped outside mu_.
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    if (shard != options_.ps_index) {
      refused = absl::FailedPreconditionError(
          absl::StrCat(JobPrefix(job_id), "shard ", shard, " goes back only to its own ps, ps:",
                       shard, ", not to ", TaskName()));
    } else if (shutting_down_) {
      refused = absl::UnavailableError(TaskName() + " is shutting down");
    } else if (auto it = backups_.find({job_id, shard});
               it == backups_.end() || it->second.generation != binding.generation) {
      // Only the copy this stream installed goes back to serving: the hand-back vouches for it.
      refused = absl::FailedPreconditionError(absl::StrCat(
          JobPrefix(job_id), TaskName(), " no longer holds the copy of shard ", shard,
          " that this stream installed"));
    } else {
      refused = PromoteLocked(job_id, shard, /*superseding=*/true, &dropped).status();
    }
  }
  dropped.reset();
  if (!refused.ok()) {
    LOG(WARNING) << JobPrefix(job_id) << TaskName() << " does not take shard " << shard
                 << " back from ps:" << from << ": " << refused.message();
    return AckFor(seq, refused);
  }
  LOG(INFO) << JobPrefix(job_id) << TaskName() << " takes its shard " << shard
            << " back from ps:" << from << ", which handed it back (at version "
            << binding.job->Stats().version() << "), and replicates it there";
  WatchLeases(job_id, binding.job);
  return AckFor(seq, ReplicaOutcome());
}

void ParameterService::BackupStreamEnded(const BackupBinding& binding) {
  if (binding.job == nullptr) return;
  absl::MutexLock lock(&mu_);
  const ShardKey key{binding.job_id, binding.job->ps_index()};
  auto it = backups_.find(key);
  if (it != backups_.end() && it->second.generation == binding.generation) {
    it->second.streaming = false;
  }
  // A move's copy is served only on its stream's hand-back, which can no longer come.
  auto arriving = incoming_.find(key);
  if (arriving != incoming_.end() && arriving->second.generation == binding.generation) {
    incoming_.erase(arriving);
  }
}

bool ParameterService::BindingCurrentLocked(const BackupBinding& binding) const {
  const ShardKey key{binding.job_id, binding.job->ps_index()};
  auto it = backups_.find(key);
  if (it != backups_.end() && it->second.generation == binding.generation) return true;
  auto arriving = incoming_.find(key);
  return arriving != incoming_.end() && arriving->second.generation == binding.generation;
}

void ParameterService::ForgetCopiesLocked(
    const std::string& job_id, std::vector<std::shared_ptr<ShardReplicator>>* replicators,
    std::vector<std::shared_ptr<ShardJob>>* promoted) {
  for (auto it = replicators_.lower_bound({job_id, -1});
       it != replicators_.end() && it->first.first == job_id;) {
    replicators->push_back(std::move(it->second));
    it = replicators_.erase(it);
  }
  for (auto it = backups_.lower_bound({job_id, -1});
       it != backups_.end() && it->first.first == job_id;) {
    if (it->second.promoted) promoted->push_back(it->second.job);
    it = backups_.erase(it);
  }
  for (auto it = incoming_.lower_bound({job_id, -1});
       it != incoming_.end() && it->first.first == job_id;) {
    it = incoming_.erase(it);
  }
}

std::shared_ptr<ShardJob> ParameterService::BackupForTesting(const std::string& job_id,
                                                             int shard) {
  absl::MutexLock lock(&mu_);
  auto it = backups_.find({job_id, shard});
  return it == backups_.end() ? nullptr : it->second.job;
}

std::shared_ptr<ShardJob> ParameterService::JobForTesting(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : it->second;
}

absl::StatusOr<ReplicaAck> ParameterService::ApplyAsBackup(const Peer& peer,
                                                           const ReplicaInput& input,
                                                           BackupBinding* binding) {
  if (input.has_install()) {
    const ReplicaInstall& install = input.install();
    const int n = options_.num_ps;
    // This ps backs up the previous ps's shard, and its own shard while the next ps serves it
    // (a promoted copy rebuilding its backup here).
    const int previous = (options_.ps_index + n - 1) % n;
    const bool move = install.has_moving_from();
    if (move) {
      absl::Status movable = CheckMoveHere(install);
      if (!movable.ok()) return movable;
    } else if (install.num_ps() != n ||
               (install.shard() != previous && install.shard() != options_.ps_index)) {
      return absl::FailedPreconditionError(absl::StrCat(
          TaskName(), " of ", n, " backs up shard ", previous, " (and its own, ",
          options_.ps_index, "), not shard ", install.shard(), " of ", install.num_ps(),
          "; the ps tasks must use the same ClusterSpec"));
    }
    const int shard = install.shard();
    const int primary =
        move ? install.moving_from() : shard == options_.ps_index ? (shard + 1) % n : shard;
    std::vector<std::string> addresses;
    {
      absl::MutexLock lock(&mu_);
      addresses = ps_addresses_;
    }
    const std::vector<std::string> ps_hosts = HostsOf(addresses);
    absl::Status allowed = RequirePsHost(peer, primary, ps_hosts, "Replicate");
    if (!allowed.ok()) return allowed;
    if (move) return InstallMovingCopy(input, binding);
    const ShardKey key{install.job_id(), shard};
    // A copy this ps took over fences the old primary off (ABORTED); while it hands the shard
    // back to that ps (the answer not yet in), the install waits: UNAVAILABLE, tried again (the
    // own ps installs right after taking the shard back, and may be first). A copy that went
    // back to its own ps (or was fenced off) gives way. Checked again below, under the same lock
    // as the install; here so that no copy is built for nothing.
    auto refusal = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
      auto it = backups_.find(key);
      if (it == backups_.end() || !it->second.promoted) return absl::OkStatus();
      auto serving = replicators_.find(key);
      if (serving != replicators_.end() && serving->second->Superseded()) return absl::OkStatus();
      if (serving != replicators_.end() && serving->second->HandingBack()) {
        return absl::UnavailableError(absl::StrCat(
            JobPrefix(install.job_id()), TaskName(), " is handing shard ", shard,
            " back to ps:", primary, " and has no answer yet; the install is tried again"));
      }
      return absl::AbortedError(absl::StrCat(JobPrefix(install.job_id()), TaskName(),
                                             " took shard ", shard, " over when ps:", primary,
                                             " was found gone; that copy is fenced off"));
    };
    {
      absl::MutexLock lock(&mu_);
      absl::Status refused = refusal();
      if (!refused.ok()) return refused;
    }
    absl::StatusOr<std::unique_ptr<ShardJob>> copy =
        ShardJob::FromReplicaSnapshot(install, options_.clock);
    if (!copy.ok()) return copy.status();
    if ((*copy)->spec().replicas() < 2) {
      return absl::FailedPreconditionError(
          absl::StrCat(JobPrefix(install.job_id()), "the job has no replicas"));
    }
    // Superseded replicators (of this ps's own shard, of a promoted copy), stopped outside mu_.
    std::shared_ptr<ShardReplicator> dropped, dropped_copy;
    absl::Status refused;
    {
      absl::MutexLock lock(&mu_);
      if (shutting_down_) return absl::UnavailableError(TaskName() + " is shutting down");
      if (shard == options_.ps_index && jobs_.count(install.job_id()) > 0) {
        // This ps's own copy of its shard: if the next ps took the shard over, that copy is
        // fenced off and the new install replaces it; otherwise this ps serves the shard.
        auto own = replicators_.find({install.job_id(), shard});
        if (own != replicators_.end() && own->second->Superseding()) {
          // The next ps handed the shard back here, and its stream broke before it heard so.
          return absl::AbortedError(absl::StrCat(
              JobPrefix(install.job_id()), TaskName(), " took its shard ", shard,
              " back from ps:", primary, ", which handed it back; that copy is fenced off"));
        }
        if (own == replicators_.end() || !own->second->Superseded()) {
          return absl::FailedPreconditionError(absl::StrCat(
              JobPrefix(install.job_id()), TaskName(), " serves shard ", shard,
              " itself; it takes no backup of it"));
        }
        dropped = std::move(own->second);
        replicators_.erase(own);
        jobs_.erase(install.job_id());
      }
      refused = refusal();
      if (refused.ok()) {
        absl::StatusOr<int64_t> bytes =
            ShardJob::MemoryBytes((*copy)->spec(), options_.num_ps, shard);
        if (!bytes.ok()) return bytes.status();
        const int64_t held = HeldBytesLocked(&key);
        if (held + *bytes > max_total_bytes_) {
          return absl::ResourceExhaustedError(absl::StrCat(
              JobPrefix(install.job_id()), TaskName(), " cannot hold the backup of shard ", shard,
              ": it needs ", MibText(*bytes), ", and ", TaskName(), " holds ", MibText(held),
              " of its ", MibText(max_total_bytes_), " for all jobs (ps_server --max_memory_mb); "
              "the shard goes on unreplicated until there is room"));
        }
        BackupCopy& slot = backups_[key];
        if (slot.promoted) {  // Superseded (refusal): its replicator stops with it.
          auto superseded = replicators_.find(key);
          if (superseded != replicators_.end()) {
            dropped_copy = std::move(superseded->second);
            replicators_.erase(superseded);
          }
          slot.promoted = false;
        }
        slot.job = std::shared_ptr<ShardJob>(*std::move(copy));
        slot.job->UseByteBudget(byte_budget_);
        slot.generation = ++backup_generation_;
        slot.streaming = true;
        slot.moving_from = -1;
        slot.installed_at = std::chrono::steady_clock::now();
        *binding = BackupBinding{install.job_id(), slot.generation, slot.job, input.seq()};
      }
    }
    dropped.reset();
    dropped_copy.reset();
    if (!refused.ok()) return refused;
    LOG(INFO) << JobPrefix(install.job_id()) << TaskName() << " holds the backup of shard "
              << shard << " (served by ps:" << primary << ") as of input " << input.seq();
    return AckFor(input.seq(), ReplicaOutcome());
  }
  if (binding->job == nullptr) {
    return absl::FailedPreconditionError("a Replicate stream starts with an install");
  }
  {
    absl::MutexLock lock(&mu_);
    // A stopping ps ends its backup streams at their next input (its primaries then go on
    // alone) rather than hold its shutdown for the grace period.
    if (shutting_down_) return absl::UnavailableError(TaskName() + " is shutting down");
    if (!BindingCurrentLocked(*binding)) {
      return absl::FailedPreconditionError(
          absl::StrCat(JobPrefix(binding->job_id), "this stream's backup on ", TaskName(),
                       " was replaced by a newer install or deleted"));
    }
  }
  if (input.seq() != binding->last_seq + 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        JobPrefix(binding->job_id), "replicated input ", input.seq(), " arrived where ",
        binding->last_seq + 1, " was next"));
  }
  binding->last_seq = input.seq();
  if (input.has_hand_back()) return TakeShardBack(*binding, input.seq());
  return AckFor(input.seq(), ApplyReplicaInput(*binding->job, input));
}

// One Replicate stream on the backup: reads an input, applies it, writes its ack, and reads the
// next (the primary keeps several in flight; they wait in the transport).
class ParameterService::ReplicaReactor : public grpc::ServerBidiReactor<ReplicaInput, ReplicaAck> {
 public:
  ReplicaReactor(ParameterService* service, const Peer& peer, RequestsInFlight::Slot slot,
                 const absl::Status& refused)
      : service_(service), peer_(peer), slot_(std::move(slot)) {
    if (!refused.ok()) {
      Finish(ToGrpcStatus(refused));
      return;
    }
    StartRead(&input_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    absl::StatusOr<ReplicaAck> ack = service_->ApplyAsBackup(peer_, input_, &binding_);
    if (!ack.ok()) {
      LOG(WARNING) << "Replicate from " << peer_.Describe() << ": " << ack.status();
      Finish(ToGrpcStatus(ack.status()));
      return;
    }
    ack_ = *std::move(ack);
    StartWrite(&ack_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the primary went away"));
      return;
    }
    StartRead(&input_);
  }

  void OnDone() override {
    service_->BackupStreamEnded(binding_);
    slot_.Release();
    delete this;
  }

 private:
  ParameterService* const service_;
  const Peer peer_;
  RequestsInFlight::Slot slot_;
  BackupBinding binding_;
  ReplicaInput input_;
  ReplicaAck ack_;
};

grpc::ServerBidiReactor<ReplicaInput, ReplicaAck>* ParameterService::Replicate(
    grpc::CallbackServerContext* context) {
  const Peer peer = PeerOf(*context);
  absl::Status allowed = RequireTask(peer, "Replicate");
  RequestsInFlight::Slot slot;
  if (allowed.ok()) {
    absl::StatusOr<RequestsInFlight::Slot> taken =
        requests_in_flight_.Take(PeerKey(peer, context->peer()));
    if (taken.ok()) {
      slot = *std::move(taken);
    } else {
      allowed = taken.status();
    }
  }
  return new ReplicaReactor(this, peer, std::move(slot), allowed);
}

}  // namespace ps
