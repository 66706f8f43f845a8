#include "worker/model/model.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/model/check_variable.h"
#include "worker/model/conv_model.h"

namespace ps {
namespace {

using model_internal::CheckVariable;

enum class LossKind { kSquaredError, kSigmoidCrossEntropy, kSoftmaxCrossEntropy };

// One dense layer, output = input * weights + bias, with its buffers in the backend's memory.
struct Layer {
  int in = 0;
  int out = 0;
  std::string weights_name;
  std::string bias_name;
  DeviceArray weights;           // [in, out]
  DeviceArray bias;              // [out]
  DeviceArray weights_gradient;  // [in, out]
  DeviceArray bias_gradient;     // [out]
  // [max_batch_size, out]: the pre-activation, replaced by the activation in hidden layers.
  DeviceArray output;
  // [max_batch_size, out]: the loss's gradient with respect to the pre-activation.
  DeviceArray output_gradient;
};

// A stack of dense layers: hidden ones followed by `activation`, the last one fed to the loss.
class DenseModel : public Model {
 public:
  DenseModel(std::vector<VariableDef> variables, bool is_classifier, const std::vector<int>& sizes,
             Activation activation, LossKind loss, int num_classes, int max_batch_size,
             ComputeBackend* backend)
      : Model(std::move(variables), is_classifier),
        activation_(activation),
        loss_(loss),
        num_classes_(num_classes),
        max_batch_size_(max_batch_size),
        backend_(backend),
        input_(backend, static_cast<size_t>(max_batch_size) * sizes.front()),
        labels_(backend, static_cast<size_t>(max_batch_size)) {
    layers_.resize(sizes.size() - 1);
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
      Layer& layer = layers_[i];
      layer.in = sizes[i];
      layer.out = sizes[i + 1];
      layer.weights_name = absl::StrCat("layer", i, "/weights");
      layer.bias_name = absl::StrCat("layer", i, "/bias");
      size_t weight_count = static_cast<size_t>(layer.in) * layer.out;
      size_t output_count = static_cast<size_t>(max_batch_size) * layer.out;
      layer.weights = DeviceArray(backend, weight_count);
      layer.bias = DeviceArray(backend, layer.out);
      layer.weights_gradient = DeviceArray(backend, weight_count);
      layer.bias_gradient = DeviceArray(backend, layer.out);
      layer.output = DeviceArray(backend, output_count);
      layer.output_gradient = DeviceArray(backend, output_count);
    }
  }

  absl::StatusOr<BatchMetrics> ComputeGradients(const Batch& batch, const ConstVariables& weights,
                                                const MutableVariables& gradients) override {
    return Run(batch, weights, &gradients, nullptr);
  }

  absl::StatusOr<BatchMetrics> ComputeGradientsAndFeatureGradients(
      const Batch& batch, const ConstVariables& weights, const MutableVariables& gradients,
      absl::Span<float> feature_gradients) override {
    const size_t expected = static_cast<size_t>(std::max(batch.size, 0)) * layers_.front().in;
    if (feature_gradients.size() != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("feature_gradients has ", feature_gradients.size(),
                       " elements; the batch needs ", expected, " (batch size x feature_dim)"));
    }
    return Run(batch, weights, &gradients, feature_gradients.data());
  }

  absl::StatusOr<BatchMetrics> Evaluate(const Batch& batch,
                                        const ConstVariables& weights) override {
    return Run(batch, weights, nullptr, nullptr);
  }

 private:
  absl::Status CheckBatch(const Batch& batch) const;

  // Computes the metrics, the gradients when `gradients` is not null, and the features'
  // gradients (batch.size x feature_dim, host memory) when `feature_gradients` is not null too.
  absl::StatusOr<BatchMetrics> Run(const Batch& batch, const ConstVariables& weights,
                                   const MutableVariables* gradients, float* feature_gradients);
  void Forward(int rows);
  LossSums Loss(int rows);
  void Backward(int rows);

  const Activation activation_;
  const LossKind loss_;
  const int num_classes_;
  const int max_batch_size_;
  ComputeBackend* const backend_;
  DeviceArray input_;   // [max_batch_size, feature_dim]
  DeviceArray labels_;  // [max_batch_size]
  std::vector<Layer> layers_;
};

absl::Status DenseModel::CheckBatch(const Batch& batch) const {
  // The loss kernels index by label, so classes outside the range must not reach them.
  const int classes = loss_ == LossKind::kSquaredError          ? 0
                      : loss_ == LossKind::kSigmoidCrossEntropy ? 2
                                                                : num_classes_;
  return ps::CheckBatch(batch, max_batch_size_, layers_.front().in, classes);
}

absl::StatusOr<BatchMetrics> DenseModel::Run(const Batch& batch, const ConstVariables& weights,
                                             const MutableVariables* gradients,
                                             float* feature_gradients) {
  absl::Status status = CheckBatch(batch);
  if (!status.ok()) return status;
  auto check = [&](const std::string& name, size_t count) {
    absl::Status result = CheckVariable(weights, "weights", name, count);
    if (result.ok() && gradients != nullptr) {
      result = CheckVariable(*gradients, "gradients", name, count);
    }
    return result;
  };
  for (const Layer& layer : layers_) {
    status = check(layer.weights_name, layer.weights.size());
    if (status.ok()) status = check(layer.bias_name, layer.bias.size());
    if (!status.ok()) return status;
  }

  const int rows = batch.size;
  backend_->CopyToDevice(batch.features, static_cast<size_t>(rows) * batch.feature_dim,
                         input_.data());
  backend_->CopyToDevice(batch.labels, rows, labels_.data());
  for (Layer& layer : layers_) {
    backend_->CopyToDevice(weights.at(layer.weights_name).data(), layer.weights.size(),
                           layer.weights.data());
    backend_->CopyToDevice(weights.at(layer.bias_name).data(), layer.bias.size(),
                           layer.bias.data());
  }
  Forward(rows);
  LossSums sums = Loss(rows);
  if (gradients != nullptr) {
    Backward(rows);
    for (const Layer& layer : layers_) {
      backend_->CopyToHost(layer.weights_gradient.data(), layer.weights_gradient.size(),
                           gradients->at(layer.weights_name).data());
      backend_->CopyToHost(layer.bias_gradient.data(), layer.bias_gradient.size(),
                           gradients->at(layer.bias_name).data());
    }
    if (feature_gradients != nullptr) {
      // dInput = dZ0 * W0^T, into input_, whose values Backward no longer needs.
      const Layer& first = layers_.front();
      backend_->Gemm(false, true, rows, first.in, first.out, 1.0f, first.output_gradient.data(),
                     first.weights.data(), 0.0f, input_.data());
      backend_->CopyToHost(input_.data(), static_cast<size_t>(rows) * first.in, feature_gradients);
    }
  }

  BatchMetrics metrics;
  metrics.loss = sums.loss / rows;
  metrics.accuracy = is_classifier() ? static_cast<double>(sums.correct) / rows : 0.0;
  metrics.examples = rows;
  return metrics;
}

void DenseModel::Forward(int rows) {
  const float* input = input_.data();
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& layer = layers_[i];
    backend_->Gemm(false, false, rows, layer.out, layer.in, 1.0f, input, layer.weights.data(), 0.0f,
                   layer.output.data());
    backend_->AddBias(rows, layer.out, layer.bias.data(), layer.output.data());
    if (i + 1 < layers_.size()) {
      backend_->ActivationForward(activation_, static_cast<size_t>(rows) * layer.out,
                                  layer.output.data(), layer.output.data());
    }
    input = layer.output.data();
  }
}

LossSums DenseModel::Loss(int rows) {
  Layer& last = layers_.back();
  const float scale = 1.0f / static_cast<float>(rows);
  switch (loss_) {
    case LossKind::kSquaredError:
      return backend_->SquaredError(rows, last.output.data(), labels_.data(), scale,
                                    last.output_gradient.data());
    case LossKind::kSigmoidCrossEntropy:
      return backend_->SigmoidCrossEntropy(rows, last.output.data(), labels_.data(), scale,
                                           last.output_gradient.data());
    case LossKind::kSoftmaxCrossEntropy:
      break;
  }
  return backend_->SoftmaxCrossEntropy(rows, last.out, last.output.data(), labels_.data(), scale,
                                       last.output_gradient.data());
}

void DenseModel::Backward(int rows) {
  for (size_t i = layers_.size(); i-- > 0;) {
    Layer& layer = layers_[i];
    const float* input = i == 0 ? input_.data() : layers_[i - 1].output.data();
    // dW = input^T * dZ, db = column sums of dZ.
    backend_->Gemm(true, false, layer.in, layer.out, rows, 1.0f, input,
                   layer.output_gradient.data(), 0.0f, layer.weights_gradient.data());
    backend_->ColumnSums(rows, layer.out, layer.output_gradient.data(), layer.bias_gradient.data());
    if (i == 0) break;
    // dInput = dZ * W^T, then through the previous layer's activation.
    Layer& previous = layers_[i - 1];
    backend_->Gemm(false, true, rows, layer.in, layer.out, 1.0f, layer.output_gradient.data(),
                   layer.weights.data(), 0.0f, previous.output_gradient.data());
    backend_->ActivationBackward(activation_, static_cast<size_t>(rows) * previous.out,
                                 previous.output.data(), previous.output_gradient.data(),
                                 previous.output_gradient.data());
  }
}

}  // namespace

absl::Status CheckBatch(const Batch& batch, int max_batch_size, int feature_dim, int classes) {
  if (batch.size < 1 || batch.size > max_batch_size) {
    return absl::InvalidArgumentError(absl::StrCat("batch size is ", batch.size,
                                                   "; it must be between 1 and max_batch_size (",
                                                   max_batch_size, ")"));
  }
  if (batch.feature_dim != feature_dim) {
    return absl::InvalidArgumentError(absl::StrCat("batch feature_dim is ", batch.feature_dim,
                                                   "; the model's is ", feature_dim));
  }
  if (batch.features == nullptr || batch.labels == nullptr) {
    return absl::InvalidArgumentError("batch features or labels are null");
  }
  for (int r = 0; classes > 0 && r < batch.size; ++r) {
    const float label = batch.labels[r];
    if (!(label >= 0 && label < static_cast<float>(classes) && label == std::floor(label))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch label ", r, " is ", label, "; labels are class ids in [0, ", classes, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Activation> ToActivation(ModelSpec::Activation activation) {
  switch (activation) {
    case ModelSpec::RELU:
      return Activation::kRelu;
    case ModelSpec::TANH:
      return Activation::kTanh;
    case ModelSpec::SIGMOID:
      return Activation::kSigmoid;
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("model activation ", static_cast<int>(activation),
                                                 " is unknown; use RELU, TANH or SIGMOID"));
}

absl::StatusOr<std::unique_ptr<Model>> Model::Create(const ModelSpec& spec, int feature_dim,
                                                     int num_classes, int max_batch_size,
                                                     ComputeBackend* backend) {
  if (backend == nullptr) return absl::InvalidArgumentError("model backend is null");
  if (feature_dim < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("feature_dim is ", feature_dim, "; a model needs at least one feature"));
  }
  if (max_batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_size is ", max_batch_size, "; it must be at least 1"));
  }
  if (spec.kind() == ModelSpec::CNN) {
    return CreateConvModel(spec, feature_dim, num_classes, max_batch_size, backend);
  }
  const bool multiclass =
      spec.kind() == ModelSpec::SOFTMAX_REGRESSION || spec.kind() == ModelSpec::MLP;
  if (multiclass && num_classes < 2) {
    return absl::InvalidArgumentError(absl::StrCat("num_classes is ", num_classes, "; ",
                                                   ModelSpec::Kind_Name(spec.kind()),
                                                   " needs at least 2"));
  }

  // Layer widths, input first.
  std::vector<int> sizes = {feature_dim};
  LossKind loss = LossKind::kSoftmaxCrossEntropy;
  Activation activation = Activation::kRelu;
  switch (spec.kind()) {
    case ModelSpec::LINEAR_REGRESSION:
      loss = LossKind::kSquaredError;
      sizes.push_back(1);
      break;
    case ModelSpec::LOGISTIC_REGRESSION:
      loss = LossKind::kSigmoidCrossEntropy;
      sizes.push_back(1);
      break;
    case ModelSpec::SOFTMAX_REGRESSION:
      sizes.push_back(num_classes);
      break;
    case ModelSpec::MLP: {
      if (spec.hidden_sizes_size() == 0) {
        return absl::InvalidArgumentError(
            "model hidden_sizes is empty; an MLP needs at least one hidden layer");
      }
      for (int i = 0; i < spec.hidden_sizes_size(); ++i) {
        if (spec.hidden_sizes(i) < 1) {
          return absl::InvalidArgumentError(absl::StrCat("model hidden_sizes[", i, "] is ",
                                                         spec.hidden_sizes(i),
                                                         "; every layer needs at least one unit"));
        }
        sizes.push_back(spec.hidden_sizes(i));
      }
      absl::StatusOr<Activation> converted = ToActivation(spec.activation());
      if (!converted.ok()) return converted.status();
      activation = *converted;
      sizes.push_back(num_classes);
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "model kind ", static_cast<int>(spec.kind()),
          " is unknown; use LINEAR_REGRESSION, LOGISTIC_REGRESSION, SOFTMAX_REGRESSION or MLP"));
  }

  // What DenseModel allocates, counted in floating point so that no size can overflow.
  double floats = static_cast<double>(max_batch_size) * (sizes.front() + 1.0);
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    const double out = sizes[i + 1];
    floats += 2 * (static_cast<double>(sizes[i]) * out + out) + 2 * out * max_batch_size;
  }
  if (floats > static_cast<double>(kMaxModelFloats)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the model would take ", std::ceil(floats * sizeof(float) / (1 << 20)),
        " MiB (weights and gradients for ", feature_dim, " features",
        spec.kind() == ModelSpec::MLP ? " and model.hidden_sizes" : "", ", activations for ",
        max_batch_size, " examples per batch); a worker holds at most ",
        (kMaxModelFloats * static_cast<int64_t>(sizeof(float))) >> 20,
        " MiB: use fewer or smaller layers, or a smaller batch_size"));
  }

  InitializerConfig weight_initializer;
  if (spec.has_weight_initializer()) {
    weight_initializer = spec.weight_initializer();
  } else {
    weight_initializer.set_kind(InitializerConfig::GLOROT_UNIFORM);
  }
  std::vector<VariableDef> variables;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    VariableDef& weights = variables.emplace_back();
    weights.set_name(absl::StrCat("layer", i, "/weights"));
    weights.add_shape(sizes[i]);
    weights.add_shape(sizes[i + 1]);
    *weights.mutable_initializer() = weight_initializer;
    VariableDef& bias = variables.emplace_back();
    bias.set_name(absl::StrCat("layer", i, "/bias"));
    bias.add_shape(sizes[i + 1]);
    bias.mutable_initializer()->set_kind(InitializerConfig::ZEROS);
  }
  const bool is_classifier = spec.kind() != ModelSpec::LINEAR_REGRESSION;
  return std::unique_ptr<Model>(new DenseModel(std::move(variables), is_classifier, sizes,
                                               activation, loss, num_classes, max_batch_size,
                                               backend));
}

}  // namespace ps
