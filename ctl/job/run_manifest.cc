#include "ctl/job/run_manifest.h"

#include <openssl/sha.h>

#include <map>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/process/build_info.h"
#include "common/json_text.h"

namespace ps {
namespace {

// Figures of summary.json the manifest repeats, where present.
constexpr const char* kFinalFigures[] = {
    "state",          "error",           "steps",
    "wall_time_s",    "examples_per_second", "final_train_loss",
    "final_eval_loss", "final_eval_accuracy", "final_validation_loss",
    "final_validation_accuracy", "staleness_mean", "staleness_max",
    "applied_updates", "bytes_sent_per_step", "bytes_received_per_step",
};

std::string Rfc3339(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
}

}  // namespace

std::string JobSpecHash(const JobSpec& spec) {
  JobSpec configuration = spec;
  configuration.clear_run_id();
  configuration.clear_owner();
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);  // Map entries in key order.
    configuration.SerializeToCodedStream(&coded);
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return absl::StrCat(
      "sha256:", absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(digest),
                                                          sizeof(digest))));
}

std::string SettingsHash(const JobSpec& spec) {
  JobSpec settings = spec;
  settings.clear_job_id();
  return JobSpecHash(settings);
}

std::vector<TaskManifest> DescribeTasks(const ClusterClient& client, const ClusterSpec& cluster) {
  std::vector<TaskManifest> tasks;
  for (absl::string_view job : {kPsJob, kWorkerJob}) {
    for (int index = 0; index < cluster.NumTasks(job); ++index) {
      TaskManifest task;
      task.task = absl::StrCat(job, ":", index);
      task.address = cluster.Tasks(job)[index];
      task.info = client.GetTaskInfo(job, index);
      tasks.push_back(std::move(task));
    }
  }
  return tasks;
}

nlohmann::json ManifestJson(const RunManifest& run, const nlohmann::json& summary) {
  nlohmann::json manifest;
  manifest["manifest_version"] = 1;
  manifest["job_id"] = run.spec.job_id();
  manifest["run_id"] = run.spec.run_id();
  manifest["job_hash"] = JobSpecHash(run.spec);
  manifest["settings_hash"] = SettingsHash(run.spec);
  manifest["software"] = {{"version", VersionString()},
                          {"commit", BuildCommit()},
                          {"optimized", OptimizedBuild()}};
  manifest["cluster"] = run.cluster;
  nlohmann::json tasks = nlohmann::json::array();
  std::map<std::string, nlohmann::json> machines;  // By host name.
  for (const TaskManifest& task : run.tasks) {
    nlohmann::json entry = {{"task", task.task}, {"address", task.address}};
    if (!task.info.ok()) {
      entry["error"] = std::string(task.info.status().message());
    } else {
      entry["version"] = task.info->version();
      if (!task.info->device().empty()) entry["device"] = task.info->device();
      entry["host"] = task.info->machine().hostname();
      machines.emplace(task.info->machine().hostname(), ProtoToJson(task.info->machine()));
    }
    tasks.push_back(std::move(entry));
  }
  manifest["tasks"] = std::move(tasks);
  manifest["machines"] = nlohmann::json::array();
  for (auto& [host, machine] : machines) manifest["machines"].push_back(std::move(machine));
  manifest["started_at"] = Rfc3339(run.started);
  manifest["ended_at"] = Rfc3339(run.ended);
  nlohmann::json final_figures = nlohmann::json::object();
  for (const char* key : kFinalFigures) {
    if (summary.contains(key)) final_figures[key] = summary[key];
  }
  manifest["final"] = std::move(final_figures);
  return manifest;
}

}  // namespace ps
