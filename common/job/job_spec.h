// JobSpec files (config/jobs/*.json), and the ParameterSpec a JobSpec gives the ps. The rules a
// job must satisfy are in common/job/job_schema.h.
#ifndef PS_COMMON_JOB_JOB_SPEC_H_
#define PS_COMMON_JOB_JOB_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/file_system.h"
#include "proto/job.pb.h"
#include "proto/parameter.pb.h"

namespace ps {

// The files a job's data names (images and labels, a LIBSVM or CSV file), as written: a
// worker reads only those under its --data_root directories.
std::vector<std::string> DataFiles(const DataSpec& data);

// Parses JSON through protobuf's JSON mapping (field names as in job.proto, either
// lower_snake or lowerCamel; enums by name). Unknown fields and bad values are
// INVALID_ARGUMENT naming `source` and the problem.
absl::StatusOr<JobSpec> ParseJobSpecJson(absl::string_view json, absl::string_view source);
// Reads and parses a file; NOT_FOUND naming a missing one.
absl::StatusOr<JobSpec> ReadJobSpecFile(const std::string& path,
                                       FileSystem* fs = FileSystem::Default());

// The ps side of the job: what every ps shard is created with.
ParameterSpec ToParameterSpec(const JobSpec& spec, const std::vector<VariableDef>& variables,
                              int num_workers, const std::vector<SparseTableDef>& tables = {});

}  // namespace ps

#endif  // PS_COMMON_JOB_JOB_SPEC_H_
