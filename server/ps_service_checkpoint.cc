// ParameterService's checkpoint RPCs (ps_service.proto; docs/checkpoints.md): arming a shard's
// checkpoint and writing its file in the background, committing a manifest, listing a job's
// complete checkpoints, and restoring a job from one.
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/job_schema.h"
#include "common/peer_identity.h"
#include "server/ps_service.h"

namespace ps {
namespace {

// Where a run restored from `manifest` starts: each worker at its own step when the manifest
// has one per worker of the run, else every one at the resume step.
ShardJob::ResumePoint ResumePointOf(const CheckpointManifest& manifest, int num_workers) {
  ShardJob::ResumePoint at{manifest.name(), manifest.resume_step(), {}};
  if (manifest.worker_resume_steps_size() == num_workers) {
    at.worker_steps.assign(manifest.worker_resume_steps().begin(),
                           manifest.worker_resume_steps().end());
  }
  return at;
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
  absl::StatusOr<std::shared_ptr<ShardJob>> job = FindJob(request->job_id());
  if (job.ok()) {
    absl::Status allowed =
        RequireOwner(peer, (*job)->spec().owner(), request->job_id(), "checkpoint");
    if (!allowed.ok()) job = allowed;
  }
  absl::StatusOr<std::string> job_dir =
      job.ok() ? checkpoints_.JobDirectory(request->dir(), request->job_id()) : job.status();
  if (!job_dir.ok()) return Answer(context, &slot, job_dir.status());
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
  const absl::Time start = absl::Now();
  absl::Status status = checkpoints_.WriteShard(job_dir, name, options_.ps_index, options_.num_ps,
                                                taken->blocks, &entry);
  taken->blocks.clear();  // Lets go of the values it held.
  entry.set_written_at_ms(absl::ToUnixMillis(absl::Now()));
  entry.set_write_ms(absl::ToInt64Milliseconds(absl::Now() - start));
  if (status.ok()) {
    LOG(INFO) << "checkpoint " << name << ": wrote " << entry.file() << " (" << entry.bytes()
              << " bytes) in " << absl::Now() - start << " on " << TaskName();
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
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "CommitCheckpoint", RequireUser, &slot)) {
    return refused;
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto held = std::make_shared<RequestsInFlight::Slot>(std::move(slot));
  io_thread_.Schedule([this, reactor, request, held] {
    const CheckpointManifest& manifest = request->manifest();
    absl::Status status = ValidateId(manifest.job_id(), "manifest.job_id");
    if (status.ok()) status = ValidateId(manifest.run_id(), "manifest.run_id");
    absl::StatusOr<std::string> job_dir =
        status.ok() ? checkpoints_.JobDirectory(request->dir(), manifest.job_id()) : status;
    if (job_dir.ok()) status = checkpoints_.Commit(*job_dir, manifest, request->keep());
    if (!job_dir.ok()) status = job_dir.status();
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
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "ListCheckpoints", RequireMember, &slot)) {
    return refused;
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto held = std::make_shared<RequestsInFlight::Slot>(std::move(slot));
  io_thread_.Schedule([this, reactor, request, response, held] {
    absl::Status status = ValidateId(request->job_id(), "job_id");
    absl::StatusOr<std::string> job_dir =
        status.ok() ? checkpoints_.JobDirectory(request->dir(), request->job_id()) : status;
    absl::StatusOr<ListCheckpointsResponse> listed =
        job_dir.ok() ? checkpoints_.List(*job_dir) : job_dir.status();
    if (listed.ok()) *response = *std::move(listed);
    Finish(reactor, held.get(), listed.status());
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
  io_thread_.Schedule(
      [this, reactor, owned, held] { Finish(reactor, held.get(), DoRestoreJob(*owned)); });
  return reactor;
}

absl::Status ParameterService::DoRestoreJob(const RestoreJobRequest& request) {
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
  const CheckpointManifest& manifest = request.manifest();
  if (manifest.job_id() != id) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint ", manifest.name(), " is of job \"",
                                                   manifest.job_id(), "\", not \"", id, "\""));
  }
  absl::StatusOr<std::string> job_dir = checkpoints_.JobDirectory(request.dir(), id);
  if (!job_dir.ok()) return job_dir.status();
  absl::StatusOr<std::unique_ptr<Reservation>> reserved = Reserve(request.spec());
  if (!reserved.ok()) return reserved.status();
  absl::StatusOr<std::vector<CheckpointBlock>> blocks =
      checkpoints_.ReadShard(*job_dir, manifest, options_.ps_index);
  if (!blocks.ok()) return blocks.status();
  absl::StatusOr<std::unique_ptr<ShardJob>> resumed =
      ShardJob::Resume(*blocks, request.spec(), options_.num_ps, options_.ps_index,
                       ResumePointOf(manifest, request.spec().num_workers()));
  if (!resumed.ok()) return resumed.status();
  std::shared_ptr<ShardJob> job = *std::move(resumed);
  {
    absl::MutexLock lock(&mu_);
    if (!jobs_.emplace(id, job).second) {
      return absl::AlreadyExistsError(
          absl::StrCat("job \"", id, "\" was created on ", TaskName(), " while it was restored"));
    }
  }
  WatchLeases(id, job);
  LOG(INFO) << "job " << id << ": run " << request.spec().run_id() << " restored from checkpoint "
            << manifest.name() << " at step " << manifest.resume_step() << " on " << TaskName();
  return absl::OkStatus();
}

}  // namespace ps
