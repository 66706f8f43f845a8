// The CNN on every available backend against a direct double-precision implementation of the
// same network: its loss, and every parameter's gradient against central finite differences
// of the double-precision loss (a convolution with padding, max pooling, a strided convolution,
// average pooling, a dense layer and the output layer, with tanh and sigmoid between them).
#include "worker/model/conv_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "worker/compute/available_backends.h"
#include "worker/compute/dropout_ops.h"
#include "worker/compute/forwarding_backend.h"
#include "worker/model/model.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr int kBatch = 3;
constexpr int kClasses = 3;

LayerSpec Dropout(float rate) {
  LayerSpec layer;
  layer.set_kind(LayerSpec::DROPOUT);
  layer.set_rate(rate);
  return layer;
}

LayerSpec Layer(LayerSpec::Kind kind, int size, int kernel, int stride, int padding,
                ModelSpec::Activation activation = ModelSpec::TANH) {
  LayerSpec layer;
  layer.set_kind(kind);
  if (kind == LayerSpec::CONV) layer.set_filters(size);
  if (kind == LayerSpec::DENSE) layer.set_units(size);
  layer.set_kernel(kernel);
  layer.set_stride(stride);
  layer.set_padding(padding);
  layer.set_activation(activation);
  return layer;
}

// 8x8x2 images: conv 4 (3x3, pad 1, tanh) -> max pool 2 -> conv 3 (3x3, stride 2, pad 1,
// sigmoid) -> average pool 2 -> dense 5 (tanh) -> 3 classes.
ModelSpec SmallCnn() {
  ModelSpec spec;
  spec.set_kind(ModelSpec::CNN);
  spec.mutable_image()->set_height(8);
  spec.mutable_image()->set_width(8);
  spec.mutable_image()->set_channels(2);
  *spec.add_layers() = Layer(LayerSpec::CONV, 4, 3, 1, 1);
  *spec.add_layers() = Layer(LayerSpec::MAX_POOL, 0, 2, 0, 0);
  *spec.add_layers() = Layer(LayerSpec::CONV, 3, 3, 2, 1, ModelSpec::SIGMOID);
  *spec.add_layers() = Layer(LayerSpec::AVG_POOL, 0, 2, 0, 0);
  *spec.add_layers() = Layer(LayerSpec::DENSE, 5, 0, 0, 0);
  return spec;
}

// SmallCnn with dropout after the first pooling (rate 0.5) and after the dense layer (0.25).
ModelSpec SmallCnnWithDropout() {
  ModelSpec spec = SmallCnn();
  ModelSpec with;
  with.set_kind(ModelSpec::CNN);
  *with.mutable_image() = spec.image();
  for (int i = 0; i < spec.layers_size(); ++i) {
    *with.add_layers() = spec.layers(i);
    if (i == 1) *with.add_layers() = Dropout(0.5f);
  }
  *with.add_layers() = Dropout(0.25f);
  return with;
}

using Values = std::map<std::string, std::vector<double>>;

double Activate(ModelSpec::Activation f, double x) {
  return f == ModelSpec::TANH ? std::tanh(x) : 1.0 / (1.0 + std::exp(-x));
}

// NHWC image value, 0 in the padding.
double At(const std::vector<double>& x, int n, int h, int w, int c, int height, int width,
          int channels) {
  if (h < 0 || h >= height || w < 0 || w >= width) return 0.0;
  return x[((static_cast<size_t>(n) * height + h) * width + w) * channels + c];
}

// The network of `spec` in double precision: the mean softmax cross-entropy of `labels`.
// Dropout layers apply the masks of `dropout_seed` (dropout_ops.h) when `training`.
double ReferenceLoss(const ModelSpec& spec, const Values& p, const std::vector<double>& images,
                     const std::vector<int>& labels, uint64_t dropout_seed = 0,
                     bool training = false) {
  std::vector<double> x = images;
  int height = spec.image().height(), width = spec.image().width(),
      channels = spec.image().channels();
  for (int i = 0; i <= spec.layers_size(); ++i) {
    const bool output = i == spec.layers_size();
    const LayerSpec layer = output ? Layer(LayerSpec::DENSE, kClasses, 0, 0, 0) : spec.layers(i);
    const std::string prefix = "layer" + std::to_string(i);
    std::vector<double> y;
    if (layer.kind() == LayerSpec::DROPOUT) {
      y = x;
      for (size_t j = 0; training && j < y.size(); ++j) {
        y[j] *= dropout_ops::MaskAt(dropout_ops::LayerSeed(dropout_seed, i), layer.rate(), j);
      }
    } else if (layer.kind() == LayerSpec::DENSE) {
      const int in = height * width * channels, units = layer.units();
      const std::vector<double>& w = p.at(prefix + "/weights");
      const std::vector<double>& b = p.at(prefix + "/bias");
      for (int n = 0; n < kBatch; ++n) {
        for (int u = 0; u < units; ++u) {
          double sum = b[u];
          for (int k = 0; k < in; ++k) sum += x[n * in + k] * w[k * units + u];
          y.push_back(output ? sum : Activate(layer.activation(), sum));
        }
      }
      height = width = 1;
      channels = units;
    } else {
      const bool conv = layer.kind() == LayerSpec::CONV;
      const int k = layer.kernel(), pad = conv ? layer.padding() : 0;
      const int stride = layer.stride() > 0 ? layer.stride() : (conv ? 1 : k);
      const int out_h = (height + 2 * pad - k) / stride + 1, out_w = (width + 2 * pad - k) / stride + 1;
      const int out_c = conv ? layer.filters() : channels;
      for (int n = 0; n < kBatch; ++n) {
        for (int oh = 0; oh < out_h; ++oh) {
          for (int ow = 0; ow < out_w; ++ow) {
            for (int f = 0; f < out_c; ++f) {
              double value = conv ? p.at(prefix + "/bias")[f]
                                  : (layer.kind() == LayerSpec::MAX_POOL ? -1e300 : 0.0);
              for (int kh = 0; kh < k; ++kh) {
                for (int kw = 0; kw < k; ++kw) {
                  const int h = oh * stride - pad + kh, w = ow * stride - pad + kw;
                  if (conv) {
                    for (int c = 0; c < channels; ++c) {
                      value += At(x, n, h, w, c, height, width, channels) *
                               p.at(prefix + "/kernel")[((kh * k + kw) * channels + c) * out_c + f];
                    }
                  } else if (layer.kind() == LayerSpec::MAX_POOL) {
                    value = std::max(value, At(x, n, h, w, f, height, width, channels));
                  } else {
                    value += At(x, n, h, w, f, height, width, channels) / (k * k);
                  }
                }
              }
              y.push_back(conv ? Activate(layer.activation(), value) : value);
            }
          }
        }
      }
      height = out_h;
      width = out_w;
      channels = out_c;
    }
    x = y;
  }
  double loss = 0;
  for (int n = 0; n < kBatch; ++n) {
    double largest = -1e300, sum = 0;
    for (int c = 0; c < kClasses; ++c) largest = std::max(largest, x[n * kClasses + c]);
    for (int c = 0; c < kClasses; ++c) sum += std::exp(x[n * kClasses + c] - largest);
    loss += std::log(sum) + largest - x[n * kClasses + labels[n]];
  }
  return loss / kBatch;
}

class ConvModelTest : public ::testing::TestWithParam<BackendFactory> {
 protected:
  void SetUp() override {
    if (!GetParam().unavailable.empty()) GTEST_SKIP() << GetParam().unavailable;
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = GetParam().create();
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
  }

  std::unique_ptr<ComputeBackend> backend_;
};

// The backend under test with another WorkingSetFloats: a model then works its convolutions in
// chunks of fewer images.
class SmallWorkingSetBackend : public ForwardingBackend {
 public:
  SmallWorkingSetBackend(std::unique_ptr<ComputeBackend> inner, size_t floats)
      : ForwardingBackend(std::move(inner)), floats_(floats) {}
  size_t WorkingSetFloats() const override { return floats_; }

 private:
  const size_t floats_;
};

// `spec` (SmallCnn's layers, with or without dropout) on `backend`: its loss against
// ReferenceLoss's, and every gradient against central finite differences of ReferenceLoss, for
// a step with dropout seed `dropout_seed`.
void ExpectLossAndGradientsMatchTheReference(ComputeBackend* backend,
                                             const ModelSpec& spec = SmallCnn(),
                                             uint64_t dropout_seed = 0) {
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(spec, 8 * 8 * 2, kClasses, kBatch,
                                                               backend);
  ASSERT_TRUE(model.ok()) << model.status();
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> images(kBatch * 8 * 8 * 2);
  for (float& v : images) v = uniform(random);
  const std::vector<float> labels = {0, 2, 1};
  std::map<std::string, std::vector<float>> weights, gradients;
  Values reference;
  ConstVariables weight_view;
  MutableVariables gradient_view;
  for (const VariableDef& def : (*model)->variables()) {
    size_t count = 1;
    for (int64_t dim : def.shape()) count *= dim;
    std::vector<float>& w = weights[def.name()];
    for (size_t i = 0; i < count; ++i) w.push_back(0.7f * uniform(random));
    gradients[def.name()].assign(count, 0.0f);
    reference[def.name()] = std::vector<double>(w.begin(), w.end());
    weight_view[def.name()] = absl::MakeConstSpan(w);
    gradient_view[def.name()] = absl::MakeSpan(gradients[def.name()]);
  }
  EXPECT_THAT((*model)->variables()[0].name(), "layer0/kernel");
  EXPECT_EQ((*model)->variables()[0].shape(0), 3 * 3 * 2);
  Batch batch{kBatch, 8 * 8 * 2, images.data(), labels.data()};
  (*model)->SetDropoutSeed(dropout_seed);
  absl::StatusOr<BatchMetrics> metrics = (*model)->ComputeGradients(batch, weight_view,
                                                                     gradient_view);
  ASSERT_TRUE(metrics.ok()) << metrics.status();

  const std::vector<double> x(images.begin(), images.end());
  const std::vector<int> classes = {0, 2, 1};
  const double loss = ReferenceLoss(spec, reference, x, classes, dropout_seed, true);
  EXPECT_NEAR(metrics->loss, loss, 1e-5 * std::max(1.0, loss));
  // An evaluation drops nothing.
  absl::StatusOr<BatchMetrics> evaluated = (*model)->Evaluate(batch, weight_view);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  const double eval_loss = ReferenceLoss(spec, reference, x, classes);
  EXPECT_NEAR(evaluated->loss, eval_loss, 1e-5 * std::max(1.0, eval_loss));
  constexpr double kStep = 1e-5;
  int checked = 0;
  for (auto& [name, values] : reference) {
    for (size_t i = 0; i < values.size(); ++i) {
      const double saved = values[i];
      values[i] = saved + kStep;
      const double up = ReferenceLoss(spec, reference, x, classes, dropout_seed, true);
      values[i] = saved - kStep;
      const double down = ReferenceLoss(spec, reference, x, classes, dropout_seed, true);
      values[i] = saved;
      const double numeric = (up - down) / (2 * kStep);
      const double analytic = gradients[name][i];
      ASSERT_NEAR(analytic, numeric, 2e-4 + 1e-3 * std::abs(numeric)) << name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * 18 + 4 + 3 * 36 + 3 + 3 * 5 + 5 + 5 * 3 + 3);
}

TEST_P(ConvModelTest, LossAndEveryGradientMatchDoublePrecisionFiniteDifferences) {
  ExpectLossAndGradientsMatchTheReference(backend_.get());
}

// The first convolution's columns are 1,152 floats an image: a working set of 1 float makes
// three chunks of one image; 2,304 floats, a chunk of two and one of one.
TEST_P(ConvModelTest, ConvolutionsWorkedInChunksMatchTheReferenceToo) {
  for (const size_t floats : {size_t{1}, size_t{2304}}) {
    SCOPED_TRACE(floats);
    absl::StatusOr<std::unique_ptr<ComputeBackend>> inner = GetParam().create();
    ASSERT_TRUE(inner.ok()) << inner.status();
    SmallWorkingSetBackend backend(*std::move(inner), floats);
    ExpectLossAndGradientsMatchTheReference(&backend);
  }
}

// Dropout after a pooling and after a dense layer, for two steps' seeds: each step's masks are
// dropout_ops.h's for its seed, and the gradients are those of the network with those masks.
TEST_P(ConvModelTest, DropoutAppliesTheStepsMasksAndEvaluationDropsNothing) {
  for (const uint64_t seed : {uint64_t{12345}, uint64_t{987654321}}) {
    SCOPED_TRACE(seed);
    ExpectLossAndGradientsMatchTheReference(backend_.get(), SmallCnnWithDropout(), seed);
  }
}

TEST_P(ConvModelTest, BadShapesAreRefusedNamingTheLayer) {
  ModelSpec spec = SmallCnn();
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(spec, 100, kClasses, kBatch, backend_.get());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("feature_dim 100"));

  spec.mutable_layers(2)->set_kernel(9);
  model = Model::Create(spec, 128, kClasses, kBatch, backend_.get());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("model.layers[2]"));

  // 65x65 outputs of a million filters: 4.3e9 floats an example, which no int holds.
  spec = SmallCnn();
  spec.mutable_image()->set_height(65);
  spec.mutable_image()->set_width(65);
  spec.mutable_image()->set_channels(1);
  spec.clear_layers();
  *spec.add_layers() = Layer(LayerSpec::CONV, 1016568, 1, 1, 0);
  model = Model::Create(spec, 65 * 65, kClasses, kBatch, backend_.get());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("floats an example"));

  spec = SmallCnn();
  *spec.add_layers() = Layer(LayerSpec::MAX_POOL, 0, 2, 0, 0);  // After the dense layer.
  model = Model::Create(spec, 128, kClasses, kBatch, backend_.get());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("after a DENSE layer"));
}

INSTANTIATE_TEST_SUITE_P(AllBackends, ConvModelTest, ::testing::ValuesIn(AvailableBackends()),
                         [](const ::testing::TestParamInfo<BackendFactory>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace ps
