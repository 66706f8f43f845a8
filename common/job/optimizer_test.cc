#include "common/job/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/job/job_schema.h"

namespace ps {
namespace {

constexpr float kLearningRate = 0.1f;
const std::vector<float> kInitialWeights = {1.0f, -0.5f, 0.25f, 3.0f};
// One gradient per step, with mixed signs and magnitudes.
const std::vector<std::vector<float>> kGradients = {
    {0.5f, -1.25f, 2.0f, 0.01f},
    {0.4f, 0.75f, -3.0f, 0.02f},
    {-0.1f, 1.5f, 0.5f, -0.03f},
    {0.3f, -0.25f, 1.0f, 0.04f},
    {0.2f, 0.5f, -2.5f, 0.05f},
};

// Weights and slots, in float as the optimizer keeps them or in double for a reference.
template <typename T>
struct State {
  std::vector<T> weights;
  std::vector<std::vector<T>> slots;
};

// Runs `optimizer` over kGradients from kInitialWeights; the first update has update count
// `first_update_count`.
State<float> Train(const Optimizer& optimizer, int64_t first_update_count = 0) {
  State<float> state;
  state.weights = kInitialWeights;
  state.slots.assign(optimizer.num_slots(), std::vector<float>(kInitialWeights.size()));
  std::vector<absl::Span<float>> slots(state.slots.begin(), state.slots.end());
  optimizer.InitializeSlots(slots);
  for (size_t step = 0; step < kGradients.size(); ++step) {
    optimizer.Apply(kLearningRate, kGradients[step], absl::MakeSpan(state.weights), slots,
                    first_update_count + static_cast<int64_t>(step));
  }
  return state;
}

std::unique_ptr<Optimizer> CreateOrDie(const OptimizerConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = Optimizer::Create(config);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return optimizer.ok() ? std::move(*optimizer) : nullptr;
}

void ExpectClose(const std::vector<float>& actual, const std::vector<double>& expected,
                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-6 * std::abs(expected[i]))
        << what << "[" << i << "]";
  }
}

void ExpectClose(const State<float>& actual, const State<double>& expected) {
  ExpectClose(actual.weights, expected.weights, "weights");
  ASSERT_EQ(actual.slots.size(), expected.slots.size());
  for (size_t s = 0; s < actual.slots.size(); ++s) {
    ExpectClose(actual.slots[s], expected.slots[s], "slot " + std::to_string(s));
  }
}

// Double-precision references written from the rules in parameter.proto, starting from
// kInitialWeights and stepping over kGradients. Settings arrive as the floats the optimizer
// sees, so only the arithmetic differs.

State<double> InitialReference(int num_slots, double slot_value) {
  State<double> state;
  state.weights.assign(kInitialWeights.begin(), kInitialWeights.end());
  state.slots.assign(num_slots, std::vector<double>(kInitialWeights.size(), slot_value));
  return state;
}

State<double> SgdReference() {
  State<double> s = InitialReference(0, 0);
  const double lr = kLearningRate;
  for (const std::vector<float>& g : kGradients) {
    for (size_t i = 0; i < g.size(); ++i) s.weights[i] -= lr * g[i];
  }
  return s;
}

State<double> MomentumReference(float momentum, bool nesterov) {
  State<double> s = InitialReference(1, 0);
  const double lr = kLearningRate;
  const double m = momentum;
  std::vector<double>& v = s.slots[0];
  for (const std::vector<float>& g : kGradients) {
    for (size_t i = 0; i < g.size(); ++i) {
      v[i] = m * v[i] + g[i];
      s.weights[i] -= nesterov ? lr * (g[i] + m * v[i]) : lr * v[i];
    }
  }
  return s;
}

State<double> AdagradReference(float epsilon, float initial_accumulator) {
  State<double> s = InitialReference(1, initial_accumulator);
  const double lr = kLearningRate;
  std::vector<double>& a = s.slots[0];
  for (const std::vector<float>& g : kGradients) {
    for (size_t i = 0; i < g.size(); ++i) {
      a[i] += static_cast<double>(g[i]) * g[i];
      s.weights[i] -= lr * g[i] / (std::sqrt(a[i]) + epsilon);
    }
  }
  return s;
}

State<double> AdamReference(float beta1_float, float beta2_float, float epsilon,
                            int64_t first_update_count) {
  State<double> s = InitialReference(2, 0);
  const double lr = kLearningRate;
  const double beta1 = beta1_float;
  const double beta2 = beta2_float;
  std::vector<double>& m = s.slots[0];
  std::vector<double>& v = s.slots[1];
  for (size_t step = 0; step < kGradients.size(); ++step) {
    const std::vector<float>& g = kGradients[step];
    const double t = static_cast<double>(first_update_count + static_cast<int64_t>(step) + 1);
    const double lr_t = lr * std::sqrt(1 - std::pow(beta2, t)) / (1 - std::pow(beta1, t));
    for (size_t i = 0; i < g.size(); ++i) {
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      s.weights[i] -= lr_t * m[i] / (std::sqrt(v[i]) + epsilon);
    }
  }
  return s;
}

TEST(OptimizerTest, SgdMatchesReference) {
  OptimizerConfig config;
  config.set_kind(OptimizerConfig::SGD);
  std::unique_ptr<Optimizer> optimizer = CreateOrDie(config);
  ASSERT_NE(optimizer, nullptr);
  ExpectClose(Train(*optimizer), SgdReference());
}

TEST(OptimizerTest, MomentumMatchesReference) {
  OptimizerConfig config;
  config.set_kind(OptimizerConfig::MOMENTUM);
  config.set_momentum(0.8f);
  std::unique_ptr<Optimizer> optimizer = CreateOrDie(config);
  ASSERT_NE(optimizer, nullptr);
  ExpectClose(Train(*optimizer), MomentumReference(0.8f, /*nesterov=*/false));
}

TEST(OptimizerTest, MomentumDefaultsToNineTenths) {
  OptimizerConfig config;
  config.set_kind(OptimizerConfig::MOMENTUM);
  std::unique_ptr<Optimizer> optimizer = CreateOrDie(config);
  ASSERT_NE(optimizer, nullptr);
  ExpectClose(Train(*optimizer), MomentumReference(0.9f, /*nesterov=*/false));
}

TEST(OptimizerTest, NesterovMatchesReferenceAndDiffersFromPlainMomentum) {
  OptimizerConfig config;
  config.set_kind(OptimizerConfig::MOMENTUM);
  config.set_momentum(0.8f);
  config.set_nesterov(true);
  std::unique_ptr<Optimizer> nesterov = CreateOrDie(config);
  ASSERT_NE(nesterov, nullptr);
  State<float> nesterov_state = Train(*nesterov);
  ExpectClose(nesterov_state, MomentumReference(0.8f, /*nesterov=*/true));

  config.set_nesterov(false);
  std::unique_ptr<Optimizer> plain = CreateOrDie(config);
  ASSERT_NE(plain, nullptr);
  State<float> plain_state = Train(*plain);
  // The velocities agree; only the step taken from them differs.
  EXPECT_EQ(nesterov_state.slots, plain_state.slots);
  for (size_t i = 0; i < plain_state.weights.size(); ++i) {
    EXPECT_GT(std::abs(nesterov_state.weights[i] - plain_state.weights[i]), 1e-4) << i;
  }
}

TEST(OptimizerTest, AdagradMatchesReferenceWithDefaults) {
  OptimizerConfig config;
  config.set_kind(OptimizerConfig::ADAGRAD);
  std::unique_ptr<Optimizer> optimizer = CreateOrDie(config);
  ASSERT_NE(optimizer, nullptr);
  ExpectClose(Train(*optimizer), AdagradReference(1e-7f, 0.1f));
}

TEST(OptimizerTest, AdagradMatchesReferenceWithSettings) {
  OptimizerConfig config;
  config.set_kind(OptimizerConfig::ADAGRAD);
  config.set_epsilon(0.01f);
  config.set_initial_accumulator(0.5f);
  std::unique_ptr<Optimizer> optimizer = CreateOrDie(config);
  ASSERT_NE(optimizer, nullptr);
  ExpectClose(Train(*optimizer), AdagradReference(0.01f, 0.5f));
}

TEST(OptimizerTest, AdamMatchesReferenceWithDefaults) {
  OptimizerConfig config;
  config.set_kind(OptimizerConfig::ADAM);
  std::unique_ptr<Optimizer> optimizer = CreateOrDie(config);
  ASSERT_NE(optimizer, nullptr);
  ExpectClose(Train(*optimizer), AdamReference(0.9f, 0.999f, 1e-8f, 0));
}

TEST(OptimizerTest, AdamMatchesReferenceWithSettingsAndLaterUpdateCount) {
  OptimizerConfig config;
  config.set_kind(OptimizerConfig::ADAM);
  config.set_beta1(0.5f);
  config.set_beta2(0.75f);
  config.set_epsilon(1e-3f);
  std::unique_ptr<Optimizer> optimizer = CreateOrDie(config);
  ASSERT_NE(optimizer, nullptr);
  ExpectClose(Train(*optimizer, /*first_update_count=*/3), AdamReference(0.5f, 0.75f, 1e-3f, 3));
}

TEST(OptimizerTest, AdamBiasCorrectionDependsOnUpdateCount) {
  OptimizerConfig config;
  config.set_kind(OptimizerConfig::ADAM);
  std::unique_ptr<Optimizer> optimizer = CreateOrDie(config);
  ASSERT_NE(optimizer, nullptr);
  EXPECT_NE(Train(*optimizer, 0).weights, Train(*optimizer, 100).weights);
}

TEST(OptimizerTest, SlotCountsAndInitialValues) {
  struct Case {
    OptimizerConfig::Kind kind;
    float initial_accumulator;
    int num_slots;
    float initial_value;
  };
  const Case kCases[] = {
      {OptimizerConfig::SGD, 0, 0, 0},
      {OptimizerConfig::MOMENTUM, 0, 1, 0},
      {OptimizerConfig::ADAGRAD, 0, 1, 0.1f},
      {OptimizerConfig::ADAGRAD, 0.25f, 1, 0.25f},
      {OptimizerConfig::ADAM, 0, 2, 0},
  };
  for (const Case& c : kCases) {
    OptimizerConfig config;
    config.set_kind(c.kind);
    config.set_initial_accumulator(c.initial_accumulator);
    std::unique_ptr<Optimizer> optimizer = CreateOrDie(config);
    ASSERT_NE(optimizer, nullptr);
    ASSERT_EQ(optimizer->num_slots(), c.num_slots) << config.ShortDebugString();
    std::vector<std::vector<float>> storage(c.num_slots, std::vector<float>(3, -7.0f));
    std::vector<absl::Span<float>> slots(storage.begin(), storage.end());
    optimizer->InitializeSlots(slots);
    for (const std::vector<float>& slot : storage) {
      EXPECT_EQ(slot, std::vector<float>(3, c.initial_value)) << config.ShortDebugString();
    }
  }
}

// The ranges themselves are tested with ValidateOptimizerConfig (common/job/job_schema_test.cc).
TEST(OptimizerTest, CreateRefusesWhatTheJobSchemaRefuses) {
  OptimizerConfig config;
  config.set_kind(OptimizerConfig::ADAM);
  config.set_beta2(1.5f);
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = Optimizer::Create(config);
  ASSERT_FALSE(optimizer.ok());
  EXPECT_EQ(optimizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(optimizer.status(), ValidateOptimizerConfig(config));
}

}  // namespace
}  // namespace ps
