// JobSpec files (config/jobs/*.json) and the checks a job must pass before it runs.
#ifndef PS_WORKER_JOB_SPEC_H_
#define PS_WORKER_JOB_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/job.pb.h"
#include "proto/parameter.pb.h"

namespace ps {

// Parses JSON through protobuf's JSON mapping (field names as in job.proto, either
// lower_snake or lowerCamel; enums by name). Unknown fields and bad values are
// INVALID_ARGUMENT naming `source` and the problem.
absl::StatusOr<JobSpec> ParseJobSpecJson(absl::string_view json, absl::string_view source);
// Reads and parses a file; NOT_FOUND naming a missing one.
absl::StatusOr<JobSpec> ReadJobSpecFile(const std::string& path);

// Semantic checks for a cluster of `num_workers` workers: INVALID_ARGUMENT naming the field,
// e.g. "consistency.replicas_to_aggregate is 5 but the cluster has 4 workers".
absl::Status ValidateJobSpec(const JobSpec& spec, int num_workers);

// The ps side of the job: what every ps shard is created with.
ParameterSpec ToParameterSpec(const JobSpec& spec, const std::vector<VariableDef>& variables,
                              int num_workers);

}  // namespace ps

#endif  // PS_WORKER_JOB_SPEC_H_
