#include "common/checkpoint/checkpoint_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/job/job_schema.h"

namespace ps {
namespace {

constexpr char kManifestFile[] = "MANIFEST";
constexpr uint32_t kManifestBlock = 100;

std::string ShardFileName(int ps_index, int num_ps) {
  return absl::StrCat("shard-", ps_index, "-of-", num_ps, ".ckpt");
}

// The manifest in directory `name` of `job_dir`, verified.
absl::StatusOr<CheckpointManifest> ReadManifest(FileSystem* fs, const std::string& job_dir,
                                                const std::string& name) {
  const std::string path = absl::StrCat(job_dir, "/", name, "/", kManifestFile);
  absl::StatusOr<std::vector<CheckpointBlock>> blocks = ReadCheckpointFile(fs, path);
  if (!blocks.ok()) return blocks.status();
  CheckpointManifest manifest;
  if (blocks->size() != 1 || (*blocks)[0].tag != kManifestBlock ||
      !manifest.ParseFromString((*blocks)[0].payload) || manifest.name() != name) {
    return absl::DataLossError(absl::StrCat(path, ": not a manifest of checkpoint ", name));
  }
  return manifest;
}

}  // namespace

absl::StatusOr<std::string> CheckpointStore::JobDirectory(const std::string& job_id) const {
  absl::Status valid = ValidateId(job_id, "job_id");
  if (!valid.ok()) return valid;
  if (root_.empty()) {
    return absl::FailedPreconditionError(
        "this ps has no checkpoint directory: start ps_server with --checkpoint_dir=DIR (a disk "
        "of its host, or a file system every ps reaches)");
  }
  return absl::StrCat(root_, "/", job_id);
}

std::string CheckpointStore::CheckpointName(const std::string& run_id, int64_t seq) {
  return absl::StrFormat("%s-%06d", run_id, seq);
}

absl::Status CheckpointStore::CheckManifestName(const CheckpointManifest& manifest) {
  absl::Status status = ValidateId(manifest.job_id(), "manifest.job_id");
  if (status.ok()) status = ValidateId(manifest.run_id(), "manifest.run_id");
  if (!status.ok()) return status;
  if (manifest.seq() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("manifest.seq is ", manifest.seq(), ": checkpoints are numbered from 1"));
  }
  const std::string name = CheckpointName(manifest.run_id(), manifest.seq());
  if (manifest.name() != name) {
    return absl::InvalidArgumentError(absl::StrCat("manifest.name is \"", manifest.name(),
                                                   "\": checkpoint ", manifest.seq(), " of run ",
                                                   manifest.run_id(), " is named \"", name, "\""));
  }
  return absl::OkStatus();
}

absl::Status CheckpointStore::WriteShard(const std::string& job_dir, const std::string& name,
                                         int ps_index, int num_ps,
                                         const std::vector<CheckpointBlock>& blocks,
                                         ShardCheckpoint* entry) const {
  absl::Status status = ValidateId(name, "checkpoint");
  if (!status.ok()) return status;
  const std::string directory = absl::StrCat(job_dir, "/", name);
  status = fs_->CreateDirectories(directory);
  if (!status.ok()) return status;
  const std::string file = absl::StrCat(name, "/", ShardFileName(ps_index, num_ps));
  absl::StatusOr<CheckpointFileInfo> info =
      WriteCheckpointFile(fs_, absl::StrCat(job_dir, "/", file), blocks);
  if (!info.ok()) return info.status();
  entry->set_ps_index(ps_index);
  entry->set_file(file);
  entry->set_bytes(info->bytes);
  entry->set_checksum(info->checksum);
  return absl::OkStatus();
}

absl::Status CheckpointStore::Commit(const std::string& job_dir,
                                     const CheckpointManifest& manifest, int keep) const {
  absl::Status named = CheckManifestName(manifest);
  if (!named.ok()) return named;
  const std::string directory = absl::StrCat(job_dir, "/", manifest.name());
  absl::Status status = fs_->CreateDirectories(directory);
  if (status.ok()) {
    status = WriteCheckpointFile(fs_, absl::StrCat(directory, "/", kManifestFile),
                                 {CheckpointBlock(kManifestBlock, manifest.SerializeAsString())})
                 .status();
  }
  if (!status.ok()) return status;
  // Prune: of the checkpoints up to this one, the newest `keep` complete ones stay.
  absl::StatusOr<std::vector<std::string>> names = fs_->ListDirectory(job_dir);
  if (!names.ok()) return names.status();
  std::vector<std::pair<int64_t, std::string>> complete;  // (written at, name)
  std::vector<std::string> incomplete;
  for (const std::string& name : *names) {
    if (name > manifest.name()) continue;  // A later checkpoint, maybe being written.
    absl::StatusOr<CheckpointManifest> found = ReadManifest(fs_, job_dir, name);
    if (found.ok()) {
      complete.emplace_back(found->written_at_ms(), name);
    } else {
      incomplete.push_back(name);
    }
  }
  std::sort(complete.begin(), complete.end());
  const size_t kept = keep > 0 ? keep : kDefaultCheckpointsKept;
  for (size_t i = 0; i + kept < complete.size(); ++i) incomplete.push_back(complete[i].second);
  for (const std::string& name : incomplete) {
    // Another ps sharing the directory may be deleting the same checkpoint: gone is deleted.
    absl::Status deleted = fs_->DeleteRecursively(absl::StrCat(job_dir, "/", name));
    if (!absl::IsNotFound(deleted)) status.Update(deleted);
  }
  return status;
}

absl::StatusOr<ListCheckpointsResponse> CheckpointStore::List(const std::string& job_dir) const {
  ListCheckpointsResponse response;
  response.set_dir(job_dir);
  absl::StatusOr<std::vector<std::string>> names = fs_->ListDirectory(job_dir);
  if (absl::IsNotFound(names.status())) return response;
  if (!names.ok()) return names.status();
  std::vector<CheckpointManifest> manifests;
  for (const std::string& name : *names) {
    absl::StatusOr<CheckpointManifest> manifest = ReadManifest(fs_, job_dir, name);
    if (manifest.ok()) {
      manifests.push_back(*std::move(manifest));
    } else if (!absl::IsNotFound(manifest.status())) {  // Not found: still being written.
      response.add_problems(std::string(manifest.status().message()));
    }
  }
  std::stable_sort(manifests.begin(), manifests.end(),
                   [](const CheckpointManifest& a, const CheckpointManifest& b) {
                     return a.written_at_ms() < b.written_at_ms();
                   });
  for (CheckpointManifest& manifest : manifests) *response.add_manifests() = std::move(manifest);
  return response;
}

absl::StatusOr<std::vector<std::string>> CheckpointStore::DeleteAll(
    const std::string& job_dir) const {
  absl::StatusOr<std::vector<std::string>> names = fs_->ListDirectory(job_dir);
  if (absl::IsNotFound(names.status())) return std::vector<std::string>();
  if (!names.ok()) return names.status();
  std::sort(names->begin(), names->end());
  absl::Status status = fs_->DeleteRecursively(job_dir);
  if (!status.ok()) return status;
  return names;
}

absl::StatusOr<CheckpointManifest> CheckpointStore::Manifest(const std::string& job_dir,
                                                             const std::string& name) const {
  absl::Status valid = ValidateId(name, "checkpoint");
  if (!valid.ok()) return valid;
  return ReadManifest(fs_, job_dir, name);
}

absl::StatusOr<std::vector<CheckpointBlock>> CheckpointStore::ReadShard(
    const std::string& job_dir, const CheckpointManifest& manifest, int ps_index) const {
  if (ps_index < 0 || ps_index >= manifest.shards_size() ||
      manifest.shards(ps_index).ps_index() != ps_index) {
    return absl::DataLossError(absl::StrCat("checkpoint ", manifest.name(),
                                            ": its manifest names no file for ps:", ps_index));
  }
  const ShardCheckpoint& entry = manifest.shards(ps_index);
  const std::string expected =
      absl::StrCat(manifest.name(), "/", ShardFileName(ps_index, manifest.num_ps()));
  if (!CheckManifestName(manifest).ok() || entry.file() != expected) {
    return absl::DataLossError(absl::StrCat("checkpoint ", manifest.name(), ": its manifest names \"",
                                            entry.file(), "\" for ps:", ps_index, ", not \"",
                                            expected, "\": it was not written by a ps"));
  }
  const std::string path = absl::StrCat(job_dir, "/", entry.file());
  absl::StatusOr<std::string> bytes = fs_->ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  if (static_cast<int64_t>(bytes->size()) != entry.bytes() ||
      CheckpointFileChecksum(*bytes) != entry.checksum()) {
    return absl::DataLossError(absl::StrCat(
        path, ": not the file its manifest names (", bytes->size(), " bytes, ", entry.bytes(),
        " expected, or another checksum): it was changed or damaged after it was written"));
  }
  return DecodeCheckpointFile(*bytes, path);
}

std::vector<int64_t> WorkerResumeSteps(const CheckpointManifest& manifest, int num_workers) {
  std::vector<int64_t> steps(num_workers, manifest.resume_step());
  if (manifest.worker_resume_steps_size() <= num_workers) {
    std::copy(manifest.worker_resume_steps().begin(), manifest.worker_resume_steps().end(),
              steps.begin());
  }
  return steps;
}

}  // namespace ps
