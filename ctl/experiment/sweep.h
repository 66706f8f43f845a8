// Sweep files (config/sweeps/*.json, `psctl experiment --sweep=FILE`): a base job and the
// settings to vary, expanded into points, one job each.
//
//   {"name": "modes", "description": "...", "base_job": "config/jobs/default.json" or {...},
//    "ps": 2,
//    "variants": [{"consistency.mode": "SYNC"},
//                 {"consistency.mode": "SSP", "consistency.ssp_bound": 4}],
//    "axes": {"workers": [1, 2, 4, 8], "seed": [1, 2]},
//    "repeats": 1, "target_loss": 0.5}
//
// A setting is a JobSpec field path (as in proto/job.proto, dotted), "workers", the number of
// workers, or "ps", the number of ps tasks (the top-level "ps" where no setting gives it). The
// points are the product of the variants (settings that go together) and of every axis, with
// the first written outermost, each run `repeats` times with seeds seed, seed + 1, ...;
// everything but "base_job" is optional.
#ifndef PS_CTL_EXPERIMENT_SWEEP_H_
#define PS_CTL_EXPERIMENT_SWEEP_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/job.pb.h"

namespace ps {

constexpr char kWorkersSetting[] = "workers";
constexpr char kPsSetting[] = "ps";

struct SweepSetting {
  std::string path;  // A JobSpec field path ("consistency.mode"), "workers" or "ps".
  nlohmann::ordered_json value;
};

struct SweepAxis {
  std::string path;
  std::vector<nlohmann::ordered_json> values;
};

struct Sweep {
  std::string source;  // The file, for messages.
  std::string name;
  std::string description;
  JobSpec base_job;
  int num_ps = 2;  // The top-level "ps": a local cluster's ps tasks where no setting gives them.
  std::vector<std::vector<SweepSetting>> variants;  // Empty: one variant with no settings.
  std::vector<SweepAxis> axes;
  int repeats = 1;
  // Time to target is measured on the evaluation loss (the validation split's where the jobs
  // have one); 0: off.
  double target_loss = 0;
  // A setting (e.g. "learning_rate.base") whose value psctl report selects, for each value of
  // the other settings, by the mean final validation accuracy (loss for a regression) of its
  // runs; empty: none.
  std::string select;
};

struct SweepPoint {
  int index = 0;         // 0-based, in run order.
  std::string id;        // "consistency.mode=SSP,consistency.ssp_bound=4,workers=2,repeat=1".
  // The id with characters unsafe in a file name replaced by '_'; an id of more than 160 bytes
  // keeps its first 143 and a hash of the whole: distinct points, distinct names, each short
  // enough for a file name with the logs' suffixes.
  std::string dir_name;
  std::vector<SweepSetting> settings;  // The variant's, then one per axis; id order.
  int repeat = 0;                      // 0-based; in the id only when the sweep has repeats.
  int num_workers = 0;
  int num_ps = 0;
  JobSpec spec;  // job_id "<sweep name>-<index + 1>".
};

// Parses a sweep; base_job may name a job file (read relative to the current directory).
// INVALID_ARGUMENT naming `source` and the field for anything malformed.
absl::StatusOr<Sweep> ParseSweep(absl::string_view json, absl::string_view source);
absl::StatusOr<Sweep> ReadSweepFile(const std::string& path);

// Every point, each spec validated for its number of workers. "workers" is `default_workers`
// and "ps" `default_ps` where no setting gives them (psctl passes the sweep's num_ps for local
// clusters, a running cluster's own counts otherwise). Errors name the sweep file, the setting
// or point, and the problem: an unknown field path, a value of the wrong type, a job that does
// not validate.
absl::StatusOr<std::vector<SweepPoint>> ExpandSweep(const Sweep& sweep, int default_workers,
                                                    int default_ps);

// The settings' paths in id order, each once: the sweep table's setting columns.
std::vector<std::string> SettingPaths(const Sweep& sweep);

// `spec` with `value` written at the field `path` (through protobuf's JSON mapping).
// INVALID_ARGUMENT naming the path when JobSpec has no such field or the value does not fit.
absl::StatusOr<JobSpec> OverrideField(const JobSpec& spec, const std::string& path,
                                      const nlohmann::ordered_json& value);

// A setting's value as it appears in ids and tables: strings bare, the rest as compact JSON.
std::string SettingText(const nlohmann::ordered_json& value);

}  // namespace ps

#endif  // PS_CTL_EXPERIMENT_SWEEP_H_
