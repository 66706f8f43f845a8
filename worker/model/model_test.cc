#include "worker/model/model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/compute/available_backends.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr int kFeatureDim = 5;
constexpr int kNumClasses = 3;
constexpr int kBatchSize = 7;
constexpr int kMaxBatchSize = 10;  // Larger than the batch: only its first rows are used.

ModelSpec Spec(ModelSpec::Kind kind, std::vector<int> hidden_sizes = {},
               ModelSpec::Activation activation = ModelSpec::RELU) {
  ModelSpec spec;
  spec.set_kind(kind);
  for (int size : hidden_sizes) spec.add_hidden_sizes(size);
  spec.set_activation(activation);
  return spec;
}

// Host arrays for every variable of a model, in the model's order.
struct HostVariables {
  explicit HostVariables(const std::vector<VariableDef>& defs) : defs(defs) {
    for (const VariableDef& def : defs) {
      int64_t count = 1;
      for (int64_t dim : def.shape()) count *= dim;
      values.emplace_back(count, 0.0f);
    }
  }
  ConstVariables Const() const {
    ConstVariables result;
    for (size_t i = 0; i < defs.size(); ++i) result[defs[i].name()] = values[i];
    return result;
  }
  MutableVariables Mutable() {
    MutableVariables result;
    for (size_t i = 0; i < defs.size(); ++i) result[defs[i].name()] = absl::MakeSpan(values[i]);
    return result;
  }

  std::vector<VariableDef> defs;
  std::vector<std::vector<float>> values;
};

struct HostBatch {
  Batch view() const {
    Batch batch;
    batch.size = size;
    batch.feature_dim = feature_dim;
    batch.features = features.data();
    batch.labels = labels.data();
    return batch;
  }
  int size = 0;
  int feature_dim = 0;
  std::vector<float> features;
  std::vector<float> labels;
};

// The model's loss in double precision, written out plainly: the reference the float model is
// checked against. Sets *min_abs_hidden to the smallest |pre-activation| of a hidden unit.
double ReferenceLoss(const ModelSpec& spec, const std::vector<VariableDef>& defs,
                     const std::vector<std::vector<double>>& values, const HostBatch& batch,
                     double* min_abs_hidden = nullptr) {
  const size_t num_layers = defs.size() / 2;
  double total = 0;
  double min_abs = std::numeric_limits<double>::infinity();
  for (int r = 0; r < batch.size; ++r) {
    std::vector<double> a(batch.features.begin() + r * batch.feature_dim,
                          batch.features.begin() + (r + 1) * batch.feature_dim);
    for (size_t l = 0; l < num_layers; ++l) {
      const int in = static_cast<int>(defs[2 * l].shape(0));
      const int out = static_cast<int>(defs[2 * l].shape(1));
      const std::vector<double>& w = values[2 * l];
      const std::vector<double>& b = values[2 * l + 1];
      std::vector<double> z(out);
      for (int j = 0; j < out; ++j) {
        z[j] = b[j];
        for (int i = 0; i < in; ++i) z[j] += a[i] * w[i * out + j];
      }
      if (l + 1 < num_layers) {
        for (double& v : z) {
          min_abs = std::min(min_abs, std::abs(v));
          switch (spec.activation()) {
            case ModelSpec::RELU:
              v = std::max(v, 0.0);
              break;
            case ModelSpec::TANH:
              v = std::tanh(v);
              break;
            default:
              v = 1 / (1 + std::exp(-v));
              break;
          }
        }
      }
      a = z;
    }
    const double label = batch.labels[r];
    switch (spec.kind()) {
      case ModelSpec::LINEAR_REGRESSION:
        total += 0.5 * (a[0] - label) * (a[0] - label);
        break;
      case ModelSpec::LOGISTIC_REGRESSION:
        // log(1 + e^z) - t z, computed stably.
        total += std::max(a[0], 0.0) - label * a[0] + std::log1p(std::exp(-std::abs(a[0])));
        break;
      default: {
        double max_logit = *std::max_element(a.begin(), a.end());
        double sum = 0;
        for (double v : a) sum += std::exp(v - max_logit);
        total += max_logit + std::log(sum) - a[static_cast<int>(label)];
        break;
      }
    }
  }
  if (min_abs_hidden != nullptr) *min_abs_hidden = min_abs;
  return total / batch.size;
}

HostBatch RandomBatch(const ModelSpec& spec, int size, std::mt19937* rng) {
  HostBatch batch;
  batch.size = size;
  batch.feature_dim = kFeatureDim;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < size * kFeatureDim; ++i) batch.features.push_back(normal(*rng));
  for (int r = 0; r < size; ++r) {
    switch (spec.kind()) {
      case ModelSpec::LINEAR_REGRESSION:
        batch.labels.push_back(normal(*rng));
        break;
      case ModelSpec::LOGISTIC_REGRESSION:
        batch.labels.push_back(static_cast<float>((*rng)() % 2));
        break;
      default:
        batch.labels.push_back(static_cast<float>((*rng)() % kNumClasses));
        break;
    }
  }
  return batch;
}

void RandomizeWeights(HostVariables* variables, std::mt19937* rng) {
  std::uniform_real_distribution<float> weight(-1.0f, 1.0f);
  std::uniform_real_distribution<float> bias(-0.5f, 0.5f);
  for (size_t i = 0; i < variables->values.size(); ++i) {
    for (float& v : variables->values[i]) v = i % 2 == 0 ? weight(*rng) : bias(*rng);
  }
}

struct GradientCase {
  std::string name;
  ModelSpec spec;
};

void PrintTo(const GradientCase& gradient_case, std::ostream* os) { *os << gradient_case.name; }

// Every model on every available backend (the CPU; a GPU in a CUDA build where one is usable).
class GradientCheckTest
    : public ::testing::TestWithParam<std::tuple<GradientCase, BackendFactory>> {};

// Compares the model's loss with the double reference and its gradients with central
// differences of the reference, for every parameter.
TEST_P(GradientCheckTest, MatchesDoubleReference) {
  const ModelSpec& spec = std::get<0>(GetParam()).spec;
  const BackendFactory& backend_factory = std::get<1>(GetParam());
  if (!backend_factory.unavailable.empty()) GTEST_SKIP() << backend_factory.unavailable;
  absl::StatusOr<std::unique_ptr<ComputeBackend>> created = backend_factory.create();
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<ComputeBackend> backend = *std::move(created);
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(spec, kFeatureDim, kNumClasses, kMaxBatchSize, backend.get());
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<VariableDef>& defs = (*model)->variables();

  // Draw weights and data until no hidden pre-activation is near a ReLU kink; a perturbation
  // of eps moves a pre-activation by far less than the margin.
  constexpr double kEps = 1e-3;
  constexpr double kKinkMargin = 0.05;
  std::mt19937 rng(1234);
  HostVariables weights(defs);
  HostBatch batch;
  std::vector<std::vector<double>> reference_weights;
  bool found = false;
  for (int attempt = 0; attempt < 1000 && !found; ++attempt) {
    RandomizeWeights(&weights, &rng);
    batch = RandomBatch(spec, kBatchSize, &rng);
    reference_weights.clear();
    for (const std::vector<float>& v : weights.values)
      reference_weights.emplace_back(v.begin(), v.end());
    double min_abs_hidden = 0;
    ReferenceLoss(spec, defs, reference_weights, batch, &min_abs_hidden);
    found = min_abs_hidden > kKinkMargin;
  }
  ASSERT_TRUE(found);

  HostVariables gradients(defs);
  absl::StatusOr<BatchMetrics> metrics =
      (*model)->ComputeGradients(batch.view(), weights.Const(), gradients.Mutable());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const double reference_loss = ReferenceLoss(spec, defs, reference_weights, batch);
  EXPECT_NEAR(metrics->loss, reference_loss, 1e-5 * std::abs(reference_loss));
  EXPECT_EQ(metrics->examples, kBatchSize);

  absl::StatusOr<BatchMetrics> evaluated = (*model)->Evaluate(batch.view(), weights.Const());
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  EXPECT_EQ(evaluated->loss, metrics->loss);
  EXPECT_EQ(evaluated->accuracy, metrics->accuracy);

  for (size_t v = 0; v < defs.size(); ++v) {
    for (size_t j = 0; j < reference_weights[v].size(); ++j) {
      std::vector<std::vector<double>> perturbed = reference_weights;
      perturbed[v][j] = reference_weights[v][j] + kEps;
      const double plus = ReferenceLoss(spec, defs, perturbed, batch);
      perturbed[v][j] = reference_weights[v][j] - kEps;
      const double minus = ReferenceLoss(spec, defs, perturbed, batch);
      const double expected = (plus - minus) / (2 * kEps);
      EXPECT_NEAR(gradients.values[v][j], expected, 1e-3 * std::abs(expected) + 1e-5)
          << defs[v].name() << "[" << j << "]";
    }
  }

  // Buffers are reused, and gradients overwritten, not accumulated: a second call agrees.
  HostVariables again(defs);
  ASSERT_TRUE((*model)->ComputeGradients(batch.view(), weights.Const(), again.Mutable()).ok());
  EXPECT_EQ(again.values, gradients.values);
}

INSTANTIATE_TEST_SUITE_P(
    AllModels, GradientCheckTest,
    ::testing::Combine(::testing::Values(
        GradientCase{"Linear", Spec(ModelSpec::LINEAR_REGRESSION)},
        GradientCase{"Logistic", Spec(ModelSpec::LOGISTIC_REGRESSION)},
        GradientCase{"Softmax", Spec(ModelSpec::SOFTMAX_REGRESSION)},
        GradientCase{"MlpRelu", Spec(ModelSpec::MLP, {4}, ModelSpec::RELU)},
        GradientCase{"MlpTanh", Spec(ModelSpec::MLP, {4}, ModelSpec::TANH)},
        GradientCase{"MlpSigmoid", Spec(ModelSpec::MLP, {4}, ModelSpec::SIGMOID)},
        GradientCase{"MlpTwoHiddenRelu", Spec(ModelSpec::MLP, {4, 3}, ModelSpec::RELU)},
        GradientCase{"MlpTwoHiddenTanh", Spec(ModelSpec::MLP, {4, 3}, ModelSpec::TANH)}),
                       ::testing::ValuesIn(AvailableBackends())),
    [](const ::testing::TestParamInfo<std::tuple<GradientCase, BackendFactory>>& info) {
      return std::get<0>(info.param).name + std::get<1>(info.param).name;
    });

TEST(ModelTest, VariablesOfAnMlp) {
  std::unique_ptr<ComputeBackend> backend = CreateCpuBackend();
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(
      Spec(ModelSpec::MLP, {4, 3}), kFeatureDim, kNumClasses, kMaxBatchSize, backend.get());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->is_classifier());
  const std::vector<VariableDef>& variables = (*model)->variables();
  const std::vector<std::string> names = {"layer0/weights", "layer0/bias",    "layer1/weights",
                                          "layer1/bias",    "layer2/weights", "layer2/bias"};
  const std::vector<std::vector<int64_t>> shapes = {{5, 4}, {4}, {4, 3}, {3}, {3, 3}, {3}};
  ASSERT_EQ(variables.size(), names.size());
  for (size_t i = 0; i < variables.size(); ++i) {
    EXPECT_EQ(variables[i].name(), names[i]);
    EXPECT_EQ(std::vector<int64_t>(variables[i].shape().begin(), variables[i].shape().end()),
              shapes[i])
        << names[i];
    EXPECT_EQ(variables[i].initializer().kind(),
              i % 2 == 0 ? InitializerConfig::GLOROT_UNIFORM : InitializerConfig::ZEROS)
        << names[i];
  }
}

TEST(ModelTest, RegressionsHaveOneLayerAndTheSpecsInitializer) {
  std::unique_ptr<ComputeBackend> backend = CreateCpuBackend();
  for (ModelSpec::Kind kind : {ModelSpec::LINEAR_REGRESSION, ModelSpec::LOGISTIC_REGRESSION,
                               ModelSpec::SOFTMAX_REGRESSION}) {
    ModelSpec spec = Spec(kind);
    spec.mutable_weight_initializer()->set_kind(InitializerConfig::NORMAL);
    spec.mutable_weight_initializer()->set_scale(0.25f);
    absl::StatusOr<std::unique_ptr<Model>> model =
        Model::Create(spec, kFeatureDim, kNumClasses, kMaxBatchSize, backend.get());
    ASSERT_TRUE(model.ok()) << model.status();
    const int out = kind == ModelSpec::SOFTMAX_REGRESSION ? kNumClasses : 1;
    EXPECT_EQ((*model)->is_classifier(), kind != ModelSpec::LINEAR_REGRESSION);
    const std::vector<VariableDef>& variables = (*model)->variables();
    ASSERT_EQ(variables.size(), 2u);
    EXPECT_EQ(variables[0].name(), "layer0/weights");
    ASSERT_EQ(variables[0].shape_size(), 2);
    EXPECT_EQ(variables[0].shape(0), kFeatureDim);
    EXPECT_EQ(variables[0].shape(1), out);
    EXPECT_EQ(variables[0].initializer().kind(), InitializerConfig::NORMAL);
    EXPECT_EQ(variables[0].initializer().scale(), 0.25f);
    EXPECT_EQ(variables[1].name(), "layer0/bias");
    ASSERT_EQ(variables[1].shape_size(), 1);
    EXPECT_EQ(variables[1].shape(0), out);
    EXPECT_EQ(variables[1].initializer().kind(), InitializerConfig::ZEROS);
  }
}

TEST(ModelTest, ExplicitZerosInitializerIsKept) {
  std::unique_ptr<ComputeBackend> backend = CreateCpuBackend();
  ModelSpec spec = Spec(ModelSpec::SOFTMAX_REGRESSION);
  spec.mutable_weight_initializer();  // Set, with kind ZEROS.
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(spec, kFeatureDim, kNumClasses, kMaxBatchSize, backend.get());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->variables()[0].initializer().kind(), InitializerConfig::ZEROS);
}

TEST(ModelTest, AccuracyCountsArgmaxMatches) {
  std::unique_ptr<ComputeBackend> backend = CreateCpuBackend();
  // Softmax regression on 2 features and 3 classes: logits = (x0, x1, 0).
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(Spec(ModelSpec::SOFTMAX_REGRESSION), 2, 3, 8, backend.get());
  ASSERT_TRUE(model.ok()) << model.status();
  HostVariables weights((*model)->variables());
  weights.values[0] = {1, 0, 0, 0, 1, 0};
  HostBatch batch;
  batch.size = 5;
  batch.feature_dim = 2;
  // Predictions 0, 1, 2, 0, 1.
  batch.features = {2, 1, -1, 3, -1, -2, 5, 0, 0, 0.5};
  batch.labels = {0, 1, 2, 1, 2};
  absl::StatusOr<BatchMetrics> metrics = (*model)->Evaluate(batch.view(), weights.Const());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_DOUBLE_EQ(metrics->accuracy, 3.0 / 5.0);
  EXPECT_EQ(metrics->examples, 5);

  // Logistic regression predicts 1 where the logit is positive.
  model = Model::Create(Spec(ModelSpec::LOGISTIC_REGRESSION), 2, 2, 8, backend.get());
  ASSERT_TRUE(model.ok()) << model.status();
  HostVariables logistic_weights((*model)->variables());
  logistic_weights.values[0] = {1, -1};
  batch.labels = {1, 0, 1, 0, 0};  // Logits 1, -4, 1, 5, -0.5.
  metrics = (*model)->Evaluate(batch.view(), logistic_weights.Const());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_DOUBLE_EQ(metrics->accuracy, 4.0 / 5.0);

  // Regression reports no accuracy.
  model = Model::Create(Spec(ModelSpec::LINEAR_REGRESSION), 2, 0, 8, backend.get());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_FALSE((*model)->is_classifier());
  metrics = (*model)->Evaluate(batch.view(), logistic_weights.Const());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->accuracy, 0.0);
}

void ExpectInvalidCreate(const ModelSpec& spec, int feature_dim, int num_classes,
                         int max_batch_size, const std::string& expected) {
  std::unique_ptr<ComputeBackend> backend = CreateCpuBackend();
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(spec, feature_dim, num_classes, max_batch_size, backend.get());
  ASSERT_FALSE(model.ok()) << expected;
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(model.status().message()), HasSubstr(expected));
}

TEST(ModelTest, InvalidSpecs) {
  ExpectInvalidCreate(Spec(ModelSpec::KIND_UNSPECIFIED), 5, 3, 8, "kind");
  ExpectInvalidCreate(Spec(static_cast<ModelSpec::Kind>(17)), 5, 3, 8, "kind");
  ExpectInvalidCreate(Spec(ModelSpec::MLP), 5, 3, 8, "hidden_sizes");
  ExpectInvalidCreate(Spec(ModelSpec::MLP, {4, 0}), 5, 3, 8, "hidden_sizes[1]");
  ExpectInvalidCreate(Spec(ModelSpec::MLP, {4}, static_cast<ModelSpec::Activation>(9)), 5, 3, 8,
                      "activation");
  ExpectInvalidCreate(Spec(ModelSpec::MLP, {4}), 5, 1, 8, "num_classes");
  ExpectInvalidCreate(Spec(ModelSpec::SOFTMAX_REGRESSION), 5, 1, 8, "num_classes");
  ExpectInvalidCreate(Spec(ModelSpec::LINEAR_REGRESSION), 0, 3, 8, "feature_dim");
  ExpectInvalidCreate(Spec(ModelSpec::SOFTMAX_REGRESSION), 5, 3, 0, "max_batch_size");
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(Spec(ModelSpec::LINEAR_REGRESSION), 5, 3, 8, nullptr);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("backend"));
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = CreateCpuBackend();
    absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(
        Spec(ModelSpec::MLP, {4}), kFeatureDim, kNumClasses, kMaxBatchSize, backend_.get());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    weights_ = std::make_unique<HostVariables>(model_->variables());
    gradients_ = std::make_unique<HostVariables>(model_->variables());
    std::mt19937 rng(7);
    batch_ = RandomBatch(Spec(ModelSpec::MLP), kMaxBatchSize + 1, &rng);
    batch_.size = kBatchSize;
  }

  // Expects both ComputeGradients and (unless only_gradients) Evaluate to reject the input.
  void ExpectInvalid(const Batch& batch, const ConstVariables& weights,
                     const MutableVariables& gradients, const std::string& expected,
                     bool only_gradients = false) {
    absl::StatusOr<BatchMetrics> metrics = model_->ComputeGradients(batch, weights, gradients);
    ASSERT_FALSE(metrics.ok()) << expected;
    EXPECT_EQ(metrics.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(metrics.status().message()), HasSubstr(expected));
    if (only_gradients) return;
    metrics = model_->Evaluate(batch, weights);
    ASSERT_FALSE(metrics.ok()) << expected;
    EXPECT_EQ(metrics.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(metrics.status().message()), HasSubstr(expected));
  }

  std::unique_ptr<ComputeBackend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<HostVariables> weights_;
  std::unique_ptr<HostVariables> gradients_;
  HostBatch batch_;
};

TEST_F(BadInputTest, ValidInputIsAccepted) {
  EXPECT_TRUE(
      model_->ComputeGradients(batch_.view(), weights_->Const(), gradients_->Mutable()).ok());
  batch_.size = kMaxBatchSize;
  EXPECT_TRUE(model_->Evaluate(batch_.view(), weights_->Const()).ok());
}

TEST_F(BadInputTest, BatchTooLarge) {
  batch_.size = kMaxBatchSize + 1;
  ExpectInvalid(batch_.view(), weights_->Const(), gradients_->Mutable(), "max_batch_size");
}

TEST_F(BadInputTest, EmptyBatch) {
  batch_.size = 0;
  ExpectInvalid(batch_.view(), weights_->Const(), gradients_->Mutable(), "batch size");
}

TEST_F(BadInputTest, WrongFeatureDim) {
  batch_.feature_dim = kFeatureDim - 1;
  ExpectInvalid(batch_.view(), weights_->Const(), gradients_->Mutable(), "feature_dim");
}

TEST_F(BadInputTest, LabelOutOfRange) {
  batch_.labels[3] = kNumClasses;
  ExpectInvalid(batch_.view(), weights_->Const(), gradients_->Mutable(), "label 3");
  batch_.labels[3] = 0.5f;
  ExpectInvalid(batch_.view(), weights_->Const(), gradients_->Mutable(), "label 3");
  batch_.labels[3] = -1;
  ExpectInvalid(batch_.view(), weights_->Const(), gradients_->Mutable(), "label 3");
}

TEST_F(BadInputTest, MissingWeights) {
  ConstVariables weights = weights_->Const();
  weights.erase("layer1/bias");
  ExpectInvalid(batch_.view(), weights, gradients_->Mutable(), "\"layer1/bias\"");
}

TEST_F(BadInputTest, WrongWeightsSize) {
  ConstVariables weights = weights_->Const();
  weights["layer0/weights"] = weights["layer0/weights"].subspan(1);
  ExpectInvalid(batch_.view(), weights, gradients_->Mutable(), "\"layer0/weights\"");
}

TEST_F(BadInputTest, MissingGradient) {
  MutableVariables gradients = gradients_->Mutable();
  gradients.erase("layer0/bias");
  ExpectInvalid(batch_.view(), weights_->Const(), gradients, "\"layer0/bias\"",
                /*only_gradients=*/true);
}

TEST_F(BadInputTest, WrongGradientSize) {
  std::vector<float> too_large(100);
  MutableVariables gradients = gradients_->Mutable();
  gradients["layer1/weights"] = absl::MakeSpan(too_large);
  ExpectInvalid(batch_.view(), weights_->Const(), gradients, "\"layer1/weights\"",
                /*only_gradients=*/true);
}

// Plain SGD on three separable clusters drives the loss of softmax regression down.
TEST(ModelTest, SgdTrainsSoftmaxRegression) {
  constexpr int kPerClass = 10;
  constexpr int kClasses = 3;
  constexpr int kExamples = kPerClass * kClasses;
  const float centers[kClasses][2] = {{2, 2}, {-2, 2}, {0, -2}};
  HostBatch batch;
  batch.size = kExamples;
  batch.feature_dim = 2;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> jitter(-0.5f, 0.5f);
  for (int c = 0; c < kClasses; ++c) {
    for (int i = 0; i < kPerClass; ++i) {
      batch.features.push_back(centers[c][0] + jitter(rng));
      batch.features.push_back(centers[c][1] + jitter(rng));
      batch.labels.push_back(static_cast<float>(c));
    }
  }

  std::unique_ptr<ComputeBackend> backend = CreateCpuBackend();
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(Spec(ModelSpec::SOFTMAX_REGRESSION), 2, kClasses, kExamples, backend.get());
  ASSERT_TRUE(model.ok()) << model.status();
  HostVariables weights((*model)->variables());
  HostVariables gradients((*model)->variables());
  double first_loss = 0;
  BatchMetrics last;
  for (int step = 0; step < 100; ++step) {
    absl::StatusOr<BatchMetrics> metrics =
        (*model)->ComputeGradients(batch.view(), weights.Const(), gradients.Mutable());
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    if (step == 0) first_loss = metrics->loss;
    last = *metrics;
    for (size_t v = 0; v < weights.values.size(); ++v) {
      for (size_t j = 0; j < weights.values[v].size(); ++j) {
        weights.values[v][j] -= 0.5f * gradients.values[v][j];
      }
    }
  }
  EXPECT_NEAR(first_loss, std::log(3.0), 1e-6);  // Zero weights: uniform predictions.
  EXPECT_LT(last.loss, 0.1 * first_loss);
  EXPECT_EQ(last.accuracy, 1.0);
}

// Weights, gradients and a batch's activations are counted before any is allocated: sizes
// that would take terabytes are refused, not attempted.
TEST(ModelTest, AModelBeyondItsBoundIsRefusedBeforeAnythingIsAllocated) {
  std::unique_ptr<ComputeBackend> backend = CreateCpuBackend();
  absl::StatusOr<std::unique_ptr<Model>> wide =
      Model::Create(Spec(ModelSpec::MLP, {1 << 20, 1 << 20}), 784, 10, 32, backend.get());
  EXPECT_EQ(wide.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(wide.status().message(), HasSubstr("model.hidden_sizes"));
  EXPECT_THAT(wide.status().message(), HasSubstr("a worker holds at most 8192 MiB"));

  absl::StatusOr<std::unique_ptr<Model>> batch = Model::Create(
      Spec(ModelSpec::LINEAR_REGRESSION), 1 << 24, 0, 1 << 20, backend.get());
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(batch.status().message(), HasSubstr("activations for 1048576 examples per batch"));
  EXPECT_THAT(batch.status().message(), HasSubstr("smaller batch_size"));

  EXPECT_TRUE(Model::Create(Spec(ModelSpec::MLP, {1024}), 784, 10, 256, backend.get()).ok());
}

}  // namespace
}  // namespace ps
