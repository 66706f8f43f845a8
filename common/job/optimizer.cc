#include "common/job/optimizer.h"

#include <cmath>
#include <cstddef>
#include <memory>

#include "common/job/job_schema.h"

namespace ps {
namespace {

// Defaults for fields left at 0, as documented in parameter.proto.
constexpr float kDefaultMomentum = 0.9f;
constexpr float kDefaultAdagradEpsilon = 1e-7f;
constexpr float kDefaultInitialAccumulator = 0.1f;
constexpr float kDefaultBeta1 = 0.9f;
constexpr float kDefaultBeta2 = 0.999f;
constexpr float kDefaultAdamEpsilon = 1e-8f;

float OrDefault(float value, float default_value) { return value == 0 ? default_value : value; }

// The loops below read settings into locals before looping: a store through a float* could
// otherwise alias a float member, and the compiler would reload it every iteration and give
// up on vectorizing. They vectorize at -O3; the two that take square roots need
// -fno-math-errno as well.

class SgdOptimizer : public Optimizer {
 public:
  int num_slots() const override { return 0; }

  void InitializeSlots(absl::Span<const absl::Span<float>>) const override {}

  void Apply(float learning_rate, absl::Span<const float> gradient, absl::Span<float> weights,
             absl::Span<const absl::Span<float>>, int64_t) const override {
    const float* g = gradient.data();
    float* w = weights.data();
    const size_t n = weights.size();
    for (size_t i = 0; i < n; ++i) w[i] -= learning_rate * g[i];
  }
};

class MomentumOptimizer : public Optimizer {
 public:
  MomentumOptimizer(float momentum, bool nesterov) : momentum_(momentum), nesterov_(nesterov) {}

  int num_slots() const override { return 1; }

  void InitializeSlots(absl::Span<const absl::Span<float>> slots) const override {
    for (float& x : slots[0]) x = 0;
  }

  void Apply(float learning_rate, absl::Span<const float> gradient, absl::Span<float> weights,
             absl::Span<const absl::Span<float>> slots, int64_t) const override {
    const float momentum = momentum_;
    const float* g = gradient.data();
    float* w = weights.data();
    float* velocity = slots[0].data();
    const size_t n = weights.size();
    if (nesterov_) {
      for (size_t i = 0; i < n; ++i) {
        velocity[i] = momentum * velocity[i] + g[i];
        w[i] -= learning_rate * (g[i] + momentum * velocity[i]);
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        velocity[i] = momentum * velocity[i] + g[i];
        w[i] -= learning_rate * velocity[i];
      }
    }
  }

 private:
  const float momentum_;
  const bool nesterov_;
};

class AdagradOptimizer : public Optimizer {
 public:
  AdagradOptimizer(float epsilon, float initial_accumulator)
      : epsilon_(epsilon), initial_accumulator_(initial_accumulator) {}

  int num_slots() const override { return 1; }

  void InitializeSlots(absl::Span<const absl::Span<float>> slots) const override {
    for (float& x : slots[0]) x = initial_accumulator_;
  }

  void Apply(float learning_rate, absl::Span<const float> gradient, absl::Span<float> weights,
             absl::Span<const absl::Span<float>> slots, int64_t) const override {
    const float epsilon = epsilon_;
    const float* g = gradient.data();
    float* w = weights.data();
    float* accumulator = slots[0].data();
    const size_t n = weights.size();
    for (size_t i = 0; i < n; ++i) {
      accumulator[i] += g[i] * g[i];
      w[i] -= learning_rate * g[i] / (std::sqrt(accumulator[i]) + epsilon);
    }
  }

 private:
  const float epsilon_;
  const float initial_accumulator_;
};

class AdamOptimizer : public Optimizer {
 public:
  AdamOptimizer(float beta1, float beta2, float epsilon)
      : beta1_(beta1), beta2_(beta2), epsilon_(epsilon) {}

  int num_slots() const override { return 2; }

  void InitializeSlots(absl::Span<const absl::Span<float>> slots) const override {
    for (float& x : slots[0]) x = 0;
    for (float& x : slots[1]) x = 0;
  }

  void Apply(float learning_rate, absl::Span<const float> gradient, absl::Span<float> weights,
             absl::Span<const absl::Span<float>> slots, int64_t update_count) const override {
    // The bias correction in double: beta^t for large t underflows gracefully there, and
    // 1 - beta^t keeps its digits for small t.
    const double t = static_cast<double>(update_count) + 1;
    const double correction = std::sqrt(1 - std::pow(static_cast<double>(beta2_), t)) /
                              (1 - std::pow(static_cast<double>(beta1_), t));
    const float corrected_rate = static_cast<float>(learning_rate * correction);
    const float beta1 = beta1_;
    const float beta2 = beta2_;
    const float one_minus_beta1 = 1 - beta1_;
    const float one_minus_beta2 = 1 - beta2_;
    const float epsilon = epsilon_;
    const float* g = gradient.data();
    float* w = weights.data();
    float* m = slots[0].data();
    float* v = slots[1].data();
    const size_t n = weights.size();
    for (size_t i = 0; i < n; ++i) {
      m[i] = beta1 * m[i] + one_minus_beta1 * g[i];
      v[i] = beta2 * v[i] + one_minus_beta2 * g[i] * g[i];
      w[i] -= corrected_rate * m[i] / (std::sqrt(v[i]) + epsilon);
    }
  }

 private:
  const float beta1_;
  const float beta2_;
  const float epsilon_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const OptimizerConfig& config) {
  if (absl::Status status = ValidateOptimizerConfig(config); !status.ok()) return status;
  switch (config.kind()) {
    case OptimizerConfig::MOMENTUM:
      return std::make_unique<MomentumOptimizer>(OrDefault(config.momentum(), kDefaultMomentum),
                                                 config.nesterov());
    case OptimizerConfig::ADAGRAD:
      return std::make_unique<AdagradOptimizer>(
          OrDefault(config.epsilon(), kDefaultAdagradEpsilon),
          OrDefault(config.initial_accumulator(), kDefaultInitialAccumulator));
    case OptimizerConfig::ADAM:
      return std::make_unique<AdamOptimizer>(OrDefault(config.beta1(), kDefaultBeta1),
                                             OrDefault(config.beta2(), kDefaultBeta2),
                                             OrDefault(config.epsilon(), kDefaultAdamEpsilon));
    default:  // SGD: ValidateOptimizerConfig refused the kinds it does not know.
      return std::make_unique<SgdOptimizer>();
  }
}

}  // namespace ps
