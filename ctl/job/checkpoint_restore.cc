#include "ctl/job/checkpoint_restore.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ps {
namespace {

// The complete checkpoints every ps lists, newest first.
absl::StatusOr<std::vector<CheckpointManifest>> CompleteEverywhere(const ClusterClient& client,
                                                                   const JobSpec& spec,
                                                                   std::ostream& out,
                                                                   std::vector<std::string>* dirs) {
  ListCheckpointsRequest request;
  request.set_job_id(spec.job_id());
  std::map<std::string, int> listed_by;  // Name -> how many ps list it.
  std::vector<CheckpointManifest> candidates;
  for (int ps = 0; ps < client.num_ps(); ++ps) {
    absl::StatusOr<ListCheckpointsResponse> listed = client.ListCheckpoints(ps, request);
    if (!listed.ok()) return listed.status();
    dirs->push_back(absl::StrCat("ps:", ps, " ", listed->dir()));
    for (const std::string& problem : listed->problems()) {
      out << "ps:" << ps << ": skipping a damaged manifest: " << problem << "\n";
    }
    for (const CheckpointManifest& manifest : listed->manifests()) {
      if (++listed_by[manifest.name()] == 1 && ps == 0) candidates.push_back(manifest);
    }
  }
  std::vector<CheckpointManifest> complete;
  for (const CheckpointManifest& manifest : candidates) {
    if (listed_by[manifest.name()] == client.num_ps()) {
      complete.push_back(manifest);
    } else {
      out << "checkpoint " << manifest.name() << " is not complete on every ps (its manifest is "
          << "missing on some): skipped\n";
      if (manifest.num_ps() != client.num_ps()) {
        out << "  (it was taken on " << manifest.num_ps() << " ps and this cluster has "
            << client.num_ps() << ": resuming on another number of ps needs every ps to reach "
            << "every shard's files: the same --checkpoint_dir on a file system they all mount)\n";
      }
    }
  }
  std::stable_sort(complete.begin(), complete.end(),
                   [](const CheckpointManifest& a, const CheckpointManifest& b) {
                     return a.written_at_ms() > b.written_at_ms();
                   });
  return complete;
}

// Restores `manifest` on every ps, or undoes it and says why not. On another number of ps than
// it was taken on, each ps places the slices and rows again from every shard's file
// (server/checkpoint_reshard.h).
absl::Status RestoreEverywhere(const ClusterClient& client, const JobSpec& spec,
                               const CheckpointManifest& manifest, std::ostream& out) {
  if (manifest.num_ps() != client.num_ps()) {
    out << "checkpoint " << manifest.name() << " was taken on " << manifest.num_ps()
        << " ps and this cluster has " << client.num_ps()
        << ": each ps places the variables' slices and the sparse rows again from every shard's "
           "file\n";
  }
  RestoreJobRequest request;
  *request.mutable_spec() = manifest.parameters();
  request.mutable_spec()->set_run_id(spec.run_id());
  const ClusterSpec cluster = client.cluster();
  request.mutable_spec()->set_num_workers(cluster.NumTasks(kWorkerJob));
  // A job that grew past its ClusterSpec (psctl add-worker), before the checkpoint or since:
  // its shards keep where its workers run.
  if (manifest.parameters().worker_addresses_size() > 0 ||
      cluster.NumTasks(kWorkerJob) > manifest.parameters().num_workers()) {
    *request.mutable_spec()->mutable_worker_addresses() = {cluster.Tasks(kWorkerJob).begin(),
                                                           cluster.Tasks(kWorkerJob).end()};
    int before = manifest.parameters().workers_before_growth();
    if (before == 0) before = manifest.parameters().num_workers();  // It grew since.
    request.mutable_spec()->set_workers_before_growth(
        std::min(before, cluster.NumTasks(kWorkerJob)));
  }
  request.set_checkpoint(manifest.name());
  request.set_num_ps(client.num_ps());
  for (int ps = 0; ps < client.num_ps(); ++ps) {
    request.set_ps_index(ps);
    absl::Status status = client.RestoreJob(ps, request);
    if (!status.ok()) {
      if (ps > 0) client.DeleteJob(spec.job_id()).IgnoreError();
      return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool RestorableCheckpoints::Accepts(const CheckpointManifest& manifest) const {
  return any || run_ids.count(manifest.run_id()) > 0 ||
         (!resumed_from.empty() && manifest.name() == resumed_from);
}

absl::StatusOr<CheckpointManifest> RestoreLatestCheckpoint(const ClusterClient& client,
                                                           const JobSpec& spec,
                                                           const RestorableCheckpoints& restorable,
                                                           std::ostream& out) {
  std::vector<std::string> dirs;
  absl::StatusOr<std::vector<CheckpointManifest>> complete =
      CompleteEverywhere(client, spec, out, &dirs);
  if (!complete.ok()) return complete.status();
  const size_t found = complete->size();
  complete->erase(std::remove_if(complete->begin(), complete->end(),
                                 [&restorable](const CheckpointManifest& manifest) {
                                   return !restorable.Accepts(manifest);
                                 }),
                  complete->end());
  if (complete->empty()) {
    return absl::NotFoundError(absl::StrCat(
        "job \"", spec.job_id(), "\" has no complete checkpoint ",
        restorable.any ? "to resume from" : "of this run to restore", " (looked in ",
        absl::StrJoin(dirs, ", "),
        found > 0 ? absl::StrCat("; the ", found, " of other runs are never restored") : "",
        ")"));
  }
  absl::Status last;
  for (const CheckpointManifest& manifest : *complete) {
    last = RestoreEverywhere(client, spec, manifest, out);
    if (last.ok()) return manifest;
    // A ps that cannot be reached says nothing of the checkpoint: never passed over for it.
    if (absl::IsUnavailable(last)) return last;
    out << "checkpoint " << manifest.name() << " cannot be restored: " << last.message()
        << "\nfalling back to the previous complete checkpoint\n";
    if (absl::IsFailedPrecondition(last)) return last;  // No other checkpoint fits either.
  }
  return absl::DataLossError(
      absl::StrCat("job \"", spec.job_id(), "\": none of its ", complete->size(),
                   " complete checkpoints restores; the last error: ", last.message()));
}

absl::Status DeleteCheckpointsEverywhere(const ClusterClient& client, const std::string& job_id,
                                         std::ostream& out) {
  for (int ps = 0; ps < client.num_ps(); ++ps) {
    absl::StatusOr<DeleteCheckpointsResponse> deleted = client.DeleteCheckpoints(ps, job_id);
    if (!deleted.ok()) {
      return absl::Status(deleted.status().code(),
                          absl::StrCat("ps:", ps, ": the earlier run's checkpoints were not "
                                       "deleted: ", deleted.status().message()));
    }
    if (deleted->deleted_size() > 0) {
      out << "ps:" << ps << ": deleted the earlier runs' checkpoints "
          << absl::StrJoin(deleted->deleted(), ", ") << "\n";
    }
  }
  return absl::OkStatus();
}

}  // namespace ps
