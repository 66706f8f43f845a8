#include "worker/model/conv_model.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/compute/dropout_ops.h"
#include "worker/model/check_variable.h"

namespace ps {
namespace {

using model_internal::CheckVariable;

// One layer's shapes, worked out and checked before anything is allocated.
struct StagePlan {
  LayerSpec::Kind kind = LayerSpec::DENSE;
  Window2D window;  // CONV and the poolings: over the layer's input image.
  int in = 0;       // Floats per example in and out.
  int out = 0;
  int units = 0;  // CONV: filters; DENSE: units.
  float rate = 0;  // DROPOUT.
  bool activate = false;
  Activation activation = Activation::kRelu;

  int positions() const { return window.out_height() * window.out_width(); }
  // CONV: the images whose columns are made and used at once: about `working_set` floats
  // (ComputeBackend::WorkingSetFloats; 0: the whole batch), at least one image.
  int chunk_images(int max_batch_size, size_t working_set) const {
    if (working_set == 0) return max_batch_size;
    const size_t per_image = static_cast<size_t>(positions()) * window.patch();
    return static_cast<int>(std::clamp<size_t>(working_set / per_image, 1, max_batch_size));
  }
};

// A variable of a layer, in the backend's memory.
struct Parameter {
  std::string name;
  DeviceArray value;
  DeviceArray gradient;
};

struct Stage {
  StagePlan plan;
  std::vector<Parameter> parameters;  // CONV: kernel, bias. DENSE: weights, bias.
  DeviceArray output;                 // [max_batch_size, out], after the activation.
  DeviceArray output_gradient;        // [max_batch_size, out]
  // CONV: Im2Col of StagePlan::chunk_images images of the input, [chunk * positions, patch], and its
  // gradient. A convolution works a chunk at a time, so that what Im2Col writes is still in
  // cache for the Gemm that reads it (and the Gemm's columns' gradient for Col2Im); the
  // backward pass makes a chunk's columns again rather than keeping the batch's.
  DeviceArray columns;
  DeviceArray column_gradient;
  DeviceArray mask;  // DROPOUT: [max_batch_size, out], the step's mask (all ones to evaluate).
};

class ConvModel : public Model {
 public:
  ConvModel(std::vector<VariableDef> variables, std::vector<StagePlan> plans, int feature_dim,
            int max_batch_size, ComputeBackend* backend)
      : Model(variables, /*is_classifier=*/true),
        feature_dim_(feature_dim),
        max_batch_size_(max_batch_size),
        backend_(backend),
        input_(backend, static_cast<size_t>(max_batch_size) * feature_dim),
        labels_(backend, static_cast<size_t>(max_batch_size)) {
    size_t next_variable = 0;
    for (const StagePlan& plan : plans) {
      Stage& stage = stages_.emplace_back();
      stage.plan = plan;
      const size_t batch_out = static_cast<size_t>(max_batch_size) * plan.out;
      stage.output = DeviceArray(backend, batch_out);
      stage.output_gradient = DeviceArray(backend, batch_out);
      if (plan.kind == LayerSpec::CONV) {
        const size_t columns = static_cast<size_t>(plan.chunk_images(max_batch_size, backend->WorkingSetFloats())) *
                               plan.positions() * plan.window.patch();
        stage.columns = DeviceArray(backend, columns);
        stage.column_gradient = DeviceArray(backend, columns);
      }
      if (plan.kind == LayerSpec::DROPOUT) stage.mask = DeviceArray(backend, batch_out);
      if (plan.kind == LayerSpec::CONV || plan.kind == LayerSpec::DENSE) {
        for (int p = 0; p < 2; ++p) {
          const VariableDef& def = variables[next_variable++];
          size_t count = 1;
          for (int64_t dim : def.shape()) count *= static_cast<size_t>(dim);
          stage.parameters.push_back(
              {def.name(), DeviceArray(backend, count), DeviceArray(backend, count)});
        }
      }
    }
  }

  absl::StatusOr<BatchMetrics> ComputeGradients(const Batch& batch, const ConstVariables& weights,
                                                const MutableVariables& gradients) override {
    return Run(batch, weights, &gradients);
  }

  absl::StatusOr<BatchMetrics> ComputeGradientsAndFeatureGradients(
      const Batch&, const ConstVariables&, const MutableVariables&, absl::Span<float>) override {
    return absl::UnimplementedError("a CNN takes its features as they are (images), so it "
                                    "gives no gradient of them");
  }

  absl::StatusOr<BatchMetrics> Evaluate(const Batch& batch,
                                        const ConstVariables& weights) override {
    return Run(batch, weights, nullptr);
  }

  void SetDropoutSeed(uint64_t seed) override { dropout_seed_ = seed; }

 private:
  absl::Status CheckBatch(const Batch& batch) const;
  absl::StatusOr<BatchMetrics> Run(const Batch& batch, const ConstVariables& weights,
                                   const MutableVariables* gradients);
  // `training`: with dropout (ComputeGradients); else without (Evaluate).
  void Forward(int rows, bool training);
  void Backward(int rows);
  // A CONV stage's output (before its activation) from `input`, and its kernel's and bias's
  // gradients and, unless null, its input's from `gradient` (after its activation's).
  void ForwardConvolution(int rows, const float* input, Stage& stage);
  // Calls work(first, images) for each chunk of the batch's `rows` images
  // (StagePlan::chunk_images), once Im2Col has put the chunk's columns in stage.columns.
  template <typename Work>
  void ForEachChunk(int rows, const float* input, Stage& stage, Work work);
  void BackwardConvolution(int rows, const float* input, const float* gradient,
                           float* input_gradient, Stage& stage);

  const int feature_dim_;
  const int max_batch_size_;
  ComputeBackend* const backend_;
  DeviceArray input_;   // [max_batch_size, feature_dim]
  DeviceArray labels_;  // [max_batch_size]
  std::vector<Stage> stages_;
  uint64_t dropout_seed_ = 0;
};

absl::Status ConvModel::CheckBatch(const Batch& batch) const {
  return ps::CheckBatch(batch, max_batch_size_, feature_dim_, stages_.back().plan.out);
}

absl::StatusOr<BatchMetrics> ConvModel::Run(const Batch& batch, const ConstVariables& weights,
                                            const MutableVariables* gradients) {
  absl::Status status = CheckBatch(batch);
  if (!status.ok()) return status;
  for (const Stage& stage : stages_) {
    for (const Parameter& parameter : stage.parameters) {
      status = CheckVariable(weights, "weights", parameter.name, parameter.value.size());
      if (status.ok() && gradients != nullptr) {
        status = CheckVariable(*gradients, "gradients", parameter.name, parameter.value.size());
      }
      if (!status.ok()) return status;
    }
  }
  const int rows = batch.size;
  backend_->CopyToDevice(batch.features, static_cast<size_t>(rows) * feature_dim_,
                         input_.data());
  backend_->CopyToDevice(batch.labels, rows, labels_.data());
  for (Stage& stage : stages_) {
    for (Parameter& parameter : stage.parameters) {
      backend_->CopyToDevice(weights.at(parameter.name).data(), parameter.value.size(),
                             parameter.value.data());
    }
  }
  Forward(rows, /*training=*/gradients != nullptr);
  Stage& last = stages_.back();
  const LossSums sums =
      backend_->SoftmaxCrossEntropy(rows, last.plan.out, last.output.data(), labels_.data(),
                                    1.0f / static_cast<float>(rows), last.output_gradient.data());
  if (gradients != nullptr) {
    Backward(rows);
    for (const Stage& stage : stages_) {
      for (const Parameter& parameter : stage.parameters) {
        backend_->CopyToHost(parameter.gradient.data(), parameter.gradient.size(),
                             gradients->at(parameter.name).data());
      }
    }
  }
  BatchMetrics metrics;
  metrics.loss = sums.loss / rows;
  metrics.accuracy = static_cast<double>(sums.correct) / rows;
  metrics.examples = rows;
  return metrics;
}

void ConvModel::Forward(int rows, bool training) {
  const float* input = input_.data();
  for (size_t i = 0; i < stages_.size(); ++i) {
    Stage& stage = stages_[i];
    const StagePlan& plan = stage.plan;
    float* output = stage.output.data();
    switch (plan.kind) {
      case LayerSpec::CONV:
        ForwardConvolution(rows, input, stage);
        break;
      case LayerSpec::MAX_POOL:
        backend_->MaxPoolForward(plan.window, rows, input, output);
        break;
      case LayerSpec::AVG_POOL:
        backend_->AvgPoolForward(plan.window, rows, input, output);
        break;
      case LayerSpec::DROPOUT: {
        const size_t count = static_cast<size_t>(rows) * plan.out;
        if (training) {
          backend_->DropoutMask(count, dropout_ops::LayerSeed(dropout_seed_, static_cast<int>(i)),
                                plan.rate, stage.mask.data());
        } else {
          backend_->Fill(count, 1.0f, stage.mask.data());
        }
        backend_->Multiply(count, input, stage.mask.data(), output);
        break;
      }
      default:  // DENSE
        backend_->Gemm(false, false, rows, plan.units, plan.in, 1.0f, input,
                       stage.parameters[0].value.data(), 0.0f, output);
        backend_->AddBias(rows, plan.units, stage.parameters[1].value.data(), output);
        break;
    }
    if (plan.activate) {
      backend_->ActivationForward(plan.activation, static_cast<size_t>(rows) * plan.out, output,
                                  output);
    }
    input = output;
  }
}

void ConvModel::Backward(int rows) {
  for (size_t i = stages_.size(); i-- > 0;) {
    Stage& stage = stages_[i];
    const StagePlan& plan = stage.plan;
    const float* input = i == 0 ? input_.data() : stages_[i - 1].output.data();
    // The input's gradient; the first layer's is not needed.
    float* input_gradient = i == 0 ? nullptr : stages_[i - 1].output_gradient.data();
    float* gradient = stage.output_gradient.data();
    if (plan.activate) {
      backend_->ActivationBackward(plan.activation, static_cast<size_t>(rows) * plan.out,
                                   stage.output.data(), gradient, gradient);
    }
    switch (plan.kind) {
      case LayerSpec::CONV:
        BackwardConvolution(rows, input, gradient, input_gradient, stage);
        break;
      case LayerSpec::MAX_POOL:
        if (input_gradient != nullptr) {
          backend_->MaxPoolBackward(plan.window, rows, input, stage.output.data(), gradient,
                                    input_gradient);
        }
        break;
      case LayerSpec::AVG_POOL:
        if (input_gradient != nullptr) {
          backend_->AvgPoolBackward(plan.window, rows, gradient, input_gradient);
        }
        break;
      case LayerSpec::DROPOUT:
        if (input_gradient != nullptr) {
          backend_->Multiply(static_cast<size_t>(rows) * plan.out, gradient, stage.mask.data(),
                             input_gradient);
        }
        break;
      default:  // DENSE
        backend_->Gemm(true, false, plan.in, plan.units, rows, 1.0f, input, gradient, 0.0f,
                       stage.parameters[0].gradient.data());
        backend_->ColumnSums(rows, plan.units, gradient, stage.parameters[1].gradient.data());
        if (input_gradient != nullptr) {
          backend_->Gemm(false, true, rows, plan.in, plan.units, 1.0f, gradient,
                         stage.parameters[0].value.data(), 0.0f, input_gradient);
        }
        break;
    }
  }
}

template <typename Work>
void ConvModel::ForEachChunk(int rows, const float* input, Stage& stage, Work work) {
  const StagePlan& plan = stage.plan;
  const int chunk = plan.chunk_images(max_batch_size_, backend_->WorkingSetFloats());
  for (int first = 0; first < rows; first += chunk) {
    const int images = std::min(chunk, rows - first);
    backend_->Im2Col(plan.window, images, input + static_cast<size_t>(first) * plan.in,
                     stage.columns.data());
    work(first, images);
  }
}

void ConvModel::ForwardConvolution(int rows, const float* input, Stage& stage) {
  const StagePlan& plan = stage.plan;
  ForEachChunk(rows, input, stage, [&](int first, int images) {
    backend_->Gemm(false, false, images * plan.positions(), plan.units, plan.window.patch(), 1.0f,
                   stage.columns.data(), stage.parameters[0].value.data(), 0.0f,
                   stage.output.data() + static_cast<size_t>(first) * plan.out);
  });
  backend_->AddBias(rows * plan.positions(), plan.units, stage.parameters[1].value.data(),
                    stage.output.data());
}

void ConvModel::BackwardConvolution(int rows, const float* input, const float* gradient,
                                    float* input_gradient, Stage& stage) {
  const StagePlan& plan = stage.plan;
  const int patch = plan.window.patch();
  ForEachChunk(rows, input, stage, [&](int first, int images) {
    const float* chunk_gradient = gradient + static_cast<size_t>(first) * plan.out;
    // The kernel's gradient sums over the chunks.
    backend_->Gemm(true, false, patch, plan.units, images * plan.positions(), 1.0f,
                   stage.columns.data(), chunk_gradient, first == 0 ? 0.0f : 1.0f,
                   stage.parameters[0].gradient.data());
    if (input_gradient == nullptr) return;
    backend_->Gemm(false, true, images * plan.positions(), patch, plan.units, 1.0f,
                   chunk_gradient, stage.parameters[0].value.data(), 0.0f,
                   stage.column_gradient.data());
    backend_->Col2Im(plan.window, images, stage.column_gradient.data(),
                     input_gradient + static_cast<size_t>(first) * plan.in);
  });
  backend_->ColumnSums(rows * plan.positions(), plan.units, gradient,
                       stage.parameters[1].gradient.data());
}

absl::Status LayerError(int index, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("model.layers[", index, "] ", message));
}

// The most floats a layer's output, or a window of its input, may have per example: every
// shape then fits an int, and the model's size check (kMaxModelFloats) sees true counts.
constexpr int64_t kMaxLayerFloats = int64_t{1} << 24;

absl::Status CheckLayerSize(int index, const char* what, int64_t floats) {
  if (floats <= kMaxLayerFloats) return absl::OkStatus();
  return LayerError(index, absl::StrCat("makes ", what, " of ", floats,
                                        " floats an example; at most ", kMaxLayerFloats,
                                        ": use fewer filters or units, or a smaller image"));
}

// The layers' plans, the output layer's last, over an image of `image`.
absl::StatusOr<std::vector<StagePlan>> PlanStages(const ModelSpec& spec, int num_classes) {
  const ImageShape& image = spec.image();
  int height = image.height(), width = image.width(), channels = image.channels();
  bool flat = false;  // After a dense layer: no image any more.
  std::vector<StagePlan> plans;
  for (int i = 0; i <= spec.layers_size(); ++i) {
    LayerSpec layer;
    if (i < spec.layers_size()) {
      layer = spec.layers(i);
    } else {  // The output layer.
      layer.set_kind(LayerSpec::DENSE);
      layer.set_units(num_classes);
    }
    StagePlan plan;
    plan.kind = layer.kind();
    plan.in = height * width * channels;
    if (layer.kind() == LayerSpec::DROPOUT) {
      plan.out = plan.in;
      plan.rate = layer.rate();
    } else if (layer.kind() == LayerSpec::DENSE) {
      absl::Status size = CheckLayerSize(i, "an output", layer.units());
      if (!size.ok()) return size;
      plan.units = layer.units();
      plan.out = layer.units();
      height = width = 1;
      channels = layer.units();
      flat = true;
    } else {
      if (flat) {
        return LayerError(i, absl::StrCat("is a ", LayerSpec::Kind_Name(layer.kind()),
                                          " after a DENSE layer, which leaves no image: put "
                                          "the dense layers last"));
      }
      const bool conv = layer.kind() == LayerSpec::CONV;
      const int stride = layer.stride() > 0 ? layer.stride() : (conv ? 1 : layer.kernel());
      plan.window = Window2D{height, width, channels, layer.kernel(), layer.kernel(), stride,
                             conv ? layer.padding() : 0};
      if (layer.kernel() > height + 2 * plan.window.padding ||
          layer.kernel() > width + 2 * plan.window.padding) {
        return LayerError(i, absl::StrCat("has a ", layer.kernel(), "x", layer.kernel(),
                                          " window over a ", height, "x", width,
                                          " input (padding ", plan.window.padding,
                                          "): make the kernel smaller or pad"));
      }
      plan.units = conv ? layer.filters() : channels;
      absl::Status size = CheckLayerSize(
          i, "a window", static_cast<int64_t>(layer.kernel()) * layer.kernel() * channels);
      if (size.ok()) {
        size = CheckLayerSize(i, "an output",
                              static_cast<int64_t>(plan.window.out_height()) *
                                  plan.window.out_width() * plan.units);
      }
      if (!size.ok()) return size;
      height = plan.window.out_height();
      width = plan.window.out_width();
      channels = plan.units;
      plan.out = height * width * channels;
    }
    const bool output_layer = i == spec.layers_size();
    if (!output_layer && (layer.kind() == LayerSpec::CONV || layer.kind() == LayerSpec::DENSE)) {
      absl::StatusOr<Activation> activation = ToActivation(layer.activation());
      if (!activation.ok()) return LayerError(i, std::string(activation.status().message()));
      plan.activate = true;
      plan.activation = *activation;
    }
    plans.push_back(plan);
  }
  return plans;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateConvModel(const ModelSpec& spec, int feature_dim,
                                                       int num_classes, int max_batch_size,
                                                       ComputeBackend* backend) {
  const ImageShape& image = spec.image();
  const int64_t image_size =
      static_cast<int64_t>(image.height()) * image.width() * image.channels();
  if (image.height() < 1 || image.width() < 1 || image.channels() < 1 ||
      image_size != feature_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.image is ", image.height(), "x", image.width(), "x", image.channels(), " (",
        image_size, " floats) but the data has feature_dim ", feature_dim,
        "; give the images' height, width and channels (28, 28, 1 for Fashion-MNIST)"));
  }
  if (num_classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_classes is ", num_classes, "; CNN needs at least 2"));
  }
  absl::StatusOr<std::vector<StagePlan>> plans = PlanStages(spec, num_classes);
  if (!plans.ok()) return plans.status();

  InitializerConfig weight_initializer;
  if (spec.has_weight_initializer()) {
    weight_initializer = spec.weight_initializer();
  } else {
    weight_initializer.set_kind(InitializerConfig::GLOROT_UNIFORM);
  }
  std::vector<VariableDef> variables;
  // What ConvModel allocates, counted in floating point so that no size can overflow.
  double floats = static_cast<double>(max_batch_size) * (feature_dim + 1.0);
  for (size_t i = 0; i < plans->size(); ++i) {
    const StagePlan& plan = (*plans)[i];
    floats += (plan.kind == LayerSpec::DROPOUT ? 3.0 : 2.0) * max_batch_size * plan.out;
    if (plan.kind == LayerSpec::CONV) {  // The columns of a chunk and their gradient.
      floats += 2.0 * plan.chunk_images(max_batch_size, backend->WorkingSetFloats()) *
                plan.positions() * plan.window.patch();
    }
    if (plan.kind != LayerSpec::CONV && plan.kind != LayerSpec::DENSE) continue;
    const bool conv = plan.kind == LayerSpec::CONV;
    const int rows = conv ? plan.window.patch() : plan.in;
    VariableDef& weights = variables.emplace_back();
    weights.set_name(absl::StrCat("layer", i, conv ? "/kernel" : "/weights"));
    weights.add_shape(rows);
    weights.add_shape(plan.units);
    *weights.mutable_initializer() = weight_initializer;
    VariableDef& bias = variables.emplace_back();
    bias.set_name(absl::StrCat("layer", i, "/bias"));
    bias.add_shape(plan.units);
    bias.mutable_initializer()->set_kind(InitializerConfig::ZEROS);
    floats += 2.0 * (static_cast<double>(rows) * plan.units + plan.units);
  }
  if (floats > static_cast<double>(kMaxModelFloats)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the CNN would take ", floats * sizeof(float) / (1 << 20), " MiB with batches of ",
        max_batch_size, "; the most a model may take is ",
        kMaxModelFloats * sizeof(float) / (1 << 20), " MiB: use fewer filters or a smaller batch"));
  }
  return std::unique_ptr<Model>(new ConvModel(std::move(variables), *std::move(plans),
                                              feature_dim, max_batch_size, backend));
}

}  // namespace ps
