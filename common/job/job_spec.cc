#include "common/job/job_spec.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/job/consistency_modes.h"
#include "common/json_text.h"

namespace ps {

absl::StatusOr<JobSpec> ParseJobSpecJson(absl::string_view json, absl::string_view source) {
  JobSpec spec;
  absl::Status status = ParseProtoJson(json, &spec);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": not a valid job: ", status.message(),
        " (fields are those of JobSpec in proto/job.proto; see config/jobs/ for examples)"));
  }
  return spec;
}

absl::StatusOr<JobSpec> ReadJobSpecFile(const std::string& path, FileSystem* fs) {
  absl::StatusOr<std::string> text = fs->ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(path, ": cannot read the job file; check the path (",
                                     text.status().message(), ")"));
  }
  return ParseJobSpecJson(*text, path);
}

ParameterSpec ToParameterSpec(const JobSpec& spec, const std::vector<VariableDef>& variables,
                              int num_workers, const std::vector<SparseTableDef>& tables) {
  ParameterSpec parameters;
  parameters.set_job_id(spec.job_id());
  for (const VariableDef& variable : variables) *parameters.add_variables() = variable;
  for (const SparseTableDef& table : tables) *parameters.add_sparse_tables() = table;
  *parameters.mutable_optimizer() = spec.optimizer();
  *parameters.mutable_learning_rate() = spec.learning_rate();
  *parameters.mutable_consistency() = spec.consistency();
  parameters.set_num_workers(num_workers);
  parameters.set_seed(spec.seed());
  parameters.set_min_slice_bytes(spec.min_slice_bytes());
  parameters.set_allow_non_finite(spec.allow_non_finite());
  parameters.set_run_id(spec.run_id());
  parameters.set_worker_lease_ms(std::llround(spec.worker_lease_s() * 1000.0));
  parameters.set_owner(spec.owner());
  parameters.set_record_apply_log(spec.record_apply_log());
  parameters.set_trace(spec.trace());
  parameters.set_replicas(spec.replicas());
  parameters.set_lost_workers_leave(spec.min_workers() > 0);
  *parameters.mutable_compression() = spec.compression();
  if (const ModeTraits* mode = FindModeTraits(spec.consistency().mode());
      mode != nullptr && mode->center_moves_by_differences) {
    // The center moves by each pushed difference as it is: the job's optimizer and schedule
    // are the workers' (worker/exchange/easgd_exchange.h).
    parameters.clear_optimizer();
    parameters.clear_learning_rate();
    parameters.mutable_learning_rate()->set_base(1.0f);
  }
  return parameters;
}

std::vector<std::string> DataFiles(const DataSpec& data) {
  std::vector<std::string> files;
  for (const std::string& file : {data.mnist_images(), data.mnist_labels(), data.libsvm(),
                                  data.csv(), data.test_data(), data.test_labels()}) {
    if (!file.empty()) files.push_back(file);
  }
  return files;
}

}  // namespace ps
