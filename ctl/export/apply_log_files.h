// A recorded run's apply logs in its results directory (JobSpec.record_apply_log), as psctl
// writes them when the run ends and `psctl replay` reads them:
//   apply_log/parameters.json   the shards' ParameterSpec of the run (protobuf's JSON)
//   apply_log/ps-K.csv          shard K's log, one event a line in the order the shard did
//                               them: kind (PULL, APPLY, DROP), worker, push_id, clock,
//                               version (PULL: served; APPLY, DROP: read), learning_rate
//                               (APPLY, printed to round-trip a float exactly), drop_reason
// The CSV files are for people too: a diverged run can be read update by update.
#ifndef PS_CTL_EXPORT_APPLY_LOG_FILES_H_
#define PS_CTL_EXPORT_APPLY_LOG_FILES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/file_system.h"
#include "proto/parameter.pb.h"
#include "proto/ps_service.pb.h"

namespace ps {

// Writes `parameters` and one CSV file per shard's log (in ps order) under `results_dir`.
absl::Status WriteApplyLogFiles(const std::string& results_dir, const ParameterSpec& parameters,
                                const std::vector<ApplyLog>& logs,
                                FileSystem* fs = FileSystem::Default());

struct ApplyLogFiles {
  ParameterSpec parameters;
  std::vector<ApplyLog> logs;  // One per shard, in ps order.
};
// Reads what WriteApplyLogFiles wrote, for `num_ps` shards. NOT_FOUND naming the file when one
// is missing (the run did not record: set record_apply_log); INVALID_ARGUMENT naming the file
// and line for a malformed one.
absl::StatusOr<ApplyLogFiles> ReadApplyLogFiles(const std::string& results_dir, int num_ps,
                                                FileSystem* fs = FileSystem::Default());

}  // namespace ps

#endif  // PS_CTL_EXPORT_APPLY_LOG_FILES_H_
