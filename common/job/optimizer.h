// Optimizers: SGD, momentum (optionally Nesterov), AdaGrad and Adam, applied to one slice of a
// variable at a time, by the ps and by workers that update their own copy (all-reduce). The
// rules are written beside OptimizerConfig in proto/parameter.proto and match TensorFlow's
// ApplyGradientDescent, ApplyMomentum, ApplyAdagrad (with epsilon) and ApplyAdam.
#ifndef PS_COMMON_JOB_OPTIMIZER_H_
#define PS_COMMON_JOB_OPTIMIZER_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/parameter.pb.h"

namespace ps {

// Immutable once created; thread-safe (Apply keeps no state of its own).
class Optimizer {
 public:
  // INVALID_ARGUMENT naming the field for what ValidateOptimizerConfig (common/job/job_schema.h)
  // refuses. Unset fields take the defaults given in parameter.proto.
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(const OptimizerConfig& config);

  virtual ~Optimizer() = default;

  // How many per-element state arrays ("slots") a slice needs: 0 (SGD), 1 (momentum: the
  // velocity; AdaGrad: the accumulator) or 2 (Adam: m and v).
  virtual int num_slots() const = 0;

  // Sets the slots' initial values (zero, or AdaGrad's initial accumulator).
  // REQUIRES: slots.size() == num_slots(), each as long as the slice.
  virtual void InitializeSlots(absl::Span<const absl::Span<float>> slots) const = 0;

  // Applies one update with learning rate `learning_rate` and gradient `gradient` to `weights`.
  // `update_count` is how many updates this slice had before this one (Adam's t - 1).
  // REQUIRES: gradient.size() == weights.size(); slots as for InitializeSlots.
  virtual void Apply(float learning_rate, absl::Span<const float> gradient,
                     absl::Span<float> weights, absl::Span<const absl::Span<float>> slots,
                     int64_t update_count) const = 0;
};

}  // namespace ps

#endif  // PS_COMMON_JOB_OPTIMIZER_H_
