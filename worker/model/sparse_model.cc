#include "worker/model/sparse_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/model/check_variable.h"

namespace ps {
namespace {

using model_internal::CheckVariable;

constexpr int kDefaultEmbeddingDim = 16;

double Sigmoid(double z) {
  if (z >= 0) return 1 / (1 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1 + e);
}

SparseTableDef Table(const std::string& name, int width, const InitializerConfig& initializer) {
  SparseTableDef table;
  table.set_name(name);
  table.set_width(width);
  *table.mutable_initializer() = initializer;
  return table;
}

// Binary logistic regression on a table of weights (width 1) and a dense bias.
class SparseLogisticRegression : public SparseModel {
 public:
  explicit SparseLogisticRegression(int max_batch_size)
      : SparseModel(Table("weights", 1, InitializerConfig()), BiasVariable()),
        max_batch_size_(max_batch_size) {}

  absl::StatusOr<BatchMetrics> ComputeGradients(const SparseBatch& batch,
                                                const ConstVariables& weights,
                                                absl::Span<const float> rows,
                                                const MutableVariables& gradients,
                                                absl::Span<float> row_gradients) override {
    return Run(batch, weights, rows, &gradients, &row_gradients);
  }

  absl::StatusOr<BatchMetrics> Evaluate(const SparseBatch& batch, const ConstVariables& weights,
                                        absl::Span<const float> rows) override {
    return Run(batch, weights, rows, nullptr, nullptr);
  }

 private:
  static std::vector<VariableDef> BiasVariable() {
    VariableDef bias;
    bias.set_name("bias");
    bias.add_shape(1);
    bias.mutable_initializer()->set_kind(InitializerConfig::ZEROS);
    return {bias};
  }

  absl::StatusOr<BatchMetrics> Run(const SparseBatch& batch, const ConstVariables& weights,
                                   absl::Span<const float> rows, const MutableVariables* gradients,
                                   absl::Span<float>* row_gradients) {
    absl::Status status = CheckBatch(batch, max_batch_size_, 2, rows, row_gradients);
    if (status.ok()) status = CheckVariable(weights, "weights", "bias", 1);
    if (status.ok() && gradients != nullptr) {
      status = CheckVariable(*gradients, "gradients", "bias", 1);
    }
    if (!status.ok()) return status;
    const double bias = weights.at("bias")[0];
    double bias_gradient = 0;
    if (row_gradients != nullptr) std::fill(row_gradients->begin(), row_gradients->end(), 0.0f);
    double loss = 0;
    int correct = 0;
    for (int b = 0; b < batch.size; ++b) {
      double z = bias;
      for (int64_t j = batch.offsets[b]; j < batch.offsets[b + 1]; ++j) {
        z += static_cast<double>(batch.values[j]) * rows[batch.slots[j]];
      }
      const double y = batch.labels[b];
      // log(1 + exp(-z)) for y = 1, log(1 + exp(z)) for y = 0, without overflow.
      loss += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
      if ((z > 0) == (y > 0.5)) ++correct;
      if (gradients == nullptr) continue;
      const double d = (Sigmoid(z) - y) / batch.size;
      bias_gradient += d;
      for (int64_t j = batch.offsets[b]; j < batch.offsets[b + 1]; ++j) {
        (*row_gradients)[batch.slots[j]] += static_cast<float>(d * batch.values[j]);
      }
    }
    if (gradients != nullptr) gradients->at("bias")[0] = static_cast<float>(bias_gradient);
    BatchMetrics metrics;
    metrics.loss = loss / batch.size;
    metrics.accuracy = static_cast<double>(correct) / batch.size;
    metrics.examples = batch.size;
    return metrics;
  }

  const int max_batch_size_;
};

// The bag of embeddings, made and scattered here, and an MLP (model.h) on it.
class EmbeddingBagMlp : public SparseModel {
 public:
  EmbeddingBagMlp(SparseTableDef table, std::unique_ptr<Model> mlp, int num_classes,
                  int max_batch_size)
      : SparseModel(std::move(table), mlp->variables()),
        width_(static_cast<int>(this->table().width())),
        num_classes_(num_classes),
        max_batch_size_(max_batch_size),
        mlp_(std::move(mlp)) {}

  absl::StatusOr<BatchMetrics> ComputeGradients(const SparseBatch& batch,
                                                const ConstVariables& weights,
                                                absl::Span<const float> rows,
                                                const MutableVariables& gradients,
                                                absl::Span<float> row_gradients) override {
    absl::Status status = CheckBatch(batch, max_batch_size_, num_classes_, rows, &row_gradients);
    if (!status.ok()) return status;
    const Batch bags = MakeBags(batch, rows);
    bag_gradients_.resize(bags_.size());
    absl::StatusOr<BatchMetrics> metrics = mlp_->ComputeGradientsAndFeatureGradients(
        bags, weights, gradients, absl::MakeSpan(bag_gradients_));
    if (!metrics.ok()) return metrics.status();
    // Each feature's row gets its value times its example's bag gradient.
    std::fill(row_gradients.begin(), row_gradients.end(), 0.0f);
    for (int b = 0; b < batch.size; ++b) {
      const float* bag_gradient = bag_gradients_.data() + static_cast<size_t>(b) * width_;
      for (int64_t j = batch.offsets[b]; j < batch.offsets[b + 1]; ++j) {
        float* row = row_gradients.data() + static_cast<size_t>(batch.slots[j]) * width_;
        const float value = batch.values[j];
        for (int d = 0; d < width_; ++d) row[d] += value * bag_gradient[d];
      }
    }
    return metrics;
  }

  absl::StatusOr<BatchMetrics> Evaluate(const SparseBatch& batch, const ConstVariables& weights,
                                        absl::Span<const float> rows) override {
    absl::Status status = CheckBatch(batch, max_batch_size_, num_classes_, rows, nullptr);
    if (!status.ok()) return status;
    return mlp_->Evaluate(MakeBags(batch, rows), weights);
  }

 private:
  // bags_[b] = sum over example b's features of value * row; the MLP's batch.
  Batch MakeBags(const SparseBatch& batch, absl::Span<const float> rows) {
    bags_.assign(static_cast<size_t>(batch.size) * width_, 0.0f);
    for (int b = 0; b < batch.size; ++b) {
      float* bag = bags_.data() + static_cast<size_t>(b) * width_;
      for (int64_t j = batch.offsets[b]; j < batch.offsets[b + 1]; ++j) {
        const float* row = rows.data() + static_cast<size_t>(batch.slots[j]) * width_;
        const float value = batch.values[j];
        for (int d = 0; d < width_; ++d) bag[d] += value * row[d];
      }
    }
    Batch bags;
    bags.size = batch.size;
    bags.feature_dim = width_;
    bags.features = bags_.data();
    bags.labels = batch.labels.data();
    return bags;
  }

  const int width_;
  const int num_classes_;
  const int max_batch_size_;
  const std::unique_ptr<Model> mlp_;
  std::vector<float> bags_, bag_gradients_;
};

}  // namespace

absl::Status SparseModel::CheckBatch(const SparseBatch& batch, int max_batch_size, int num_classes,
                                     absl::Span<const float> rows,
                                     const absl::Span<float>* row_gradients) const {
  if (batch.size < 1 || batch.size > max_batch_size) {
    return absl::InvalidArgumentError(absl::StrCat("batch size is ", batch.size,
                                                   "; it must be between 1 and max_batch_size (",
                                                   max_batch_size, ")"));
  }
  if (batch.offsets.size() != static_cast<size_t>(batch.size) + 1 ||
      batch.labels.size() != static_cast<size_t>(batch.size) || batch.offsets.front() != 0 ||
      batch.slots.size() != batch.values.size() ||
      batch.offsets.back() != static_cast<int64_t>(batch.slots.size()) ||
      !std::is_sorted(batch.offsets.begin(), batch.offsets.end())) {
    return absl::InvalidArgumentError(
        "sparse batch is malformed: offsets, slots, values and labels disagree on its size "
        "(make it with GatherSparseBatch)");
  }
  for (const int32_t slot : batch.slots) {
    if (slot < 0 || static_cast<size_t>(slot) >= batch.keys.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sparse batch slot ", slot, " is outside its ", batch.keys.size(), " keys"));
    }
  }
  for (int b = 0; b < batch.size; ++b) {
    const float label = batch.labels[b];
    if (!(label >= 0 && label < static_cast<float>(num_classes) && label == std::floor(label))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch label ", b, " is ", label, "; labels are class ids in [0, ", num_classes, ")"));
    }
  }
  const size_t expected = batch.keys.size() * static_cast<size_t>(table_.width());
  if (rows.size() != expected || (row_gradients != nullptr && row_gradients->size() != expected)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rows of table \"", table_.name(), "\": ", rows.size(), " values",
        row_gradients != nullptr ? absl::StrCat(" and ", row_gradients->size(), " gradients") : "",
        " for ", batch.keys.size(), " keys of width ", table_.width(), "; expected ", expected));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SparseModel>> SparseModel::Create(const ModelSpec& spec,
                                                                 int num_classes,
                                                                 int max_batch_size,
                                                                 ComputeBackend* backend) {
  if (max_batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_size is ", max_batch_size, "; it must be at least 1"));
  }
  switch (spec.kind()) {
    case ModelSpec::SPARSE_LOGISTIC_REGRESSION:
      if (num_classes != 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            "SPARSE_LOGISTIC_REGRESSION needs binary labels (2 classes: 0 and 1, or -1 and +1); "
            "the data has ",
            num_classes == 0 ? "regression targets" : absl::StrCat(num_classes, " classes"),
            ": use EMBEDDING_BAG_MLP for more classes"));
      }
      return std::unique_ptr<SparseModel>(new SparseLogisticRegression(max_batch_size));
    case ModelSpec::EMBEDDING_BAG_MLP: {
      if (num_classes < 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            "num_classes is ", num_classes, "; EMBEDDING_BAG_MLP needs class labels, at least 2"));
      }
      if (spec.embedding_dim() < 0) {
        return absl::InvalidArgumentError(absl::StrCat("model.embedding_dim is ",
                                                       spec.embedding_dim(),
                                                       "; it must be >= 1 "
                                                       "(0: ",
                                                       kDefaultEmbeddingDim, ")"));
      }
      const int width = spec.embedding_dim() > 0 ? spec.embedding_dim() : kDefaultEmbeddingDim;
      ModelSpec mlp_spec;
      mlp_spec.set_kind(spec.hidden_sizes().empty() ? ModelSpec::SOFTMAX_REGRESSION
                                                    : ModelSpec::MLP);
      *mlp_spec.mutable_hidden_sizes() = spec.hidden_sizes();
      mlp_spec.set_activation(spec.activation());
      if (spec.has_weight_initializer()) {
        *mlp_spec.mutable_weight_initializer() = spec.weight_initializer();
      }
      absl::StatusOr<std::unique_ptr<Model>> mlp =
          Model::Create(mlp_spec, width, num_classes, max_batch_size, backend);
      if (!mlp.ok()) return mlp.status();
      InitializerConfig initializer;
      if (spec.has_weight_initializer()) {
        initializer = spec.weight_initializer();
      } else {
        initializer.set_kind(InitializerConfig::GLOROT_UNIFORM);
      }
      return std::unique_ptr<SparseModel>(new EmbeddingBagMlp(
          Table("embeddings", width, initializer), *std::move(mlp), num_classes, max_batch_size));
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model kind ", ModelSpec::Kind_Name(spec.kind()),
                   " is not a sparse model: use SPARSE_LOGISTIC_REGRESSION or EMBEDDING_BAG_MLP"));
}

}  // namespace ps
