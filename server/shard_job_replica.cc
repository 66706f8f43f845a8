// ShardJob's part in replication (shard_job.h: ReadyPush and ChunkDone are in
// shard_job_chunks.cc): the rejoin a pull would do, and the snapshot a backup starts from.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_file.h"
#include "server/shard_job.h"

namespace ps {

bool ShardJob::IsNewIncarnation(int worker, int incarnation) const {
  if (worker < 0 || worker >= spec().num_workers()) return false;
  absl::MutexLock lock(&mu_);
  return incarnation > incarnation_[worker];
}

absl::Status ShardJob::Rejoin(int worker, int incarnation, int64_t clock) {
  if (worker < 0 || worker >= spec().num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat(JobPrefix(spec().job_id()), "worker ", worker,
                                                   " is out of range: the job has ",
                                                   spec().num_workers(), " workers"));
  }
  absl::MutexLock lock(&mu_);
  return AdoptIncarnationLocked(worker, incarnation, clock);
}

ReplicaInstall ShardJob::ReplicaSnapshot() {
  ReplicaInstall install;
  install.set_job_id(spec().job_id());
  install.set_num_ps(num_ps_);
  install.set_shard(ps_index_);
  install.set_checkpoint(EncodeCheckpointFile(Checkpoint()));
  absl::MutexLock lock(&mu_);
  for (int incarnation : incarnation_) install.add_incarnations(incarnation);
  for (int64_t steps : steps_pushed_) install.add_steps_pushed(steps);
  if (handout_ != nullptr) handout_->CopyTo(install.mutable_handout());
  return install;
}

absl::StatusOr<std::unique_ptr<ShardJob>> ShardJob::FromReplicaSnapshot(
    const ReplicaInstall& install, Clock* clock) {
  const std::string name = absl::StrCat("the install of job \"", install.job_id(), "\"'s shard ",
                                        install.shard());
  absl::StatusOr<std::vector<CheckpointBlock>> blocks =
      DecodeCheckpointFile(install.checkpoint(), name);
  if (!blocks.ok()) return blocks.status();
  absl::StatusOr<std::unique_ptr<ShardJob>> job =
      Restore(*blocks, install.num_ps(), install.shard(), clock);
  if (!job.ok()) return job.status();
  const int workers = (*job)->spec().num_workers();
  if (install.incarnations_size() != workers || install.steps_pushed_size() != workers) {
    return absl::DataLossError(absl::StrCat(name, " has ", install.incarnations_size(),
                                            " incarnations and ", install.steps_pushed_size(),
                                            " step counts for ", workers, " workers"));
  }
  if ((*job)->spec().job_id() != install.job_id()) {
    return absl::DataLossError(absl::StrCat(name, " holds job \"", (*job)->spec().job_id(), "\""));
  }
  absl::MutexLock lock(&(*job)->mu_);
  (*job)->incarnation_.assign(install.incarnations().begin(), install.incarnations().end());
  (*job)->steps_pushed_.assign(install.steps_pushed().begin(), install.steps_pushed().end());
  if ((*job)->handout_ != nullptr) {
    absl::Status handout = (*job)->handout_->CopyFrom(install.handout());
    if (!handout.ok()) return absl::DataLossError(absl::StrCat(name, ": ", handout.message()));
  }
  return job;
}

}  // namespace ps
