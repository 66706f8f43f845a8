// ParameterService's checkpoint RPCs (ps_service.proto; docs/checkpoints.md): arming a shard's
// checkpoint and writing its file in the background, committing a manifest, listing a job's
// complete checkpoints, and restoring a job from one.
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint_store.h"
#include "common/net/grpc_status.h"
#include "common/job/job_schema.h"
#include "common/security/peer_identity.h"
#include "server/checkpoint_reshard.h"
#include "server/ps_service.h"

namespace ps {
namespace {

// Where a run of `num_workers` restored from `manifest` starts (WorkerResumeSteps).
ShardJob::ResumePoint ResumePointOf(const CheckpointManifest& manifest, int num_workers) {
  return {manifest.name(), manifest.resume_step(), WorkerResumeSteps(manifest, num_workers)};
}

}  // namespace

grpc::ServerUnaryReactor* ParameterService::ArmCheckpoint(grpc::CallbackServerContext* context,
                                                          const ArmCheckpointRequest* request,
                                                          ArmCheckpointResponse* /*response*/) {
  Peer peer;
  RequestsInFlight::Slot slot;
  // Who may arm a checkpoint depends on the job (its owner): checked below.
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "ArmCheckpoint", /*rule=*/nullptr, &slot, &peer)) {
    return refused;
  }
  absl::StatusOr<std::shared_ptr<ShardJob>> job =
      FindJobFor(peer, request->job_id(), JobAccess::kManage, "ArmCheckpoint");
  absl::StatusOr<std::string> job_dir =
      job.ok() ? checkpoints_.JobDirectory(request->job_id()) : job.status();
  if (!job_dir.ok()) return Answer(context, &slot, job_dir.status());
  if (request->seq() < 1) {
    return Answer(context, &slot,
                  absl::InvalidArgumentError(absl::StrCat(
                      "seq is ", request->seq(), ": checkpoints are numbered from 1")));
  }
  const std::string name = CheckpointStore::CheckpointName(request->run_id(), request->seq());
  absl::Status armed = (*job)->ArmCheckpoint(
      request->run_id(), request->seq(), request->at_clock(),
      [this, weak = std::weak_ptr<ShardJob>(*job), job_dir = *job_dir,
       name](ShardJob::TakenCheckpoint taken) {
        auto held = std::make_shared<ShardJob::TakenCheckpoint>(std::move(taken));
        io_thread_.Schedule(
            [this, weak, job_dir, name, held] { WriteCheckpoint(weak, job_dir, name, held); });
      });
  return Answer(context, &slot, armed);
}

void ParameterService::WriteCheckpoint(const std::weak_ptr<ShardJob>& job,
                                       const std::string& job_dir, const std::string& name,
                                       const std::shared_ptr<ShardJob::TakenCheckpoint>& taken) {
  ShardCheckpoint entry = taken->entry;
  const absl::Time start = options_.clock->Now();
  absl::Status status = checkpoints_.WriteShard(job_dir, name, options_.ps_index, options_.num_ps,
                                                taken->blocks, &entry);
  taken->blocks.clear();  // Lets go of the values it held.
  entry.set_written_at_ms(absl::ToUnixMillis(options_.clock->Now()));
  entry.set_write_ms(absl::ToInt64Milliseconds(options_.clock->Now() - start));
  if (status.ok()) {
    LOG(INFO) << "checkpoint " << name << ": wrote " << entry.file() << " (" << entry.bytes()
              << " bytes) in " << options_.clock->Now() - start << " on " << TaskName();
  } else {
    entry.set_error(absl::StrCat(TaskName(), " could not write checkpoint ", name, ": ",
                                 status.message(), "; it is abandoned, training goes on"));
    LOG(WARNING) << entry.error();
  }
  if (std::shared_ptr<ShardJob> still = job.lock()) still->CheckpointWritten(entry);
}

grpc::ServerUnaryReactor* ParameterService::CommitCheckpoint(
    grpc::CallbackServerContext* context, const CommitCheckpointRequest* request,
    CommitCheckpointResponse* /*response*/) {
  Peer peer;
  RequestsInFlight::Slot slot;
  // Who may commit depends on the job (its owner): checked below, before anything is written.
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "CommitCheckpoint", RequireUser, &slot, &peer)) {
    return refused;
  }
  const CheckpointManifest& manifest = request->manifest();
  absl::Status allowed = CheckpointStore::CheckManifestName(manifest);
  absl::StatusOr<std::shared_ptr<ShardJob>> job =
      allowed.ok() ? FindJobFor(peer, manifest.job_id(), JobAccess::kManage, "CommitCheckpoint")
                   : allowed;
  if (job.ok() && (*job)->spec().run_id() != manifest.run_id()) {
    allowed = absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", manifest.name(), " is of run ", manifest.run_id(), ", and job \"",
        manifest.job_id(), "\" on ", TaskName(), " is run ", (*job)->spec().run_id(),
        ": only the running run's checkpoints are committed"));
  }
  if (!job.ok()) allowed = job.status();
  if (allowed.ok() && (manifest.num_ps() != options_.num_ps ||
                       manifest.shards_size() != options_.num_ps)) {
    allowed = absl::InvalidArgumentError(absl::StrCat(
        "checkpoint ", manifest.name(), "'s manifest is for ", manifest.num_ps(), " ps with ",
        manifest.shards_size(), " shard files; ", TaskName(), " is one of ", options_.num_ps));
  }
  for (int i = 0; allowed.ok() && i < manifest.shards_size(); ++i) {
    if (manifest.shards(i).ps_index() != i) {
      allowed = absl::InvalidArgumentError(absl::StrCat(
          "checkpoint ", manifest.name(), "'s manifest lists ps:", manifest.shards(i).ps_index(),
          "'s file as shard ", i, "'s: one entry per ps, in task order"));
    }
  }
  if (!allowed.ok()) return Answer(context, &slot, allowed);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto held = std::make_shared<RequestsInFlight::Slot>(std::move(slot));
  io_thread_.Schedule([this, reactor, request, held] {
    const CheckpointManifest& manifest = request->manifest();
    absl::StatusOr<std::string> job_dir = checkpoints_.JobDirectory(manifest.job_id());
    absl::Status status =
        job_dir.ok() ? checkpoints_.Commit(*job_dir, manifest, request->keep()) : job_dir.status();
    if (status.ok()) {
      LOG(INFO) << "checkpoint " << manifest.name() << " of job " << manifest.job_id()
                << " is complete (resume step " << manifest.resume_step() << ")";
    } else {
      LOG(WARNING) << "checkpoint " << manifest.name() << " of job " << manifest.job_id()
                   << ": its manifest was not written on " << TaskName() << ": " << status;
    }
    Finish(reactor, held.get(), status);
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterService::ListCheckpoints(grpc::CallbackServerContext* context,
                                                            const ListCheckpointsRequest* request,
                                                            ListCheckpointsResponse* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "ListCheckpoints", RequireUser, &slot, &peer)) {
    return refused;
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto held = std::make_shared<RequestsInFlight::Slot>(std::move(slot));
  io_thread_.Schedule([this, reactor, request, response, held, peer] {
    absl::StatusOr<std::string> job_dir = checkpoints_.JobDirectory(request->job_id());
    absl::StatusOr<ListCheckpointsResponse> listed =
        job_dir.ok() ? checkpoints_.List(*job_dir) : job_dir.status();
    if (listed.ok()) {
      // Only the checkpoints of the caller's own runs of the job.
      response->set_dir(listed->dir());
      *response->mutable_problems() = listed->problems();
      for (CheckpointManifest& manifest : *listed->mutable_manifests()) {
        if (RequireOwner(peer, manifest.parameters().owner(), manifest.job_id(), "list").ok()) {
          *response->add_manifests() = std::move(manifest);
        }
      }
    }
    Finish(reactor, held.get(), listed.status());
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterService::DeleteCheckpoints(
    grpc::CallbackServerContext* context, const DeleteCheckpointsRequest* request,
    DeleteCheckpointsResponse* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "DeleteCheckpoints", RequireUser, &slot, &peer)) {
    return refused;
  }
  if (FindJob(request->job_id()).ok()) {
    return Answer(context, &slot,
                  absl::FailedPreconditionError(absl::StrCat(
                      "job \"", request->job_id(), "\" is on ", TaskName(),
                      ": delete the job before its checkpoints")));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto held = std::make_shared<RequestsInFlight::Slot>(std::move(slot));
  io_thread_.Schedule([this, reactor, request, response, held, peer] {
    absl::StatusOr<std::string> job_dir = checkpoints_.JobDirectory(request->job_id());
    absl::StatusOr<ListCheckpointsResponse> listed =
        job_dir.ok() ? checkpoints_.List(*job_dir) : job_dir.status();
    absl::Status status = listed.status();
    for (int i = 0; status.ok() && i < listed->manifests_size(); ++i) {
      const CheckpointManifest& manifest = listed->manifests(i);
      status = RequireOwner(peer, manifest.parameters().owner(), manifest.job_id(),
                            "delete the checkpoints of");
    }
    absl::StatusOr<std::vector<std::string>> deleted =
        status.ok() ? checkpoints_.DeleteAll(*job_dir) : status;
    if (deleted.ok()) {
      for (const std::string& name : *deleted) response->add_deleted(name);
      if (!deleted->empty()) {
        LOG(INFO) << "job " << request->job_id() << ": deleted its " << deleted->size()
                  << " checkpoint(s) for " << peer.Describe() << " on " << TaskName();
      }
    }
    Finish(reactor, held.get(), deleted.status());
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterService::RestoreJob(grpc::CallbackServerContext* context,
                                                       const RestoreJobRequest* request,
                                                       RestoreJobResponse* /*response*/) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "RestoreJob", RequireUser, &slot, &peer)) {
    return refused;
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The restored run belongs to whoever restores it (when the cluster knows who that is).
  auto owned = std::make_shared<RestoreJobRequest>(*request);
  if (peer.role != Peer::Role::kUnauthenticated) owned->mutable_spec()->set_owner(peer.name);
  auto held = std::make_shared<RequestsInFlight::Slot>(std::move(slot));
  io_thread_.Schedule([this, reactor, owned, held, peer] {
    Finish(reactor, held.get(), DoRestoreJob(*owned, peer));
  });
  return reactor;
}

absl::StatusOr<std::vector<CheckpointBlock>> ParameterService::ReshardedBlocks(
    const std::string& job_dir, const CheckpointManifest& manifest) {
  LOG(INFO) << "checkpoint " << manifest.name() << " was taken on " << manifest.num_ps()
            << " ps: placing its slices and rows again for " << TaskName() << " of "
            << options_.num_ps;
  return ReshardCheckpoint(
      manifest, options_.num_ps, options_.ps_index,
      [&](int index) -> absl::StatusOr<std::vector<CheckpointBlock>> {
        absl::StatusOr<std::vector<CheckpointBlock>> read =
            checkpoints_.ReadShard(job_dir, manifest, index);
        if (!absl::IsNotFound(read.status())) return read;
        // Nothing is damaged, and an older checkpoint would lack its files as well.
        return absl::FailedPreconditionError(absl::StrCat(
            read.status().message(), "; checkpoint ", manifest.name(), " was taken on ",
            manifest.num_ps(), " ps and this cluster has ", options_.num_ps,
            ": resuming on another number of ps reads every shard's file, so give every ps the "
            "same --checkpoint_dir (a file system they all mount), or copy the checkpoint's "
            "directory from each ps's into every ps's"));
      });
}

absl::Status ParameterService::DoRestoreJob(const RestoreJobRequest& request, const Peer& peer) {
  absl::Status status = CheckTask(request.num_ps(), request.ps_index());
  if (!status.ok()) return status;
  const std::string& id = request.spec().job_id();
  status = ValidateParameterSpec(request.spec());
  if (!status.ok()) return status;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError(TaskName() + " is shutting down");
    if (jobs_.count(id) > 0) {
      return absl::AlreadyExistsError(absl::StrCat("job \"", id, "\" already exists on ",
                                                   TaskName(), "; delete it before restoring it"));
    }
  }
  absl::StatusOr<std::string> job_dir = checkpoints_.JobDirectory(id);
  if (!job_dir.ok()) return job_dir.status();
  // The manifest this ps wrote, never one a caller sends: it names the files read.
  absl::StatusOr<CheckpointManifest> found = checkpoints_.Manifest(*job_dir, request.checkpoint());
  if (!found.ok()) return found.status();
  const CheckpointManifest& manifest = *found;
  if (manifest.job_id() != id) {
    return absl::DataLossError(absl::StrCat("checkpoint ", manifest.name(), " in ", *job_dir,
                                            " is of job \"", manifest.job_id(), "\", not \"", id,
                                            "\""));
  }
  status = RequireOwner(peer, manifest.parameters().owner(), id, "restore");
  if (!status.ok()) return status;
  status = CheckReplicas(request.spec());
  if (!status.ok()) return status;
  absl::StatusOr<std::unique_ptr<Reservation>> reserved = Reserve(request.spec());
  if (!reserved.ok()) return reserved.status();
  // The manifest is the ps's own file, but its contents came from the job's owner (psctl's
  // CommitCheckpoint): before it decides what is read and allocated, it must be of this job,
  // whose size Reserve has bounded, and name one file per ps of its cluster.
  status = ShardJob::CheckResumable(manifest.parameters(), request.spec());
  if (!status.ok()) return status;
  if (manifest.num_ps() < 1 || manifest.shards_size() != manifest.num_ps()) {
    return absl::DataLossError(absl::StrCat("checkpoint ", manifest.name(), " in ", *job_dir,
                                            " names ", manifest.shards_size(),
                                            " shard files for ", manifest.num_ps(), " ps"));
  }
  absl::StatusOr<std::vector<CheckpointBlock>> blocks =
      manifest.num_ps() == options_.num_ps
          ? checkpoints_.ReadShard(*job_dir, manifest, options_.ps_index)
          : ReshardedBlocks(*job_dir, manifest);
  if (!blocks.ok()) return blocks.status();
  absl::StatusOr<std::unique_ptr<ShardJob>> resumed =
      ShardJob::Resume(*blocks, request.spec(), options_.num_ps, options_.ps_index,
                       ResumePointOf(manifest, request.spec().num_workers()), options_.clock);
  if (!resumed.ok()) return resumed.status();
  std::shared_ptr<ShardJob> job = *std::move(resumed);
  job->UseByteBudget(byte_budget_);
  {
    absl::MutexLock lock(&mu_);
    if (!jobs_.emplace(id, job).second) {
      return absl::AlreadyExistsError(
          absl::StrCat("job \"", id, "\" was created on ", TaskName(), " while it was restored"));
    }
    // Under the lock that makes the job found, so that every change to it is replicated.
    if (std::shared_ptr<ShardReplicator> replicator =
            MakeReplicatorLocked(job, (options_.ps_index + 1) % options_.num_ps)) {
      replicators_[{id, options_.ps_index}] = std::move(replicator);
    }
  }
  WatchLeases(id, job);
  LOG(INFO) << "job " << id << ": run " << request.spec().run_id() << " restored from checkpoint "
            << manifest.name() << " at step " << manifest.resume_step() << " on " << TaskName();
  return absl::OkStatus();
}

}  // namespace ps
