// ParameterService's live moves (docs/replication.md "A live move to another ps"): a shard of
// a job without replicas goes to another ps while its workers train on, by the machinery of a
// replicated shard's move home (server/shard_replicator.h): a copy, the changes after it in
// order, then a hand-over; from then on the ps it came from answers every call of the shard
// with where it went (WithShardMovedTo).
#include <utility>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/net/grpc_status.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/mib_text.h"
#include "server/ps_service.h"
#include "server/replica_input.h"

namespace ps {

grpc::ServerUnaryReactor* ParameterService::MoveShard(grpc::CallbackServerContext* context,
                                                      const MoveShardRequest* request,
                                                      MoveShardResponse* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "MoveShard", RequireUser, &slot, &peer)) {
    return refused;
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto held = std::make_shared<RequestsInFlight::Slot>(std::move(slot));
  absl::Status started =
      StartMove(peer, *request, [reactor, response, held](absl::StatusOr<int64_t> version) {
        if (version.ok()) response->set_version(*version);
        Finish(reactor, held.get(), version.status());
      });
  if (!started.ok()) Finish(reactor, held.get(), started);
  return reactor;
}

absl::Status ParameterService::StartMove(const Peer& peer, const MoveShardRequest& request,
                                         std::function<void(absl::StatusOr<int64_t>)> done) {
  const std::string prefix = JobPrefix(request.job_id());
  // Its own shard, or one moved here (onward, or back to its own ps).
  const bool own = request.shard() == options_.ps_index;
  if (request.shard() < 0 || request.shard() >= options_.num_ps) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "shard ", request.shard(),
                                                   " is out of range: the cluster has ",
                                                   options_.num_ps, " ps tasks"));
  }
  if (request.to_ps() < 0 || request.to_ps() >= options_.num_ps) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "to_ps is ", request.to_ps(),
                                                   ": name a ps task of the ", options_.num_ps,
                                                   " in the cluster"));
  }
  const ShardKey key{request.job_id(), request.shard()};
  if (!own) {
    absl::MutexLock lock(&mu_);
    auto it = backups_.find(key);
    if (it == backups_.end() || it->second.moving_from < 0 || !it->second.promoted) {
      return absl::FailedPreconditionError(absl::StrCat(
          prefix, TaskName(), " moves only its own shard, ", options_.ps_index,
          ", and shards moved here; shard ", request.shard(),
          " is not served here: ask its own ps, ps:", request.shard(),
          ", which says where it went"));
    }
  }
  absl::StatusOr<std::shared_ptr<ShardJob>> found =
      own ? FindJobFor(peer, request.job_id(), JobAccess::kManage, "MoveShard")
          : FindJobFor(peer, request.job_id(), JobAccess::kManage, "MoveShard", request.shard(),
                       /*unreplicated=*/true);
  // (Its own shard moved away answers with where it went: the caller asks there.)
  if (!found.ok()) return found.status();
  const std::shared_ptr<ShardJob> job = *std::move(found);
  if (request.to_ps() == options_.ps_index) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "to_ps is ", request.to_ps(), ": ", TaskName(), " serves shard ",
        request.shard(), " already; name another ps task"));
  }
  if (job->spec().replicas() >= 2) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "a shard with replicas moves only between its two copies (a takeover and the "
        "move home); moving it to a third ps is not built yet"));
  }
  if (job->spec().record_apply_log() || job->replaying()) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "a job that records its apply log, or replays one, does not move: the log and "
        "the replay's order stay on this ps"));
  }
  absl::WriterMutexLock gate(&move_gate_);  // No change at once while the replicator is made.
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError(TaskName() + " is shutting down");
  const bool still_here = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (own) {
      auto it = jobs_.find(request.job_id());
      return it != jobs_.end() && it->second == job;
    }
    auto it = backups_.find(key);
    return it != backups_.end() && it->second.job == job && it->second.promoted;
  }();
  if (!still_here) {
    return absl::NotFoundError(absl::StrCat(prefix, "shard ", request.shard(),
                                            " left ", TaskName(), " meanwhile"));
  }
  if (replicators_.count(key) > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "shard ", request.shard(), " is moving or moved already"));
  }
  ShardReplicatorOptions move;
  move.channel = ChannelToPsLocked(request.to_ps(), &move.backup_name);
  if (move.channel == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, TaskName(), " does not know where ps:", request.to_ps(),
        " listens (ps_server reads the ClusterSpec)"));
  }
  move.unreachable_after = options_.replica_unreachable_after;
  move.hand_back = true;
  move.move_from = options_.ps_index;
  move.move_to = request.to_ps();
  move.on_move_end = [this, job, done = std::move(done)](const absl::Status& outcome) {
    if (outcome.ok()) {
      done(job->Stats().version());  // The replicator stays: it answers where the shard went.
    } else {
      MoveEnded(job, outcome, done);
    }
  };
  LOG(INFO) << prefix << TaskName() << " moves shard " << request.shard() << " (at version "
            << job->Stats().version() << ") to " << move.backup_name;
  any_move_.store(true, std::memory_order_release);
  // Made under move_gate_: its snapshot holds every change made at once.
  replicators_[key] = std::make_shared<ShardReplicator>(job, std::move(move));
  return absl::OkStatus();
}

void ParameterService::MoveEnded(const std::shared_ptr<ShardJob>& job,
                                 const absl::Status& outcome,
                                 std::function<void(absl::StatusOr<int64_t>)> done) {
  const ShardKey key{job->spec().job_id(), job->ps_index()};
  // Not under mu_ here: a replicator may be stopped (and so end its move) under it.
  io_thread_.Schedule([this, key, job, outcome, done = std::move(done)] {
    {
      // No change is made directly until the inputs that wait in the replicator are applied, in
      // their order (~ShardReplicator).
      absl::WriterMutexLock gate(&move_gate_);
      std::shared_ptr<ShardReplicator> stopped;  // Outside mu_.
      {
        absl::MutexLock lock(&mu_);
        auto it = replicators_.find(key);
        // Shutdown, or a DeleteJob, stops it itself.
        if (!shutting_down_ && it != replicators_.end() && it->second->job() == job) {
          stopped = std::move(it->second);
          replicators_.erase(it);
        }
      }
      stopped.reset();
    }
    // Then the caller hears why: a move asked again now starts anew.
    done(outcome);
  });
}

absl::StatusOr<std::shared_ptr<ShardJob>> ParameterService::MovedInCopy(
    const std::string& job_id, int shard, const Peer& peer, JobAccess access,
    absl::string_view method) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) {
    return absl::UnavailableError(TaskName() + " is shutting down; retry once it is back");
  }
  auto it = backups_.find({job_id, shard});
  if (it == backups_.end() || it->second.moving_from < 0) {
    // A caller whose route is out of date (the job was made anew since it moved): back home.
    return WithShardMovedTo(
        absl::UnavailableError(absl::StrCat(JobPrefix(job_id), TaskName(),
                                            " holds no moved copy of shard ", shard,
                                            ": its own ps, ps:", shard, ", serves it")),
        shard);
  }
  const BackupCopy& copy = it->second;
  absl::Status allowed = RequireJobAccess(peer, copy.job->spec().owner(), job_id, access, method);
  if (!allowed.ok()) return allowed;
  if (!copy.promoted) {
    return absl::UnavailableError(absl::StrCat(JobPrefix(job_id), "shard ", shard,
                                               " is moving to ", TaskName(), " from ps:",
                                               copy.moving_from, ", which serves it still"));
  }
  return copy.job;
}

absl::Status ParameterService::CheckMoveHere(const ReplicaInstall& install) const {
  const int n = options_.num_ps;
  if (install.num_ps() != n || install.shard() < 0 || install.shard() >= n ||
      install.moving_from() < 0 || install.moving_from() >= n ||
      install.moving_from() == options_.ps_index) {
    return absl::FailedPreconditionError(absl::StrCat(
        TaskName(), " of ", n, " takes only a shard moving from another ps of the ", n,
        " (shard ", install.shard(), " of ", install.num_ps(), " from ps:",
        install.moving_from(), "); the ps tasks must use the same ClusterSpec"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ReplicaAck> ParameterService::InstallMovingCopy(const ReplicaInput& input,
                                                               BackupBinding* binding) {
  const ReplicaInstall& install = input.install();
  const std::string prefix = JobPrefix(install.job_id());
  const int shard = install.shard();
  const ShardKey key{install.job_id(), shard};
  // A shard moving on from a ps that is not its own (or home from there): that ps must be the
  // one serving it as a moved copy, or any ps could plant a copy of any shard here.
  if (install.moving_from() != shard) {
    absl::Status served = ConfirmServedBy(install.moving_from(), key);
    if (!served.ok()) return served;
  }
  absl::StatusOr<std::unique_ptr<ShardJob>> made =
      ShardJob::FromReplicaSnapshot(install, options_.clock);
  if (!made.ok()) return made.status();
  std::shared_ptr<ShardJob> copy(*std::move(made));
  if (copy->spec().replicas() >= 2) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix, "a shard with replicas moves only between its two copies"));
  }
  // Its own shard coming home to a ps that holds nothing of the job: the ps sending it must
  // also vouch for the job's owner and run (asked here, over this ps's own channel to it).
  bool vouched = false;
  if (shard == options_.ps_index && install.moving_from() != shard && !HoldsAnyOf(key.first, shard)) {
    absl::Status same = ConfirmSameRunServedBy(install.moving_from(), key, copy->spec(),
                                               copy->Stats().version());
    if (!same.ok()) return same;
    vouched = true;
  }
  bool adopting = false;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError(TaskName() + " is shutting down");
    // Only a shard of a job (and run) this ps holds its own shard of, of the same owner; or
    // its own shard coming home to this ps started again empty (the ps serving it vouched for
    // it above), which adopts the job.
    auto own = jobs_.find(install.job_id());
    adopting = own == jobs_.end() && shard == options_.ps_index && !HoldsCopiesLocked(key.first, shard);
    if (adopting && !vouched) {
      return absl::UnavailableError(absl::StrCat(
          prefix, "the job left ", TaskName(), " while its shard came home; the move is tried "
          "again"));
    }
    if (adopting) {
      absl::Status room = CheckAdoptionLimitsLocked(copy->spec());
      if (!room.ok()) return room;
    }
    if (!adopting &&
        (own == jobs_.end() || own->second->spec().owner() != copy->spec().owner() ||
         own->second->spec().run_id() != copy->spec().run_id())) {
      return absl::FailedPreconditionError(absl::StrCat(
          prefix, TaskName(), " does not hold this run of the job, of that owner: it takes no "
          "shard of it"));
    }
    // What it holds of the shard must have left it: its record of the move (which answers with
    // where the shard went until the hand-over) names the copy.
    std::shared_ptr<ShardJob> held;
    if (adopting) {
      // Nothing of the job here to replace.
    } else if (shard == options_.ps_index) {
      held = own->second;
    } else if (auto it = backups_.find(key); it != backups_.end()) {
      held = it->second.job;
    }
    if (held != nullptr && !adopting) {
      auto record = replicators_.find(key);
      if (record == replicators_.end() || record->second->job() != held ||
          !record->second->MovedTo().has_value()) {
        return absl::FailedPreconditionError(absl::StrCat(
            prefix, TaskName(), " serves shard ", shard, " itself; it takes no moving copy of it"));
      }
    }
    absl::StatusOr<int64_t> bytes = ShardJob::MemoryBytes(copy->spec(), options_.num_ps, shard);
    if (!bytes.ok()) return bytes.status();
    const int64_t in_use = HeldBytesLocked(&key);
    if (in_use + *bytes > max_total_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          prefix, TaskName(), " cannot hold shard ", shard, ": it needs ", MibText(*bytes),
          ", and ", TaskName(), " holds ", MibText(in_use), " of its ", MibText(max_total_bytes_),
          " for all jobs (ps_server --max_memory_mb)"));
    }
    copy->UseByteBudget(byte_budget_);
    IncomingMove& slot = incoming_[key];  // A copy of an earlier stream gives way.
    slot = IncomingMove{copy, ++backup_generation_, install.moving_from(), adopting};
    *binding = BackupBinding{install.job_id(), slot.generation, copy, input.seq()};
  }
  LOG(INFO) << prefix << TaskName() << " holds the moving copy of shard " << shard
            << " (served by ps:" << install.moving_from() << ") as of input " << input.seq()
            << (adopting ? ": its own shard, coming home to a ps that holds nothing of the job"
                         : "");
  return AckFor(input.seq(), ReplicaOutcome());
}

std::shared_ptr<grpc::Channel> ParameterService::ChannelToPs(int ps, std::string* name) {
  absl::MutexLock lock(&mu_);
  return ChannelToPsLocked(ps, name);
}

bool ParameterService::HoldsAnyOf(const std::string& job_id, int but_incoming) {
  absl::MutexLock lock(&mu_);
  return jobs_.count(job_id) > 0 || HoldsCopiesLocked(job_id, but_incoming);
}

bool ParameterService::HoldsCopiesLocked(const std::string& job_id, int but_incoming) const {
  auto copy = backups_.lower_bound({job_id, -1});
  if (copy != backups_.end() && copy->first.first == job_id) return true;
  for (auto it = incoming_.lower_bound({job_id, -1});
       it != incoming_.end() && it->first.first == job_id; ++it) {
    if (it->first.second != but_incoming) return true;
  }
  return false;
}

absl::Status ParameterService::CheckAdoptionLimitsLocked(const ParameterSpec& spec) {
  const ServiceLimits& limits = options_.limits;
  const std::string prefix = absl::StrCat(JobPrefix(spec.job_id()), TaskName(), " cannot adopt it: ");
  if (spec.num_workers() > limits.max_workers) {
    return absl::ResourceExhaustedError(absl::StrCat(
        prefix, "it has ", spec.num_workers(), " workers, more than ps_server --max_workers (",
        limits.max_workers, ")"));
  }
  absl::StatusOr<int64_t> bytes = ShardJob::MemoryBytes(spec, options_.num_ps, options_.ps_index);
  if (!bytes.ok()) return bytes.status();
  if (*bytes > limits.max_job_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(prefix, "its shard needs ", MibText(*bytes),
                                                     ", more than ps_server --max_job_mb (",
                                                     MibText(limits.max_job_bytes), ")"));
  }
  int adopting = 0;
  for (const auto& [key, move] : incoming_) {
    // (An earlier stream's copy of this job gives way to this one.)
    adopting += move.adopting && key.first != spec.job_id() ? 1 : 0;
  }
  if (static_cast<int>(jobs_.size()) + reserved_jobs_ + adopting >= limits.max_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        prefix, "it holds ", jobs_.size() + reserved_jobs_ + adopting,
        " jobs, its limit (ps_server --max_jobs)"));
  }
  return absl::OkStatus();
}

absl::Status ParameterService::ConfirmSameRunServedBy(int ps, const std::pair<std::string, int>& key,
                                                      const ParameterSpec& spec,
                                                      int64_t version) {
  std::string name;
  const std::shared_ptr<grpc::Channel> channel = ChannelToPs(ps, &name);
  const std::string refused = absl::StrCat(JobPrefix(key.first), TaskName(),
                                           " adopts no copy of its shard ", key.second,
                                           " from ps:", ps);
  if (channel == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(refused, ": ", TaskName(), " does not know where it listens"));
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  JobStatsRequest request;
  request.set_job_id(key.first);
  request.set_shard(key.second);
  request.set_unreplicated(true);
  JobStats stats;
  const grpc::Status answered =
      ParameterServer::NewStub(channel)->GetJobStats(&context, request, &stats);
  if (!answered.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(refused, ": ", name, " could not be asked (", answered.error_message(), ")"));
  }
  if (stats.spec().owner() != spec.owner() || stats.spec().run_id() != spec.run_id() ||
      !stats.moved_in() || stats.version() < version) {
    return absl::FailedPreconditionError(absl::StrCat(
        refused, ": the copy ", name, " serves is not the one sent (its owner, run or version "
        "differ)"));
  }
  return absl::OkStatus();
}

absl::Status ParameterService::ConfirmServedBy(int ps, const std::pair<std::string, int>& key) {
  std::string name;
  const std::shared_ptr<grpc::Channel> channel = ChannelToPs(ps, &name);
  const std::string refused =
      absl::StrCat(JobPrefix(key.first), "shard ", key.second, " is not moving from ps:", ps);
  if (channel == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(refused, ": ", TaskName(), " does not know where it listens"));
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  ListJobsResponse listed;
  const grpc::Status answered =
      ParameterServer::NewStub(channel)->ListJobs(&context, ListJobsRequest(), &listed);
  if (!answered.ok()) {
    // Not UNAVAILABLE, which the moving ps would try again with a new snapshot each time.
    return absl::FailedPreconditionError(
        absl::StrCat(refused, ": ", name, " could not be asked (", answered.error_message(), ")"));
  }
  for (const ListJobsResponse::ShardCopy& copy : listed.copies()) {
    if (copy.job_id() == key.first && copy.shard() == key.second && copy.serving() &&
        copy.moved()) {
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(refused, ": ", name, " does not serve it"));
}

ReplicaAck ParameterService::TakeMovedShard(const BackupBinding& binding, int64_t seq) {
  const std::string& job_id = binding.job_id;
  const int shard = binding.job->ps_index();
  const ShardKey key{job_id, shard};
  const bool home = shard == options_.ps_index;
  absl::Status refused;
  int from = -1;
  std::shared_ptr<ShardReplicator> record;  // Of the move away from here; stopped outside mu_.
  {
    absl::MutexLock lock(&mu_);
    auto it = incoming_.find(key);
    auto own = jobs_.find(job_id);
    if (shutting_down_) {
      refused = absl::UnavailableError(TaskName() + " is shutting down");
    } else if (it == incoming_.end() || it->second.generation != binding.generation) {
      refused = absl::FailedPreconditionError(absl::StrCat(
          JobPrefix(job_id), TaskName(), " no longer holds the copy of shard ", shard,
          " that this stream moved here"));
    } else if (own == jobs_.end() && !it->second.adopting) {
      refused = absl::FailedPreconditionError(
          absl::StrCat(JobPrefix(job_id), "the job was deleted from ", TaskName(), " meanwhile"));
    } else if (own != jobs_.end() && it->second.adopting) {
      refused = absl::FailedPreconditionError(
          absl::StrCat(JobPrefix(job_id), "a job of this id was made on ", TaskName(),
                       " while its shard came home; it does not replace it"));
    } else {
      // Served here from now on, in place of what this ps held of it, and its record goes.
      from = it->second.moving_from;
      if (it->second.adopting) {
        jobs_.emplace(job_id, it->second.job);
      } else if (home) {
        own->second = it->second.job;
      } else {
        BackupCopy& served = backups_[key];
        served.job = it->second.job;
        served.generation = ++backup_generation_;  // No stream binds to it any more.
        served.streaming = false;
        served.promoted = true;
        served.moving_from = from;
      }
      incoming_.erase(it);
      if (auto moved = replicators_.find(key); moved != replicators_.end()) {
        record = std::move(moved->second);
        replicators_.erase(moved);
      }
    }
  }
  record.reset();
  if (!refused.ok()) {
    LOG(WARNING) << JobPrefix(job_id) << TaskName() << " does not take shard " << shard << ": "
                 << refused.message();
    return AckFor(seq, refused);
  }
  LOG(INFO) << JobPrefix(job_id) << TaskName() << " serves shard " << shard
            << (home ? ", its own, again: moved back from ps:" : ", moved here from ps:") << from
            << " (at version " << binding.job->Stats().version() << ")";
  // Its workers' signs of life went to the ps it came from until now.
  binding.job->RenewLeases();
  if (binding.job->AllWorkersLeft()) {
    ForgetAfterRetention(job_id, binding.job);
  } else {
    WatchLeases(job_id, binding.job);
  }
  return AckFor(seq, ReplicaOutcome());
}

}  // namespace ps
