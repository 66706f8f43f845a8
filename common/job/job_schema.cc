#include "common/job/job_schema.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/cluster/host_port.h"

namespace ps {
namespace {

bool ShardsHoldTheModel(const ModeTraits& mode) { return mode.shards_hold_the_model; }
bool UsesDownpour(const ModeTraits& mode) { return mode.downpour; }
bool Replayable(const ModeTraits& mode) { return mode.replayable; }

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", problem));
}

// `status` with `prefix` in front of its message; OK stays OK.
absl::Status Prefixed(const std::string& prefix, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

// `value` must lie in [0, 1). NaN fails every comparison and so is rejected too.
absl::Status CheckFraction(const char* field, float value) {
  if (value >= 0 && value < 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer.", field, " must be in [0, 1), got ", value));
}

absl::Status CheckNonNegative(const char* field, float value) {
  if (value >= 0 && std::isfinite(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer.", field, " must be finite and >= 0, got ", value));
}

// A DROPOUT layer `field`: a rate in [0, 1) and nothing else.
absl::Status ValidateDropout(const LayerSpec& layer, const std::string& field) {
  if (!(layer.rate() >= 0.0f && layer.rate() < 1.0f)) {
    return FieldError(field + ".rate", absl::StrCat("is ", layer.rate(),
                                                    ": the fraction dropped is in [0, 1) "
                                                    "(0.5 is usual for dense layers)"));
  }
  if (layer.filters() != 0 || layer.units() != 0 || layer.kernel() != 0 || layer.stride() != 0 ||
      layer.padding() != 0 || layer.activation() != ModelSpec::RELU) {
    return FieldError(field, "is a DROPOUT, which takes only a rate: unset filters, units, "
                             "kernel, stride, padding and activation");
  }
  return absl::OkStatus();
}

// A CNN's image and layers, each in range; whether the windows fit the images they slide over
// is the model's to say (worker/model/conv_model.h), from the data's feature_dim.
absl::Status ValidateCnn(const ModelSpec& model) {
  if (model.kind() != ModelSpec::CNN) {
    if (model.has_image() || !model.layers().empty()) {
      return FieldError(model.has_image() ? "model.image" : "model.layers",
                        "is for CNN: unset it (or set model.kind to CNN)");
    }
    return absl::OkStatus();
  }
  const ImageShape& image = model.image();
  if (image.height() < 1 || image.width() < 1 || image.channels() < 1) {
    return FieldError("model.image", "needs height, width and channels of at least 1 (28, 28 "
                                     "and 1 for Fashion-MNIST)");
  }
  if (!model.hidden_sizes().empty()) {
    return FieldError("model.hidden_sizes", "is for MLP; a CNN's dense layers are DENSE layers");
  }
  if (model.layers().empty() || model.layers_size() > kMaxHiddenLayers) {
    return FieldError("model.layers", absl::StrCat("has ", model.layers_size(),
                                                   " layers: a CNN has 1 to ", kMaxHiddenLayers));
  }
  for (int i = 0; i < model.layers_size(); ++i) {
    const LayerSpec& layer = model.layers(i);
    const std::string field = absl::StrCat("model.layers[", i, "]");
    const LayerSpec::Kind kind = layer.kind();
    if (kind == LayerSpec::KIND_UNSPECIFIED || !LayerSpec::Kind_IsValid(kind)) {
      return FieldError(field + ".kind",
                        "is not set: use CONV, MAX_POOL, AVG_POOL, DENSE or DROPOUT");
    }
    if (kind == LayerSpec::DROPOUT) {
      absl::Status dropout = ValidateDropout(layer, field);
      if (!dropout.ok()) return dropout;
      continue;
    }
    if (layer.rate() != 0) return FieldError(field + ".rate", "is for DROPOUT: unset it");
    const bool windowed = kind != LayerSpec::DENSE;
    if (windowed && (layer.kernel() < 1 || layer.kernel() > 64)) {
      return FieldError(field + ".kernel", absl::StrCat("is ", layer.kernel(),
                                                        ": a window's side is 1 to 64"));
    }
    if (layer.stride() < 0 || layer.stride() > 64 || layer.padding() < 0 ||
        layer.padding() > 64) {
      return FieldError(field, "stride and padding are 0 to 64");
    }
    if (kind == LayerSpec::CONV && (layer.filters() < 1 || layer.filters() > kMaxLayerWidth)) {
      return FieldError(field + ".filters", absl::StrCat("is ", layer.filters(), ": a CONV has 1 to ",
                                                         kMaxLayerWidth, " filters"));
    }
    if (kind == LayerSpec::DENSE && (layer.units() < 1 || layer.units() > kMaxLayerWidth)) {
      return FieldError(field + ".units", absl::StrCat("is ", layer.units(), ": a DENSE has 1 to ",
                                                       kMaxLayerWidth, " units"));
    }
    if (kind != LayerSpec::CONV && layer.padding() != 0) {
      return FieldError(field + ".padding", "is for CONV: unset it");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateModel(const ModelSpec& model) {
  if (model.kind() == ModelSpec::KIND_UNSPECIFIED || !ModelSpec::Kind_IsValid(model.kind())) {
    return FieldError("model.kind",
                      "is not set: use LINEAR_REGRESSION, LOGISTIC_REGRESSION, "
                      "SOFTMAX_REGRESSION, MLP, SPARSE_LOGISTIC_REGRESSION, EMBEDDING_BAG_MLP "
                      "or CNN");
  }
  absl::Status cnn = ValidateCnn(model);
  if (!cnn.ok()) return cnn;
  if (model.embedding_dim() != 0 && model.kind() != ModelSpec::EMBEDDING_BAG_MLP) {
    return FieldError("model.embedding_dim", "is for EMBEDDING_BAG_MLP: unset it");
  }
  if (model.embedding_dim() < 0 || model.embedding_dim() > kMaxLayerWidth) {
    return FieldError("model.embedding_dim",
                      absl::StrCat("is ", model.embedding_dim(), ": an embedding row has 1 to ",
                                   kMaxLayerWidth, " floats (0: 16)"));
  }
  if (model.kind() == ModelSpec::MLP && model.hidden_sizes().empty()) {
    return FieldError("model.hidden_sizes", "is empty: an MLP needs at least one hidden layer");
  }
  if (model.hidden_sizes_size() > kMaxHiddenLayers) {
    return FieldError("model.hidden_sizes", absl::StrCat("has ", model.hidden_sizes_size(),
                                                         " layers: at most ", kMaxHiddenLayers));
  }
  const bool layers =
      model.kind() == ModelSpec::MLP || model.kind() == ModelSpec::EMBEDDING_BAG_MLP;
  for (int i = 0; layers && i < model.hidden_sizes_size(); ++i) {
    if (model.hidden_sizes(i) < 1 || model.hidden_sizes(i) > kMaxLayerWidth) {
      return FieldError(absl::StrCat("model.hidden_sizes[", i, "]"),
                        absl::StrCat("is ", model.hidden_sizes(i), ": a layer has 1 to ",
                                     kMaxLayerWidth, " units"));
    }
  }
  return absl::OkStatus();
}

// `feature_dim` (`field`) of data that gives it, at most kMaxFeatureDim.
absl::Status CheckFeatureDim(absl::string_view field, int feature_dim) {
  if (feature_dim <= kMaxFeatureDim) return absl::OkStatus();
  return FieldError(field, absl::StrCat("is ", feature_dim, ": at most ", kMaxFeatureDim,
                                        " features"));
}

absl::Status ValidateData(const DataSpec& data, bool sparse) {
  switch (data.source_case()) {
    case DataSpec::kSynthetic: {
      absl::Status status =
          CheckFeatureDim("data.synthetic.feature_dim", data.synthetic().feature_dim());
      if (!status.ok()) return status;
      break;
    }
    case DataSpec::kMnistImages:
      if (data.mnist_labels().empty()) {
        return FieldError("data.mnist_labels", "is empty: MNIST needs the labels file too");
      }
      break;
    case DataSpec::kLibsvm:
      if (sparse ? data.feature_dim() < 0 : data.feature_dim() < 1) {
        return FieldError("data.feature_dim",
                          sparse ? "must be >= 0 for a sparse model's LIBSVM data (0: any id)"
                                 : "must be >= 1 for LIBSVM data");
      }
      {
        absl::Status status = CheckFeatureDim("data.feature_dim", data.feature_dim());
        if (!status.ok()) return status;
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
  if (data.validation_fraction() < 0 || data.validation_fraction() >= 1) {
    return FieldError("data.validation_fraction", "must be in [0, 1)");
  }
  if (!data.test_data().empty()) {
    if (data.source_case() == DataSpec::kSynthetic) {
      return FieldError("data.test_data", "needs a file source (mnist_images, libsvm or csv); "
                                          "synthetic data is split by test_fraction");
    }
    if (data.test_fraction() > 0) {
      return FieldError("data.test_fraction",
                        "must be unset or 0 with data.test_data: the test set is that file");
    }
    if (data.source_case() == DataSpec::kMnistImages && data.test_labels().empty()) {
      return FieldError("data.test_labels", "is empty: MNIST test_data needs its labels file");
    }
  }
  if (!data.test_labels().empty() &&
      (data.test_data().empty() || data.source_case() != DataSpec::kMnistImages)) {
    return FieldError("data.test_labels", "is only for MNIST, beside data.test_data");
  }
  return absl::OkStatus();
}

// Data handed out by the job (DataSpec.sharding DYNAMIC): the first shard holds the handout and
// takes a batch as trained on when it admits a gradient push carrying it.
absl::Status ValidateSharding(const JobSpec& spec) {
  if (spec.data().sharding() == DataSpec::BY_WORKER) return absl::OkStatus();
  const ConsistencyConfig::Mode mode = spec.consistency().mode();
  if (const ModeTraits* traits = FindModeTraits(mode);
      traits != nullptr && !traits->shards_hold_the_model) {
    return FieldError("data.sharding",
                      absl::StrCat("DYNAMIC is for ", ModeNames(&ShardsHoldTheModel, "and"),
                                   ", whose workers push gradients to the shards, not ",
                                   ConsistencyConfig::Mode_Name(mode), ": use BY_WORKER"));
  }
  if (IsSparseModel(spec.model().kind())) {
    return FieldError("data.sharding", absl::StrCat("DYNAMIC is not supported yet for ",
                                                    ModelSpec::Kind_Name(spec.model().kind()),
                                                    ": use BY_WORKER"));
  }
  // A worker holds at most 64 batches (server/data_handout.h): those of the steps a push sums,
  // and the few it asked for ahead.
  constexpr int kMaxStepsPerPush = 32;
  if (spec.downpour().n_push() > kMaxStepsPerPush) {
    return FieldError("downpour.n_push",
                      absl::StrCat("is ", spec.downpour().n_push(), ": with data.sharding DYNAMIC "
                                   "a push sums at most ", kMaxStepsPerPush,
                                   " steps (a worker holds at most 64 batches)"));
  }
  if (spec.record_apply_log()) {
    return FieldError("record_apply_log", "is not supported with data.sharding DYNAMIC yet (a "
                                          "replay does not hand out the recorded batches): unset "
                                          "one");
  }
  return absl::OkStatus();
}

// Elastic workers (JobSpec.min_workers): a lost worker leaves the job, found by its lease; the
// rings of ALLREDUCE and LOCAL_SGD need every worker.
absl::Status ValidateElastic(const JobSpec& spec, int num_workers) {
  if (spec.min_workers() == 0) return absl::OkStatus();
  if (spec.min_workers() < 0 || spec.min_workers() > num_workers) {
    return FieldError("min_workers",
                      absl::StrCat("is ", spec.min_workers(), ": 1 to the cluster's ", num_workers,
                                   " workers, or 0 for a job that is not elastic"));
  }
  if (ModeTraitsOf(spec.consistency().mode()).family == ModeFamily::kRing) {
    return FieldError("min_workers", absl::StrCat("is for the modes with ps, not ",
                                                  ConsistencyConfig::Mode_Name(
                                                      spec.consistency().mode()),
                                                  ", whose ring needs every worker: unset it"));
  }
  if (spec.worker_lease_s() <= 0) {
    return FieldError("min_workers",
                      "needs worker_lease_s > 0: a worker that died is found by its lease "
                      "running out, and then leaves the job (2 is a good start)");
  }
  return absl::OkStatus();
}

// A sparse model (IsSparseModel): its rows are pulled and pushed with every step on the shards
// (worker/sparse_training.h), from LIBSVM or CSV data read as sparse features.
absl::Status ValidateSparseModel(const JobSpec& spec) {
  if (!IsSparseModel(spec.model().kind())) return absl::OkStatus();
  const std::string kind = ModelSpec::Kind_Name(spec.model().kind());
  const DataSpec& data = spec.data();
  if (data.source_case() != DataSpec::kLibsvm && data.source_case() != DataSpec::kCsv) {
    return FieldError("data", absl::StrCat("must be libsvm or csv for ", kind,
                                           ", which reads sparse features: synthetic and MNIST "
                                           "data are dense, for the dense model kinds"));
  }
  if (data.normalize()) {
    return FieldError("data.normalize", absl::StrCat("is for dense features; ", kind,
                                                     " takes the values as they are: unset it"));
  }
  const ConsistencyConfig::Mode mode = spec.consistency().mode();
  if (const ModeTraits* traits = FindModeTraits(mode);
      traits != nullptr && !traits->shards_hold_the_model) {
    return FieldError("consistency.mode",
                      absl::StrCat("is ", ConsistencyConfig::Mode_Name(mode), "; ", kind,
                                   " keeps its table on the shards and needs ",
                                   ModeNames(&ShardsHoldTheModel, "or")));
  }
  if (spec.downpour().ByteSizeLong() > 0) {
    return FieldError("downpour", absl::StrCat("is not supported for ", kind,
                                               ": each step pulls the rows of its own batch's "
                                               "keys and pushes their gradients; unset it"));
  }
  if (spec.record_apply_log()) {
    return FieldError("record_apply_log",
                      absl::StrCat("is not supported yet for ", kind,
                                   " (psctl replay is not checked with sparse models): unset it"));
  }
  return absl::OkStatus();
}

// Whether the job has examples to evaluate on: a validation split or a test set.
bool HasEvaluationData(const DataSpec& data) {
  const bool test = !data.test_data().empty() || !data.has_test_fraction() ||
                    data.test_fraction() > 0;
  return test || data.validation_fraction() > 0;
}

// Batch size, when to stop and when to evaluate.
absl::Status ValidateStopRules(const JobSpec& spec) {
  if (spec.batch_size() < 1 || spec.batch_size() > kMaxBatchSize) {
    return FieldError("batch_size", absl::StrCat("is ", spec.batch_size(), ": it must be 1 to ",
                                                 kMaxBatchSize, " (examples per worker and step)"));
  }
  if (spec.steps() < 0 || spec.epochs() < 0 || spec.time_limit_s() < 0 ||
      spec.target_loss() < 0) {
    return FieldError("steps, epochs, time_limit_s and target_loss", "must be >= 0");
  }
  if (spec.steps() == 0 && spec.epochs() == 0 && spec.time_limit_s() == 0 &&
      spec.target_loss() == 0) {
    return FieldError("steps", "is 0 and so are epochs, target_loss and time_limit_s: "
                               "give the job a stop condition");
  }
  if (spec.early_stopping_evals() < 0) return FieldError("early_stopping_evals", "must be >= 0");
  for (const auto& [field, set] : {std::pair<const char*, bool>{"target_loss",
                                                                spec.target_loss() > 0},
                                   {"early_stopping_evals", spec.early_stopping_evals() > 0}}) {
    if (!set) continue;
    if (spec.eval_interval() < 1) {
      return FieldError("eval_interval", absl::StrCat("must be >= 1 when ", field, " is set"));
    }
    if (!HasEvaluationData(spec.data())) {
      return FieldError(field, "needs examples to evaluate on, and data.test_fraction is 0: set "
                               "data.validation_fraction (or a test set)");
    }
  }
  if (spec.eval_interval() < 0) return FieldError("eval_interval", "must be >= 0");
  return absl::OkStatus();
}

absl::Status ValidateDownpour(const DownpourSpec& downpour, const ModeTraits& mode) {
  if (downpour.n_fetch() < 0 || downpour.n_push() < 0 || downpour.local_learning_rate() < 0) {
    return FieldError("downpour.n_fetch, n_push and local_learning_rate", "must be >= 0");
  }
  if (downpour.overlap_communication() && !mode.downpour) {
    const std::string modes = ModeNames(&UsesDownpour, "or");
    return FieldError("downpour.overlap_communication",
                      absl::StrCat("needs consistency mode ", modes,
                                   ": the other modes make a step wait for the previous one's "
                                   "update; unset it or use ",
                                   modes));
  }
  return absl::OkStatus();
}

// What the job's mode refuses of the rest of the job (its row in common/job/consistency_modes.h),
// then what else it asks.
absl::Status ValidateForMode(const JobSpec& spec, const ModeTraits& mode) {
  const std::string name = ConsistencyConfig::Mode_Name(mode.mode);
  if (*mode.why_no_downpour != '\0' && spec.downpour().ByteSizeLong() > 0) {
    return FieldError("downpour", absl::StrCat("is for ", ModeNames(&UsesDownpour, "and"), "; ",
                                               mode.why_no_downpour, ": unset it"));
  }
  if (mode.family == ModeFamily::kRing && spec.compression().ByteSizeLong() > 0) {
    return FieldError("compression", absl::StrCat("is for the pushes and pulls of the ps modes; ",
                                                  name, "'s ring sends float32: unset it"));
  }
  const bool checkpoints =
      spec.checkpoint().every_steps() > 0 || spec.checkpoint().every_seconds() > 0;
  if (mode.checkpoints == CheckpointPolicy::kNone && checkpoints) {
    return FieldError("checkpoint", absl::StrCat("is not supported in ", name, " (",
                                                 mode.why_no_checkpoints, "): unset it"));
  }
  // The chief publishes the model for a checkpoint at steps it knows (server/consistency/
  // publish_rule.h).
  if (mode.checkpoints == CheckpointPolicy::kPublishedStep &&
      spec.checkpoint().every_seconds() > 0) {
    return FieldError("checkpoint.every_seconds",
                      absl::StrCat("is not supported in ", name,
                                   " (the chief publishes the model for a checkpoint at steps it "
                                   "knows): use checkpoint.every_steps"));
  }
  if (spec.replicas() < 0 || spec.replicas() > 2) {
    return FieldError("replicas", absl::StrCat("is ", spec.replicas(),
                                               ": it is 2 (a backup of every shard on another ps) "
                                               "or 0 (none)"));
  }
  if (spec.replicas() == 2 && spec.record_apply_log()) {
    return FieldError("replicas", "is not supported with record_apply_log yet: unset one");
  }
  // The apply log replays a mode whose result depends on the order updates arrive in; the
  // other modes decide that order themselves (SYNC's barrier, SSP's clocks) or average it away.
  if (spec.record_apply_log() && !mode.replayable) {
    return FieldError("record_apply_log",
                      absl::StrCat("is for ", ModeNames(&Replayable, "and"),
                                   ", whose result depends on the order its updates arrive in; "
                                   "unset it for ",
                                   name));
  }
  return mode.validate_job == nullptr ? absl::OkStatus() : mode.validate_job(spec);
}

// What the wire can carry (proto/parameter.proto's CompressionSpec).
absl::Status ValidateCompression(const CompressionSpec& compression) {
  if (!TensorEncoding_IsValid(compression.encoding())) {
    return FieldError("compression.encoding",
                      absl::StrCat("is ", compression.encoding(),
                                   ": give FLOAT32, FLOAT16 or BFLOAT16"));
  }
  const float fraction = compression.topk_fraction();
  if (!(fraction >= 0 && fraction < 1)) {
    return FieldError("compression.topk_fraction",
                      absl::StrCat("is ", fraction,
                                   ": give the fraction of each shard's gradient a push sends, "
                                   "in (0, 1), or 0 to send all of it"));
  }
  return absl::OkStatus();
}

absl::Status ValidateStragglers(const StragglerSpec& stragglers, int num_workers) {
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
  if (stragglers.busy() && stragglers.distribution() == StragglerSpec::NONE) {
    return FieldError("stragglers.busy", "spends a delay computing: give stragglers.distribution");
  }
  return absl::OkStatus();
}

absl::Status ValidateCheckpointSpec(const CheckpointSpec& checkpoint) {
  if (checkpoint.every_steps() < 0) return FieldError("checkpoint.every_steps", "must be >= 0");
  if (!(checkpoint.every_seconds() >= 0) || std::isinf(checkpoint.every_seconds())) {
    return FieldError("checkpoint.every_seconds", "must be a number >= 0");
  }
  if (checkpoint.keep() < 0) return FieldError("checkpoint.keep", "must be >= 0 (0: keep 3)");
  if (!checkpoint.dir().empty()) {
    return FieldError("checkpoint.dir",
                      "is no longer accepted: a job never names a path on a ps; each ps keeps "
                      "checkpoints under its own --checkpoint_dir (start every ps with "
                      "--checkpoint_dir on a shared file system to share them): remove it");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateId(const std::string& id, const std::string& field) {
  if (id.empty()) return FieldError(field, "is empty: give the job an id");
  bool ok = id.size() <= 128 && id[0] != '.';
  for (char c : id) ok = ok && (absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-');
  if (!ok) {
    return FieldError(field, absl::StrCat("\"", id, "\" is not an id: use letters, digits, '.', "
                                          "'_' and '-' (not first '.'), at most 128"));
  }
  return absl::OkStatus();
}

bool IsSparseModel(ModelSpec::Kind kind) {
  return kind == ModelSpec::SPARSE_LOGISTIC_REGRESSION || kind == ModelSpec::EMBEDDING_BAG_MLP;
}

std::string JobPrefix(const std::string& job_id) { return absl::StrCat("job \"", job_id, "\": "); }

// Sparse tables: named uniquely (also apart from the variables), rows of 1 to kMaxLayerWidth
// floats, a valid initializer, in a mode that keeps the model on the shards.
absl::Status ValidateSparseTables(const ParameterSpec& spec) {
  if (spec.sparse_tables().empty()) return absl::OkStatus();
  const ConsistencyConfig::Mode mode = spec.consistency().mode();
  if (const ModeTraits* traits = FindModeTraits(mode);
      traits != nullptr && !traits->shards_hold_the_model) {
    return FieldError("sparse_tables",
                      absl::StrCat("are for ", ModeNames(&ShardsHoldTheModel, "and"), ", not ",
                                   ConsistencyConfig::Mode_Name(mode),
                                   " (its shards hold no model of their own, or old copies)"));
  }
  std::set<std::string> names;
  for (const VariableDef& variable : spec.variables()) names.insert(variable.name());
  for (int t = 0; t < spec.sparse_tables_size(); ++t) {
    const SparseTableDef& table = spec.sparse_tables(t);
    const std::string field = absl::StrCat("sparse_tables[", t, "]");
    if (table.name().empty() || table.name().size() > static_cast<size_t>(kMaxVariableNameBytes)) {
      return FieldError(field + ".name",
                        absl::StrCat("must be 1 to ", kMaxVariableNameBytes, " bytes"));
    }
    if (!names.insert(table.name()).second) {
      return FieldError(field + ".name", absl::StrCat("\"", table.name(),
                                                      "\" is taken by another table or variable"));
    }
    if (table.width() < 1 || table.width() > kMaxLayerWidth) {
      return FieldError(field + ".width", absl::StrCat("is ", table.width(), ": a row holds 1 to ",
                                                       kMaxLayerWidth, " floats"));
    }
    VariableDef as_variable;  // The initializer's view of a row.
    as_variable.set_name(table.name());
    as_variable.add_shape(1);
    as_variable.add_shape(table.width());
    *as_variable.mutable_initializer() = table.initializer();
    absl::Status status = ValidateInitializer(as_variable);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

namespace {

absl::Status ValidateDataHandout(const ParameterSpec& spec) {
  if (!spec.has_data_handout()) return absl::OkStatus();
  const DataHandoutSpec& handout = spec.data_handout();
  if (handout.batches_per_epoch() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("data_handout.batches_per_epoch is ",
                                                   handout.batches_per_epoch(),
                                                   ": at least 1 (or no data_handout)"));
  }
  if (handout.epochs() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("data_handout.epochs is ", handout.epochs(),
                                                   ": 0 (no limit) or more"));
  }
  if (handout.epochs() > 0 &&
      handout.batches_per_epoch() > std::numeric_limits<int64_t>::max() / handout.epochs()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data_handout: ", handout.epochs(), " epochs of ", handout.batches_per_epoch(),
        " batches are more batches than can be numbered"));
  }
  if (spec.record_apply_log()) {
    return absl::InvalidArgumentError(
        "data_handout is not supported with record_apply_log yet: unset one");
  }
  const ModeTraits* mode = FindModeTraits(spec.consistency().mode());
  if (mode != nullptr && !mode->shards_hold_the_model) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data_handout is for modes whose workers push gradients to the shards (",
        ModeNames(ShardsHoldTheModel, "and"), "), not ",
        ConsistencyConfig::Mode_Name(spec.consistency().mode())));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// A grown job's workers (ParameterSpec.worker_addresses, workers_before_growth): none, or one
// "host:port" per worker and the number it had before it grew.
absl::Status ValidateGrownMembership(const ParameterSpec& spec) {
  if (spec.worker_addresses().empty()) {
    if (spec.workers_before_growth() == 0) return absl::OkStatus();
    return FieldError("workers_before_growth",
                      "is set, but worker_addresses is empty: a job that grew lists every "
                      "worker's address");
  }
  if (spec.worker_addresses_size() != spec.num_workers()) {
    return FieldError("worker_addresses",
                      absl::StrCat("lists ", spec.worker_addresses_size(), " workers and "
                                   "num_workers is ", spec.num_workers(),
                                   ": a job that grew lists every worker's address, in order"));
  }
  for (int w = 0; w < spec.worker_addresses_size(); ++w) {
    absl::StatusOr<HostPort> address = ParseHostPort(spec.worker_addresses(w));
    if (!address.ok()) {
      return FieldError(absl::StrCat("worker_addresses[", w, "]"),
                        absl::StrCat("is \"", spec.worker_addresses(w), "\": ",
                                     address.status().message()));
    }
  }
  if (spec.workers_before_growth() < 1 || spec.workers_before_growth() > spec.num_workers()) {
    return FieldError("workers_before_growth",
                      absl::StrCat("is ", spec.workers_before_growth(), ": a job that grew had 1 "
                                   "to num_workers (", spec.num_workers(), ") before"));
  }
  return absl::OkStatus();
}

}  // namespace

ParameterSpec WithoutMembership(ParameterSpec spec) {
  spec.clear_num_workers();
  spec.clear_worker_addresses();
  spec.clear_workers_before_growth();
  return spec;
}

absl::Status ValidateParameterSpec(const ParameterSpec& spec) {
  absl::Status id = ValidateId(spec.job_id(), "job_id");
  if (!id.ok()) return id;
  if (!spec.run_id().empty()) {
    id = ValidateId(spec.run_id(), "run_id");
    if (!id.ok()) return id;
  }
  const std::string prefix = JobPrefix(spec.job_id());
  if (spec.variables().empty()) {
    return absl::InvalidArgumentError(prefix + "variables is empty: a job needs variables");
  }
  if (spec.variables_size() > kMaxVariables) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "variables has ",
                                                   spec.variables_size(),
                                                   " entries: a job has at most ", kMaxVariables));
  }
  if (spec.num_workers() < 1 || spec.num_workers() > kMaxWorkers) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "num_workers is ", spec.num_workers(),
                                                   ": it must be 1 to ", kMaxWorkers));
  }
  if (spec.worker_lease_ms() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "worker_lease_ms is ",
                                                   spec.worker_lease_ms(), ": it must be >= 0"));
  }
  absl::Status membership = ValidateGrownMembership(spec);
  if (!membership.ok()) return Prefixed(prefix, membership);
  for (int v = 0; v < spec.variables_size(); ++v) {
    const VariableDef& variable = spec.variables(v);
    if (variable.name().size() > static_cast<size_t>(kMaxVariableNameBytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "variables[", v, "].name has ", variable.name().size(),
                       " bytes: at most ", kMaxVariableNameBytes));
    }
    if (variable.shape_size() > kMaxVariableRank) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "variable \"", variable.name(), "\": shape has ", variable.shape_size(),
          " dimensions: at most ", kMaxVariableRank));
    }
    absl::Status status = ValidateInitializer(variable);
    if (!status.ok()) return Prefixed(prefix, status);
  }
  absl::Status status = ValidateSparseTables(spec);
  if (!status.ok()) return Prefixed(prefix, status);
  status = ValidateCompression(spec.compression());
  if (!status.ok()) return Prefixed(prefix, status);
  status = ValidateLearningRateSchedule(spec.learning_rate());
  if (!status.ok()) return Prefixed(prefix, status);
  status = ValidateConsistencyConfig(spec.consistency(), spec.num_workers());
  if (!status.ok()) return Prefixed(prefix, status);
  status = ValidateDataHandout(spec);
  if (!status.ok()) return Prefixed(prefix, status);
  return Prefixed(prefix, ValidateOptimizerConfig(spec.optimizer()));
}

namespace {

// A program job (JobSpec.program): the program holds the model, reads the data and decides
// when to stop; the ps's side (consistency, optimizer, schedule, compression) is checked as for
// any job.
absl::Status ValidateProgramJob(const JobSpec& spec, int num_workers) {
  if (spec.program().argv().empty() || spec.program().argv(0).empty()) {
    return FieldError("program.argv", "is empty: name the program and its arguments, e.g. "
                                      "[\"python3\", \"train.py\"]");
  }
  if (spec.has_model() || spec.has_data()) {
    return FieldError(spec.has_model() ? "model" : "data",
                      "is set, but a program job's model and data are its program's: unset it");
  }
  absl::Status status = ValidateConsistencyConfig(spec.consistency(), num_workers);
  if (!status.ok()) return status;
  const ModeTraits& mode = ModeTraitsOf(spec.consistency().mode());  // Validated above.
  if (!mode.shards_hold_the_model || mode.center_moves_by_differences ||
      spec.downpour().ByteSizeLong() > 0) {
    return FieldError("consistency.mode",
                      absl::StrCat("is ", ConsistencyConfig::Mode_Name(mode.mode),
                                   ", but a program's workers pull the model from the shards and "
                                   "push gradients (without downpour's options): use ",
                                   ModeNames(
                                       [](const ModeTraits& m) {
                                         return m.shards_hold_the_model &&
                                                !m.center_moves_by_differences;
                                       },
                                       "or")));
  }
  status = ValidateCompression(spec.compression());
  if (!status.ok()) return status;
  status = ValidateForMode(spec, mode);
  if (!status.ok()) return status;
  status = ValidateLearningRateSchedule(spec.learning_rate());
  if (!status.ok()) return status;
  return ValidateOptimizerConfig(spec.optimizer());
}

}  // namespace

absl::Status ValidateJobSpec(const JobSpec& spec, int num_workers) {
  absl::Status status = ValidateId(spec.job_id(), "job_id");
  if (!status.ok()) return status;
  if (!spec.run_id().empty()) {
    status = ValidateId(spec.run_id(), "run_id");
    if (!status.ok()) return status;
  }
  status = ValidateCheckpointSpec(spec.checkpoint());
  if (!status.ok()) return status;
  if (!(spec.worker_lease_s() >= 0) || std::isinf(spec.worker_lease_s())) {
    return FieldError("worker_lease_s", "must be a number >= 0 (0: no lease)");
  }
  if (spec.has_program()) return ValidateProgramJob(spec, num_workers);
  status = ValidateModel(spec.model());
  if (!status.ok()) return status;
  const bool sparse = IsSparseModel(spec.model().kind());
  status = ValidateData(spec.data(), sparse);
  if (!status.ok()) return status;
  status = ValidateSharding(spec);
  if (!status.ok()) return status;
  status = ValidateSparseModel(spec);
  if (!status.ok()) return status;
  status = ValidateStopRules(spec);
  if (!status.ok()) return status;
  status = ValidateConsistencyConfig(spec.consistency(), num_workers);
  if (!status.ok()) return status;
  status = ValidateElastic(spec, num_workers);
  if (!status.ok()) return status;
  const ModeTraits& mode = ModeTraitsOf(spec.consistency().mode());  // Validated above.
  status = ValidateDownpour(spec.downpour(), mode);
  if (!status.ok()) return status;
  status = ValidateCompression(spec.compression());
  if (!status.ok()) return status;
  status = ValidateForMode(spec, mode);
  if (!status.ok()) return status;
  status = ValidateStragglers(spec.stragglers(), num_workers);
  if (!status.ok()) return status;
  status = ValidateLearningRateSchedule(spec.learning_rate());
  if (!status.ok()) return status;
  return ValidateOptimizerConfig(spec.optimizer());
}

absl::Status ValidateConsistencyConfig(const ConsistencyConfig& consistency, int num_workers) {
  const ModeTraits* mode = FindModeTraits(consistency.mode());
  if (mode == nullptr) {
    return FieldError("consistency.mode",
                      absl::StrCat("is not set: use ",
                                   ModeNames([](const ModeTraits&) { return true; }, "or")));
  }
  return mode->validate_settings(consistency, num_workers);
}

absl::Status ValidateOptimizerConfig(const OptimizerConfig& config) {
  switch (config.kind()) {
    case OptimizerConfig::SGD:
      return absl::OkStatus();
    case OptimizerConfig::MOMENTUM:
      return CheckFraction("momentum", config.momentum());
    case OptimizerConfig::ADAGRAD: {
      absl::Status status = CheckNonNegative("epsilon", config.epsilon());
      if (!status.ok()) return status;
      return CheckNonNegative("initial_accumulator", config.initial_accumulator());
    }
    case OptimizerConfig::ADAM: {
      absl::Status status = CheckFraction("beta1", config.beta1());
      if (!status.ok()) return status;
      status = CheckFraction("beta2", config.beta2());
      if (!status.ok()) return status;
      return CheckNonNegative("epsilon", config.epsilon());
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer.kind ", static_cast<int>(config.kind()),
                       " is unknown: use SGD, MOMENTUM, ADAGRAD or ADAM"));
  }
}

absl::Status ValidateLearningRateSchedule(const LearningRateSchedule& schedule) {
  if (!(schedule.base() > 0) || !std::isfinite(schedule.base())) {
    return absl::InvalidArgumentError(
        absl::StrCat("learning_rate.base must be finite and > 0, got ", schedule.base()));
  }
  switch (schedule.kind()) {
    case LearningRateSchedule::CONSTANT:
      return absl::OkStatus();
    case LearningRateSchedule::STEP_DECAY:
      if (schedule.decay_steps() <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("learning_rate.decay_steps must be > 0 for STEP_DECAY, got ",
                         schedule.decay_steps()));
      }
      if (!(schedule.decay_factor() > 0 && schedule.decay_factor() <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("learning_rate.decay_factor must be in (0, 1] for STEP_DECAY, got ",
                         schedule.decay_factor()));
      }
      return absl::OkStatus();
    case LearningRateSchedule::LINEAR_WARMUP:
      if (schedule.warmup_steps() <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("learning_rate.warmup_steps must be > 0 for LINEAR_WARMUP, got ",
                         schedule.warmup_steps()));
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("learning_rate.kind ", static_cast<int>(schedule.kind()),
                       " is unknown: use CONSTANT, STEP_DECAY or LINEAR_WARMUP"));
  }
}

absl::Status ValidateInitializer(const VariableDef& variable) {
  const InitializerConfig& initializer = variable.initializer();
  switch (initializer.kind()) {
    case InitializerConfig::ZEROS:
    case InitializerConfig::GLOROT_UNIFORM:
      return absl::OkStatus();
    case InitializerConfig::CONSTANT:
      if (std::isfinite(initializer.scale())) return absl::OkStatus();
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", variable.name(),
                       "\": initializer.scale must be finite for CONSTANT, got ",
                       initializer.scale()));
    case InitializerConfig::UNIFORM:
    case InitializerConfig::NORMAL:
      if (initializer.scale() >= 0 && std::isfinite(initializer.scale())) {
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", variable.name(), "\": initializer.scale must be finite and >= 0 for ",
          InitializerConfig::Kind_Name(initializer.kind()), ", got ", initializer.scale()));
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", variable.name(), "\": initializer.kind ",
          static_cast<int>(initializer.kind()),
          " is unknown: use ZEROS, UNIFORM, NORMAL, GLOROT_UNIFORM or CONSTANT"));
  }
}

}  // namespace ps
