// A run's manifest (manifest.json in its results directory, written with summary.json): what
// ran, where and on what, so that runs can be told apart, compared (psctl report RUN_DIR...)
// and not run twice (psctl experiment):
//   job_hash     "sha256:<hex>" of the canonical JobSpec (JobSpecHash)
//   settings_hash   the same without the job's id (SettingsHash): psctl experiment matches a
//                point with a finished run by it
//   software     psctl's version, git commit (stamped builds) and whether it was optimized
//   cluster      the ClusterSpec
//   tasks        per task: its address, version, device and machine (TaskInfo), or the error
//                that kept it from answering
//   machines     the distinct machines of the tasks, by host name
//   started_at, ended_at   RFC 3339 UTC
//   final        the summary's final figures (state, steps, losses, accuracy, throughput, ...)
#ifndef PS_CTL_JOB_RUN_MANIFEST_H_
#define PS_CTL_JOB_RUN_MANIFEST_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cluster/cluster_spec.h"
#include "ctl/cluster/cluster_client.h"
#include "proto/job.pb.h"
#include "proto/task.pb.h"

namespace ps {

// The hash of `spec` as a configuration: SHA-256 of its deterministic binary serialization,
// with the fields that name a run rather than what it does (run_id, owner) cleared. Any other
// field changes it; how the JSON it was read from ordered or spaced its keys does not.
std::string JobSpecHash(const JobSpec& spec);
// JobSpecHash of `spec` without its job_id too: what the job does, whatever it is called (a
// sweep's points get a fresh job id on every run of the sweep).
std::string SettingsHash(const JobSpec& spec);

// One task as the manifest records it.
struct TaskManifest {
  std::string task;     // "ps:0"
  std::string address;  // "host:port"
  absl::StatusOr<TaskInfo> info = absl::UnknownError("not asked");
};

// Asks every task of `cluster` for its TaskInfo, one at a time (ClusterClient's status timeout
// each). A task that does not answer is recorded with its error: the run goes on.
std::vector<TaskManifest> DescribeTasks(const ClusterClient& client, const ClusterSpec& cluster);

struct RunManifest {
  JobSpec spec;
  nlohmann::json cluster;  // ClusterSpec::ToJson's.
  std::vector<TaskManifest> tasks;
  absl::Time started;
  absl::Time ended;
};

// The manifest's JSON; `summary` is summary.json's, whose final figures it copies.
nlohmann::json ManifestJson(const RunManifest& run, const nlohmann::json& summary);

}  // namespace ps

#endif  // PS_CTL_JOB_RUN_MANIFEST_H_
