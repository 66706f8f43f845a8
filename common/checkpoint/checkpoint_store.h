// Where a ps keeps its checkpoints, and the manifests that make them complete (docs/ARCHITECTURE.md
// section 8; docs/checkpoints.md). A job's checkpoints live in one directory per job:
//   <root>/<job_id>/<run_id>-<seq, 6 digits>/shard-<i>-of-<n>.ckpt   each shard's file
//   <root>/<job_id>/<run_id>-<seq, 6 digits>/MANIFEST                 written last
// `root` is the ps's --checkpoint_dir (its own disk, or a file system every ps reaches; every ps
// holds a copy of the manifest). No request names a path: the directories below the root are
// ids validated as names (job, run, sequence number), and a manifest's file names must be the
// ones this store gives, so nothing read or written or deleted lies outside `root/<job_id>`.
// The manifest is a checkpoint file (common/checkpoint/checkpoint_file.h) of one block, the
// serialized CheckpointManifest, naming every shard's file with its size and XXH3-64: a checkpoint
// whose directory has no manifest that verifies is not complete, and a shard file that does not
// match its manifest is never loaded.
#ifndef PS_COMMON_CHECKPOINT_CHECKPOINT_STORE_H_
#define PS_COMMON_CHECKPOINT_CHECKPOINT_STORE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file_system.h"
#include "proto/ps_service.pb.h"
#include "common/checkpoint/checkpoint_file.h"

namespace ps {

// Complete checkpoints kept when the job does not say (CheckpointSpec.keep = 0).
inline constexpr int kDefaultCheckpointsKept = 3;

// Thread-safe (it holds no state beyond its arguments).
class CheckpointStore {
 public:
  // `root`: the ps's --checkpoint_dir ("" when it has none). `fs` is not owned.
  CheckpointStore(FileSystem* fs, std::string root) : fs_(fs), root_(std::move(root)) {}

  FileSystem* fs() const { return fs_; }

  // The directory of `job_id`'s checkpoints under the root: INVALID_ARGUMENT when `job_id` is
  // not an id (common/job/job_schema's ValidateId: no separator, no leading '.'), and
  // FAILED_PRECONDITION, saying how to give one, when this ps has no root.
  absl::StatusOr<std::string> JobDirectory(const std::string& job_id) const;
  // "<run_id>-<seq, 6 digits>".
  static std::string CheckpointName(const std::string& run_id, int64_t seq);
  // OK when `manifest` names itself as this store names checkpoints: valid job and run ids, a
  // sequence number from 1 and the name CheckpointName(run_id, seq). INVALID_ARGUMENT otherwise.
  static absl::Status CheckManifestName(const CheckpointManifest& manifest);

  // Writes shard `ps_index` of `num_ps`'s file of checkpoint `name`; fills the entry's file
  // (relative to `job_dir`), size and checksum. On failure nothing of it is left.
  absl::Status WriteShard(const std::string& job_dir, const std::string& name, int ps_index,
                          int num_ps, const std::vector<CheckpointBlock>& blocks,
                          ShardCheckpoint* entry) const;
  // Writes `manifest` (the checkpoint is then complete), then deletes the checkpoints of the
  // job older than it beyond the newest `keep` complete ones (kDefaultCheckpointsKept when 0),
  // and the incomplete ones older than it. INVALID_ARGUMENT, with nothing written or deleted,
  // when the manifest fails CheckManifestName.
  absl::Status Commit(const std::string& job_dir, const CheckpointManifest& manifest,
                      int keep) const;
  // The job's complete checkpoints, oldest first, and what is wrong with the manifests that
  // do not verify. An empty list when the directory does not exist.
  absl::StatusOr<ListCheckpointsResponse> List(const std::string& job_dir) const;
  // Deletes every checkpoint in `job_dir` (complete or not) and the directory; returns their
  // names, in name order. OK with none when the directory does not exist.
  absl::StatusOr<std::vector<std::string>> DeleteAll(const std::string& job_dir) const;
  // The complete checkpoint `name` of the job in `job_dir`: INVALID_ARGUMENT when `name` is not
  // an id, NOT_FOUND when it has no manifest, DATA_LOSS when its manifest does not verify.
  absl::StatusOr<CheckpointManifest> Manifest(const std::string& job_dir,
                                              const std::string& name) const;
  // Shard `ps_index`'s blocks of the checkpoint `manifest` names: NOT_FOUND when its file is
  // missing, DATA_LOSS when it is not the file the manifest names (size, checksum), does not
  // decode, or the manifest names another file than this store writes for that shard.
  absl::StatusOr<std::vector<CheckpointBlock>> ReadShard(const std::string& job_dir,
                                                         const CheckpointManifest& manifest,
                                                         int ps_index) const;

 private:
  FileSystem* const fs_;
  const std::string root_;
};

// The step each of `num_workers` workers starts at in a run restored from `manifest`: its own
// (ASYNC, SOFTSYNC) where the manifest has one for each worker it lists, and the manifest's
// resume step for each worker it does not (the job grew since, or it lists none). On fewer
// workers than it lists (another cluster), every worker starts at the resume step.
std::vector<int64_t> WorkerResumeSteps(const CheckpointManifest& manifest, int num_workers);

}  // namespace ps

#endif  // PS_COMMON_CHECKPOINT_CHECKPOINT_STORE_H_
