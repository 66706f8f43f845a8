// ParameterService's live moves (docs/replication.md "A live move to another ps"): a shard of
// a job without replicas goes to another ps while its workers train on, by the machinery of a
// replicated shard's move home (server/shard_replicator.h): a copy, the changes after it in
// order, then a hand-over; from then on the ps it came from answers every call of the shard
// with where it went (WithShardMovedTo).
#include <utility>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "common/net/grpc_status.h"
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
  if (request.shard() != options_.ps_index) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, TaskName(), " moves only its own shard, ", options_.ps_index, ": ask ps:",
        request.shard(), " to move shard ", request.shard()));
  }
  if (request.to_ps() < 0 || request.to_ps() >= options_.num_ps ||
      request.to_ps() == options_.ps_index) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "to_ps is ", request.to_ps(), ": name another ps task of the ", options_.num_ps,
        " in the cluster"));
  }
  absl::StatusOr<std::shared_ptr<ShardJob>> found =
      FindJobFor(peer, request.job_id(), JobAccess::kManage, "MoveShard");
  if (!found.ok()) return found.status();
  const std::shared_ptr<ShardJob> job = *std::move(found);
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
  const ShardKey key{request.job_id(), options_.ps_index};
  absl::WriterMutexLock gate(&move_gate_);  // No change at once while the replicator is made.
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError(TaskName() + " is shutting down");
  if (auto it = jobs_.find(request.job_id()); it == jobs_.end() || it->second != job) {
    return absl::NotFoundError(absl::StrCat(prefix, "the job was deleted from ", TaskName(),
                                            " meanwhile"));
  }
  if (replicators_.count(key) > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "shard ", options_.ps_index, " is moving or moved already"));
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
  LOG(INFO) << prefix << TaskName() << " moves shard " << options_.ps_index << " (at version "
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
    // Its inputs not applied yet are answered UNAVAILABLE: their callers make them again,
    // applied here at once. Then the caller hears why: a move asked again now starts anew.
    stopped.reset();
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
      install.shard() == options_.ps_index || install.moving_from() != install.shard()) {
    return absl::FailedPreconditionError(absl::StrCat(
        TaskName(), " of ", n, " takes only a shard moving from its own ps (shard ",
        install.shard(), " of ", install.num_ps(), " from ps:", install.moving_from(),
        "); the ps tasks must use the same ClusterSpec"));
  }
  return absl::OkStatus();
}

ReplicaAck ParameterService::TakeMovedShard(const BackupBinding& binding, int64_t seq) {
  const std::string& job_id = binding.job_id;
  const int shard = binding.job->ps_index();
  absl::Status refused;
  int from = -1;
  {
    absl::MutexLock lock(&mu_);
    auto it = backups_.find({job_id, shard});
    if (shutting_down_) {
      refused = absl::UnavailableError(TaskName() + " is shutting down");
    } else if (it == backups_.end() || it->second.generation != binding.generation) {
      refused = absl::FailedPreconditionError(absl::StrCat(
          JobPrefix(job_id), TaskName(), " no longer holds the copy of shard ", shard,
          " that this stream moved here"));
    } else {
      from = it->second.moving_from;
      it->second.promoted = true;
      it->second.generation = ++backup_generation_;  // No stream binds to it any more.
    }
  }
  if (!refused.ok()) {
    LOG(WARNING) << JobPrefix(job_id) << TaskName() << " does not take shard " << shard
                 << ": " << refused.message();
    return AckFor(seq, refused);
  }
  LOG(INFO) << JobPrefix(job_id) << TaskName() << " serves shard " << shard
            << ", moved here from ps:" << from << " (at version "
            << binding.job->Stats().version() << ")";
  // Its workers' signs of life went to the ps it came from until now.
  binding.job->RenewLeases();
  WatchLeases(job_id, binding.job);
  return AckFor(seq, ReplicaOutcome());
}

}  // namespace ps
