// psctl export: the model of a complete checkpoint as one .npy file per variable and one
// safetensors file (model.safetensors; ctl/export/safetensors.h), both readable by numpy. The
// shards' files are read from the checkpoint directories given (each ps's --checkpoint_dir,
// copied to this host, or the one directory they share), verified against the manifest.
#ifndef PS_CTL_EXPORT_CHECKPOINT_EXPORT_H_
#define PS_CTL_EXPORT_CHECKPOINT_EXPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps_service.pb.h"

namespace ps {

struct ExportOptions {
  // Directories holding the job's checkpoints (<dir>/<job_id>/...). A directory with ps-<i>
  // subdirectories (psctl local's layout) stands for those.
  std::vector<std::string> checkpoint_dirs;
  std::string job_id;
  std::string checkpoint;  // A checkpoint's name; empty: the newest complete one.
  std::string out_dir;     // Created if missing.
};

// Writes the checkpoint's variables to options.out_dir ("<name>.npy", '/' in names as '_', and
// model.safetensors) and returns its manifest. NOT_FOUND when the job has no such complete
// checkpoint, or a shard's file is in none of the directories; DATA_LOSS when a file is not
// the one its manifest names.
absl::StatusOr<CheckpointManifest> ExportCheckpoint(const ExportOptions& options);

}  // namespace ps

#endif  // PS_CTL_EXPORT_CHECKPOINT_EXPORT_H_
