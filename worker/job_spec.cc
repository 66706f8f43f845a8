#include "worker/job_spec.h"

#include <fstream>
#include <sstream>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "server/learning_rate.h"
#include "server/optimizer.h"

namespace ps {
namespace {

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", problem));
}

absl::Status ValidateData(const DataSpec& data) {
  switch (data.source_case()) {
    case DataSpec::kSynthetic:
      break;
    case DataSpec::kMnistImages:
      if (data.mnist_labels().empty()) {
        return FieldError("data.mnist_labels", "is empty: MNIST needs the labels file too");
      }
      break;
    case DataSpec::kLibsvm:
      if (data.feature_dim() < 1) {
        return FieldError("data.feature_dim", "must be >= 1 for LIBSVM data");
      }
      break;
    case DataSpec::kCsv:
      if (data.label_column() < 0) return FieldError("data.label_column", "must be >= 0");
      break;
    default:
      return FieldError("data", "has no source: set synthetic, mnist_images, libsvm or csv");
  }
  if (data.test_fraction() < 0 || data.test_fraction() >= 1) {
    return FieldError("data.test_fraction", "must be in [0, 1)");
  }
  return absl::OkStatus();
}

absl::Status ValidateConsistency(const ConsistencyConfig& consistency, int num_workers) {
  switch (consistency.mode()) {
    case ConsistencyConfig::SYNC:
      if (consistency.replicas_to_aggregate() < 0 ||
          consistency.replicas_to_aggregate() > num_workers) {
        return FieldError("consistency.replicas_to_aggregate",
                          absl::StrCat("is ", consistency.replicas_to_aggregate(),
                                       " but the cluster has ", num_workers,
                                       " workers: use 1 to ", num_workers, ", or 0 for all"));
      }
      return absl::OkStatus();
    case ConsistencyConfig::ASYNC:
      if (consistency.max_staleness() < 0) {
        return FieldError("consistency.max_staleness", "must be >= 0 (0: no bound)");
      }
      return absl::OkStatus();
    case ConsistencyConfig::SSP:
      if (consistency.ssp_bound() < 0) return FieldError("consistency.ssp_bound", "must be >= 0");
      return absl::OkStatus();
    case ConsistencyConfig::SOFTSYNC:
      if (consistency.softsync_n() < 1) {
        return FieldError("consistency.softsync_n", "must be >= 1");
      }
      return absl::OkStatus();
    default:
      return FieldError("consistency.mode", "is not set: use SYNC, ASYNC, SSP or SOFTSYNC");
  }
}

}  // namespace

absl::StatusOr<JobSpec> ParseJobSpecJson(absl::string_view json, absl::string_view source) {
  JobSpec spec;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &spec, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": not a valid job: ", status.message().as_string(),
        " (fields are those of JobSpec in proto/job.proto; see config/jobs/ for examples)"));
  }
  return spec;
}

absl::StatusOr<JobSpec> ReadJobSpecFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot read the job file; check the path"));
  }
  std::stringstream text;
  text << file.rdbuf();
  return ParseJobSpecJson(text.str(), path);
}

absl::Status ValidateJobSpec(const JobSpec& spec, int num_workers) {
  if (spec.job_id().empty()) return FieldError("job_id", "is empty: give the job an id");
  if (spec.model().kind() == ModelSpec::KIND_UNSPECIFIED) {
    return FieldError("model.kind",
                      "is not set: use LINEAR_REGRESSION, LOGISTIC_REGRESSION, "
                      "SOFTMAX_REGRESSION or MLP");
  }
  if (spec.model().kind() == ModelSpec::MLP && spec.model().hidden_sizes().empty()) {
    return FieldError("model.hidden_sizes", "is empty: an MLP needs at least one hidden layer");
  }
  absl::Status status = ValidateData(spec.data());
  if (!status.ok()) return status;
  if (spec.batch_size() < 1) return FieldError("batch_size", "must be >= 1");
  if (spec.steps() < 0 || spec.epochs() < 0 || spec.time_limit_s() < 0 ||
      spec.target_loss() < 0) {
    return FieldError("steps, epochs, time_limit_s and target_loss", "must be >= 0");
  }
  if (spec.steps() == 0 && spec.epochs() == 0 && spec.time_limit_s() == 0 &&
      spec.target_loss() == 0) {
    return FieldError("steps", "is 0 and so are epochs, target_loss and time_limit_s: "
                               "give the job a stop condition");
  }
  if (spec.target_loss() > 0 && spec.eval_interval() < 1) {
    return FieldError("eval_interval", "must be >= 1 when target_loss is set");
  }
  if (spec.eval_interval() < 0) return FieldError("eval_interval", "must be >= 0");
  status = ValidateConsistency(spec.consistency(), num_workers);
  if (!status.ok()) return status;
  const DownpourSpec& downpour = spec.downpour();
  if (downpour.n_fetch() < 0 || downpour.n_push() < 0 || downpour.local_learning_rate() < 0) {
    return FieldError("downpour.n_fetch, n_push and local_learning_rate", "must be >= 0");
  }
  if (downpour.overlap_communication() &&
      spec.consistency().mode() != ConsistencyConfig::ASYNC) {
    return FieldError("downpour.overlap_communication",
                      "needs consistency mode ASYNC: the other modes make a step wait for the "
                      "previous one's update; unset it or use ASYNC");
  }
  const StragglerSpec& stragglers = spec.stragglers();
  for (int worker : stragglers.workers()) {
    if (worker < 0 || worker >= num_workers) {
      return FieldError("stragglers.workers", absl::StrCat("names worker ", worker,
                                                           " but the cluster has ",
                                                           num_workers, " workers"));
    }
  }
  if (stragglers.distribution() == StragglerSpec::FIXED && stragglers.factor() < 1) {
    return FieldError("stragglers.factor", "must be >= 1 for FIXED (a slowdown factor)");
  }
  if (stragglers.mean_delay_ms() < 0) return FieldError("stragglers.mean_delay_ms", "must be >= 0");
  status = ValidateLearningRateSchedule(spec.learning_rate());
  if (!status.ok()) return status;
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = Optimizer::Create(spec.optimizer());
  if (!optimizer.ok()) return optimizer.status();
  return absl::OkStatus();
}

ParameterSpec ToParameterSpec(const JobSpec& spec, const std::vector<VariableDef>& variables,
                              int num_workers) {
  ParameterSpec parameters;
  parameters.set_job_id(spec.job_id());
  for (const VariableDef& variable : variables) *parameters.add_variables() = variable;
  *parameters.mutable_optimizer() = spec.optimizer();
  *parameters.mutable_learning_rate() = spec.learning_rate();
  *parameters.mutable_consistency() = spec.consistency();
  parameters.set_num_workers(num_workers);
  parameters.set_seed(spec.seed());
  parameters.set_min_slice_bytes(spec.min_slice_bytes());
  parameters.set_allow_non_finite(spec.allow_non_finite());
  return parameters;
}

}  // namespace ps
