// psctl submit --resume: a new run of a stopped or failed job from its latest complete
// checkpoint (docs/checkpoints.md), on the same cluster or a fresh one with as many ps.
#ifndef PS_CTL_CHECKPOINT_RESTORE_H_
#define PS_CTL_CHECKPOINT_RESTORE_H_

#include <cstdint>
#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "ctl/cluster_client.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"

namespace ps {

// Creates run `spec` (its run_id set; the job otherwise as it was submitted) on every ps from
// the job's newest complete checkpoint: one every ps lists (its manifest written there) and
// whose shard files all verify. A checkpoint that does not (a file missing, damaged or changed)
// is undone on the shards that took it, said on `out`, and the previous complete one is tried.
// Returns the manifest restored; NOT_FOUND when the job has no complete checkpoint, DATA_LOSS
// when none of them restores, FAILED_PRECONDITION when the cluster has another number of ps.
// REQUIRES: the job is on no ps.
absl::StatusOr<CheckpointManifest> RestoreLatestCheckpoint(const ClusterClient& client,
                                                           const JobSpec& spec,
                                                           std::ostream& out);

// The step each of `num_workers` workers starts at in a run restored from `manifest`: its own
// (ASYNC, SOFTSYNC) when the manifest has one per worker, else the manifest's resume step.
std::vector<int64_t> WorkerResumeSteps(const CheckpointManifest& manifest, int num_workers);

}  // namespace ps

#endif  // PS_CTL_CHECKPOINT_RESTORE_H_
