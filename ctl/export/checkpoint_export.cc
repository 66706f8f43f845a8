#include "ctl/export/checkpoint_export.h"

#include <cstring>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/checkpoint/checkpoint_store.h"
#include "common/file_system.h"
#include "ctl/export/npy.h"
#include "common/job/partitioner.h"
#include "ctl/export/safetensors.h"
#include "common/checkpoint/shard_checkpoint.h"

namespace ps {
namespace {

// The job directories to look in: each given directory's, or its ps-<i> subdirectories'.
std::vector<std::string> JobDirectories(FileSystem* fs, const ExportOptions& options) {
  std::vector<std::string> dirs;
  for (const std::string& root : options.checkpoint_dirs) {
    absl::StatusOr<std::vector<std::string>> names = fs->ListDirectory(root);
    bool per_ps = false;
    if (names.ok()) {
      for (const std::string& name : *names) {
        if (name.rfind("ps-", 0) == 0) {
          dirs.push_back(absl::StrCat(root, "/", name, "/", options.job_id));
          per_ps = true;
        }
      }
    }
    if (!per_ps) dirs.push_back(absl::StrCat(root, "/", options.job_id));
  }
  return dirs;
}

// The checkpoint to export: the one named, or the newest complete one found.
absl::StatusOr<CheckpointManifest> FindManifest(const CheckpointStore& store,
                                                const std::vector<std::string>& dirs,
                                                const ExportOptions& options) {
  std::optional<CheckpointManifest> found;
  for (const std::string& dir : dirs) {
    absl::StatusOr<ListCheckpointsResponse> listed = store.List(dir);
    if (!listed.ok()) continue;
    for (const CheckpointManifest& manifest : listed->manifests()) {
      const bool named = manifest.name() == options.checkpoint;
      if (named || (options.checkpoint.empty() &&
                    (!found || manifest.written_at_ms() > found->written_at_ms()))) {
        found = manifest;
      }
    }
  }
  if (!found) {
    return absl::NotFoundError(absl::StrCat(
        "no complete checkpoint ", options.checkpoint.empty() ? "" : options.checkpoint + " ",
        "of job \"", options.job_id, "\" in ", absl::StrJoin(dirs, ", "),
        " (a checkpoint is complete once its MANIFEST is written)"));
  }
  return *found;
}

// Shard `ps`'s blocks, from whichever directory holds its file.
absl::StatusOr<std::vector<CheckpointBlock>> ReadShardAnywhere(
    const CheckpointStore& store, const std::vector<std::string>& dirs,
    const CheckpointManifest& manifest, int ps) {
  for (const std::string& dir : dirs) {
    absl::StatusOr<std::vector<CheckpointBlock>> blocks = store.ReadShard(dir, manifest, ps);
    if (!absl::IsNotFound(blocks.status())) return blocks;
  }
  return absl::NotFoundError(absl::StrCat(
      "ps:", ps, "'s file of checkpoint ", manifest.name(), " is in none of ",
      absl::StrJoin(dirs, ", "), ": copy it from that ps's --checkpoint_dir"));
}

}  // namespace

absl::StatusOr<CheckpointManifest> ExportCheckpoint(const ExportOptions& options) {
  FileSystem* fs = FileSystem::Default();
  const CheckpointStore store(fs, "");
  const std::vector<std::string> dirs = JobDirectories(fs, options);
  absl::StatusOr<CheckpointManifest> manifest = FindManifest(store, dirs, options);
  if (!manifest.ok()) return manifest.status();
  const ParameterSpec& spec = manifest->parameters();
  absl::StatusOr<Placement> placement = PlaceVariables(spec, manifest->num_ps());
  if (!placement.ok()) return placement.status();
  std::map<std::string, std::vector<float>> values;
  for (const VariableDef& variable : spec.variables()) {
    int64_t count = 1;
    for (int64_t dimension : variable.shape()) count *= dimension;
    values[variable.name()].resize(count);
  }
  for (int ps = 0; ps < manifest->num_ps(); ++ps) {
    absl::StatusOr<std::vector<CheckpointBlock>> blocks =
        ReadShardAnywhere(store, dirs, *manifest, ps);
    if (!blocks.ok()) return blocks.status();
    const std::vector<int> slices = placement->SlicesOn(ps);
    if (blocks->size() < 2 + slices.size()) {
      return absl::DataLossError(absl::StrCat("ps:", ps, "'s file of checkpoint ",
                                              manifest->name(), " is not of the job's placement"));
    }
    for (size_t i = 0; i < slices.size(); ++i) {
      const SlicePlacement& slice = placement->slices[slices[i]];
      const absl::string_view bytes = (*blocks)[1 + i].bytes();
      if ((*blocks)[1 + i].tag != kValuesBlock ||
          bytes.size() != static_cast<size_t>(slice.num_bytes())) {
        return absl::DataLossError(absl::StrCat("ps:", ps, "'s values of ", slice.variable,
                                                " in checkpoint ", manifest->name(),
                                                " are not its size"));
      }
      std::memcpy(values[slice.variable].data() + slice.row_begin * slice.row_size, bytes.data(),
                  bytes.size());
    }
  }
  absl::Status status = fs->CreateDirectories(options.out_dir);
  std::vector<SafetensorsTensor> tensors;
  for (const VariableDef& variable : spec.variables()) {
    std::vector<int64_t> shape(variable.shape().begin(), variable.shape().end());
    const std::vector<float>& data = values[variable.name()];
    if (status.ok()) {
      status = WriteNpy(absl::StrCat(options.out_dir, "/",
                                     absl::StrReplaceAll(variable.name(), {{"/", "_"}}), ".npy"),
                        shape, data, fs);
    }
    tensors.push_back({variable.name(), shape, data});
  }
  if (status.ok()) {
    status = WriteSafetensors(options.out_dir + "/model.safetensors", tensors,
                              {{"job_id", manifest->job_id()},
                               {"run_id", manifest->run_id()},
                               {"checkpoint", manifest->name()},
                               {"resume_step", absl::StrCat(manifest->resume_step())}},
                              fs);
  }
  if (!status.ok()) return status;
  return manifest;
}

}  // namespace ps
