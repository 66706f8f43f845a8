// The sweep table (<results>/sweep.csv): one row per point, its settings and the results
// found in its directory (summary.json, and eval.csv or validation.csv). Columns, in order:
//   point, dir, one per setting path (SettingPaths), workers and ps (unless settings), repeat,
//   seed (the job's, unless a setting), state (PENDING before the point has run), steps,
//   wall_time_s, time_per_step_s (wall_time_s / steps: from submission, so it includes the
//   start-up), examples_per_second, final_train_loss, final_eval_loss, final_eval_accuracy,
//   final_validation_loss, final_validation_accuracy, staleness_mean, staleness_max,
//   dropped_gradients, bytes_sent_per_step and bytes_received_per_step (a worker's,
//   summary.json's), time_to_target_s (from validation.csv where the job has a validation
//   split, else eval.csv)
// Empty cells where a value does not apply; "workers" and "ps" always hold the point's numbers
// of tasks, also where a setting column and the point's variant does not set them; fields
// holding commas are quoted (RFC 4180).
#ifndef PS_CTL_EXPERIMENT_SWEEP_TABLE_H_
#define PS_CTL_EXPERIMENT_SWEEP_TABLE_H_

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "common/file_system.h"
#include "ctl/experiment/sweep.h"

namespace ps {

// A point's summary.json, or a null JSON value when it has none (or not a readable one).
nlohmann::json ReadSummary(const std::string& point_dir, FileSystem* fs = FileSystem::Default());

// The `time_s` of the first eval.csv row whose loss is <= `target_loss`; nullopt when none
// is (or the file is missing).
std::optional<double> TimeToTarget(const std::string& eval_csv_path, double target_loss,
                                   FileSystem* fs = FileSystem::Default());

// Writes `path` (replacing it atomically) from the points' directories under `results_dir`.
absl::Status WriteSweepTable(const std::string& path, const Sweep& sweep,
                             const std::vector<SweepPoint>& points, const std::string& results_dir,
                             FileSystem* fs = FileSystem::Default());

}  // namespace ps

#endif  // PS_CTL_EXPERIMENT_SWEEP_TABLE_H_
