// psctl submit --resume: a new run of a stopped or failed job from its latest complete
// checkpoint (docs/checkpoints.md), on the same cluster or a fresh one, with as many ps or
// another number of them.
#ifndef PS_CTL_JOB_CHECKPOINT_RESTORE_H_
#define PS_CTL_JOB_CHECKPOINT_RESTORE_H_

#include <cstdint>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ctl/cluster/cluster_client.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"

namespace ps {

// Which checkpoints of a job a run may restore (shared/DESIGN.md section 8: a recovery reads
// only its own run). A submission's runs are its first run and each run a recovery made of it
// (a recovered run gets a new run id); it may restore their checkpoints and the one it was
// resumed from, never another submission's, so that a run replaced or failed before can never
// be adopted. `psctl submit --resume` restores any run's (`any`): the user asked for it.
struct RestorableCheckpoints {
  bool any = false;
  std::set<std::string> run_ids;  // This submission's runs.
  std::string resumed_from;       // The checkpoint it was resumed from; empty: none.

  bool Accepts(const CheckpointManifest& manifest) const;
};

// Creates run `spec` (its run_id set; the job otherwise as it was submitted) on every ps from
// the job's newest complete checkpoint that `restorable` accepts: one every ps lists (its
// manifest written there) and whose shard files all verify. A checkpoint that does not (a file
// missing, damaged or changed) is undone on the shards that took it, said on `out`, and the
// previous complete one is tried. Returns the manifest restored; NOT_FOUND when the job has no
// complete checkpoint it may restore (saying how many of other runs were passed over),
// DATA_LOSS when none of them restores, FAILED_PRECONDITION when the cluster has another number
// of ps, UNAVAILABLE at once when a ps cannot be reached (the checkpoint undone, not passed
// over: a recovery tries it again). REQUIRES: the job is on no ps.
absl::StatusOr<CheckpointManifest> RestoreLatestCheckpoint(const ClusterClient& client,
                                                           const JobSpec& spec,
                                                           const RestorableCheckpoints& restorable,
                                                           std::ostream& out);

// Deletes every checkpoint of `job_id` on every ps (psctl submit --replace), saying on `out`
// which; the job must be on no ps. PERMISSION_DENIED when a ps holds checkpoints of the job
// that another user owns (nothing is deleted there).
absl::Status DeleteCheckpointsEverywhere(const ClusterClient& client, const std::string& job_id,
                                         std::ostream& out);

}  // namespace ps

#endif  // PS_CTL_JOB_CHECKPOINT_RESTORE_H_
