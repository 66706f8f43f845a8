#include "worker/model/sparse_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/compute/available_backends.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// Three examples over four distinct keys: slots 0..3 stand for keys 100..103.
SparseBatch SmallBatch(std::vector<float> labels) {
  SparseBatch batch;
  batch.size = 3;
  batch.keys = {100, 101, 102, 103};
  batch.offsets = {0, 2, 3, 6};
  batch.slots = {0, 1, 1, 2, 3, 0};
  batch.values = {1.0f, -0.5f, 2.0f, 0.25f, 1.5f, -1.0f};
  batch.labels = std::move(labels);
  return batch;
}

// Checks `analytic` (the gradient with respect to `values`) against central differences of the
// mean loss that `loss` computes.
template <typename Loss>
void ExpectGradient(std::vector<float>& values, const std::vector<float>& analytic, Loss loss,
                    const std::string& what) {
  ASSERT_EQ(values.size(), analytic.size());
  constexpr float kStep = 1e-2f;
  for (size_t i = 0; i < values.size(); ++i) {
    const float saved = values[i];
    values[i] = saved + kStep;
    const double up = loss();
    values[i] = saved - kStep;
    const double down = loss();
    values[i] = saved;
    EXPECT_NEAR(analytic[i], (up - down) / (2 * kStep), 2e-3) << what << "[" << i << "]";
  }
}

// Every test on every available backend (the CPU; a GPU in a CUDA build where one is usable).
class SparseModelTest : public ::testing::TestWithParam<BackendFactory> {
 protected:
  void SetUp() override {
    if (!GetParam().unavailable.empty()) GTEST_SKIP() << GetParam().unavailable;
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = GetParam().create();
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
  }

  std::unique_ptr<ComputeBackend> backend_;
};

TEST_P(SparseModelTest, LogisticRegressionLossAndGradients) {
  ModelSpec spec;
  spec.set_kind(ModelSpec::SPARSE_LOGISTIC_REGRESSION);
  absl::StatusOr<std::unique_ptr<SparseModel>> model =
      SparseModel::Create(spec, 2, 8, backend_.get());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->table().name(), "weights");
  EXPECT_EQ((*model)->table().width(), 1);
  ASSERT_EQ((*model)->variables().size(), 1u);
  EXPECT_EQ((*model)->variables()[0].name(), "bias");

  const SparseBatch batch = SmallBatch({1, 0, 1});
  std::vector<float> rows = {0.3f, -0.2f, 0.1f, 0.4f};
  std::vector<float> bias = {0.05f};
  std::vector<float> row_gradients(4), bias_gradient(1);
  ConstVariables weights = {{"bias", bias}};
  MutableVariables gradients = {{"bias", absl::MakeSpan(bias_gradient)}};
  absl::StatusOr<BatchMetrics> metrics =
      (*model)->ComputeGradients(batch, weights, rows, gradients, absl::MakeSpan(row_gradients));
  ASSERT_TRUE(metrics.ok()) << metrics.status();

  // By hand: logit of example 0 = 0.05 + 1 * 0.3 - 0.5 * -0.2 = 0.45, and so on.
  const double logits[3] = {0.05 + 0.3 + 0.1, 0.05 + 2 * -0.2, 0.05 + 0.25 * 0.1 + 1.5 * 0.4 - 0.3};
  const double labels[3] = {1, 0, 1};
  double loss = 0;
  int correct = 0;
  for (int b = 0; b < 3; ++b) {
    const double p = 1 / (1 + std::exp(-logits[b]));
    loss -= labels[b] * std::log(p) + (1 - labels[b]) * std::log(1 - p);
    correct += (logits[b] > 0) == (labels[b] == 1);
  }
  EXPECT_NEAR(metrics->loss, loss / 3, 1e-6);
  EXPECT_DOUBLE_EQ(metrics->accuracy, correct / 3.0);
  EXPECT_EQ(metrics->examples, 3);

  auto mean_loss = [&] { return (*model)->Evaluate(batch, weights, rows)->loss; };
  ExpectGradient(rows, row_gradients, mean_loss, "row gradient");
  ExpectGradient(bias, bias_gradient, mean_loss, "bias gradient");
}

TEST_P(SparseModelTest, EmbeddingBagMlpGradientsReachTheRows) {
  ModelSpec spec;
  spec.set_kind(ModelSpec::EMBEDDING_BAG_MLP);
  spec.set_embedding_dim(3);
  spec.add_hidden_sizes(5);
  spec.set_activation(ModelSpec::TANH);
  absl::StatusOr<std::unique_ptr<SparseModel>> model =
      SparseModel::Create(spec, 3, 8, backend_.get());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->table().name(), "embeddings");
  EXPECT_EQ((*model)->table().width(), 3);
  EXPECT_EQ((*model)->table().initializer().kind(), InitializerConfig::GLOROT_UNIFORM);

  // Deterministic values for every variable and row.
  std::vector<std::vector<float>> arrays;
  for (const VariableDef& variable : (*model)->variables()) {
    int64_t size = 1;
    for (int64_t dim : variable.shape()) size *= dim;
    std::vector<float>& array = arrays.emplace_back(size);
    for (int64_t i = 0; i < size; ++i) array[i] = 0.3f * std::sin(1.7f * (i + arrays.size()));
  }
  std::vector<float> rows(12);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = 0.5f * std::cos(0.9f * i);
  std::vector<std::vector<float>> gradient_arrays;
  ConstVariables weights;
  MutableVariables gradients;
  for (size_t v = 0; v < arrays.size(); ++v) gradient_arrays.emplace_back(arrays[v].size());
  for (size_t v = 0; v < arrays.size(); ++v) {
    weights[(*model)->variables()[v].name()] = arrays[v];
    gradients[(*model)->variables()[v].name()] = absl::MakeSpan(gradient_arrays[v]);
  }
  const SparseBatch batch = SmallBatch({2, 0, 1});
  std::vector<float> row_gradients(12);
  absl::StatusOr<BatchMetrics> metrics =
      (*model)->ComputeGradients(batch, weights, rows, gradients, absl::MakeSpan(row_gradients));
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_GT(metrics->loss, 0);

  auto mean_loss = [&] { return (*model)->Evaluate(batch, weights, rows)->loss; };
  ExpectGradient(rows, row_gradients, mean_loss, "row gradient");
  for (size_t v = 0; v < arrays.size(); ++v) {
    ExpectGradient(arrays[v], gradient_arrays[v], mean_loss, (*model)->variables()[v].name());
  }
  // Slot 3 (key 103) appears once, in example 2 with value 1.5: its gradient is not zero, and
  // a key no example holds would get none.
  EXPECT_NE(row_gradients[9], 0.0f);
}

TEST_P(SparseModelTest, RefusesMalformedInputs) {
  ModelSpec spec;
  spec.set_kind(ModelSpec::SPARSE_LOGISTIC_REGRESSION);
  EXPECT_THAT(SparseModel::Create(spec, 3, 8, backend_.get()).status().message(),
              HasSubstr("needs binary labels"));
  spec.set_kind(ModelSpec::MLP);
  EXPECT_THAT(SparseModel::Create(spec, 3, 8, backend_.get()).status().message(),
              HasSubstr("is not a sparse model"));
  spec.set_kind(ModelSpec::SPARSE_LOGISTIC_REGRESSION);
  std::unique_ptr<SparseModel> model = *SparseModel::Create(spec, 2, 2, backend_.get());

  std::vector<float> rows(4), row_gradients(4), bias = {0}, bias_gradient(1);
  ConstVariables weights = {{"bias", bias}};
  MutableVariables gradients = {{"bias", absl::MakeSpan(bias_gradient)}};
  auto compute = [&](const SparseBatch& batch, std::vector<float>& values) {
    return model->ComputeGradients(batch, weights, values, gradients, absl::MakeSpan(row_gradients))
        .status();
  };
  EXPECT_THAT(compute(SmallBatch({1, 0, 1}), rows).message(), HasSubstr("max_batch_size (2)"));
  SparseBatch batch = SmallBatch({1, 0});
  batch.size = 2;
  batch.offsets = {0, 2, 3};
  batch.slots = {0, 1, 1};
  batch.values = {1, 1, 1};
  EXPECT_TRUE(compute(batch, rows).ok());
  std::vector<float> short_rows(3);
  EXPECT_THAT(compute(batch, short_rows).message(), HasSubstr("3 values"));
  SparseBatch bad_slot = batch;
  bad_slot.slots[2] = 4;
  EXPECT_THAT(compute(bad_slot, rows).message(), HasSubstr("slot 4 is outside its 4 keys"));
  SparseBatch bad_label = batch;
  bad_label.labels[1] = 2;
  EXPECT_THAT(compute(bad_label, rows).message(), HasSubstr("labels are class ids in [0, 2)"));
  SparseBatch ragged = batch;
  ragged.offsets = {0, 2, 5};
  EXPECT_THAT(compute(ragged, rows).message(), HasSubstr("malformed"));
}

INSTANTIATE_TEST_SUITE_P(AllBackends, SparseModelTest, ::testing::ValuesIn(AvailableBackends()),
                         [](const ::testing::TestParamInfo<BackendFactory>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace ps
