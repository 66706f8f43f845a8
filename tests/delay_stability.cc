#include "tests/delay_stability.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/shard_job.h"

namespace ps {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr float kCurvature = 2.0f;  // h; the worker's gradient is h x.

ParameterSpec QuadraticJob(int delay, double rate) {
  ParameterSpec spec;
  spec.set_job_id("delay-stability");
  spec.set_run_id("run");
  VariableDef* x = spec.add_variables();
  x->set_name("x");
  x->add_shape(1);
  x->mutable_initializer()->set_kind(InitializerConfig::CONSTANT);
  x->mutable_initializer()->set_scale(1.0f);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  spec.mutable_learning_rate()->set_base(static_cast<float>(rate / kCurvature));
  spec.mutable_consistency()->set_mode(ConsistencyConfig::DELAYED);
  spec.mutable_consistency()->set_delay(delay);
  spec.set_num_workers(1);
  return spec;
}

}  // namespace

double TheoreticalStabilityEdge(int delay) {
  return 2.0 * std::sin(kPi / (2.0 * (2.0 * delay + 1.0)));
}

absl::StatusOr<bool> IsStable(int delay, double rate, int64_t steps) {
  absl::StatusOr<std::unique_ptr<ShardJob>> job =
      ShardJob::Create(QuadraticJob(delay, rate), /*num_ps=*/1, /*ps_index=*/0);
  if (!job.ok()) return job.status();
  // A span of several oscillation periods (about 2 (2 delay + 1) updates each).
  const int64_t window = 8 * (2 * delay + 1) + 16;
  double middle_peak = 0, last_peak = 0;
  PullRequest pull;
  pull.set_job_id("delay-stability");
  pull.set_run_id("run");
  PushRequestHeader push;
  push.set_job_id("delay-stability");
  push.set_run_id("run");
  for (const SliceRef& slice : (*job)->SliceRefs()) *push.add_slices() = slice;
  for (int64_t t = 0; t < steps; ++t) {
    float served = 0;
    int64_t version = 0;
    absl::Status pulled;
    (*job)->Pull(pull, [&](absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
      pulled = snapshot.status();
      if (!snapshot.ok()) return;
      served = snapshot->pieces[0][0];
      version = snapshot->header.version();
    });
    if (!pulled.ok()) return pulled;
    const double amplitude = std::abs(static_cast<double>(served));
    if (!std::isfinite(amplitude) || amplitude > 1e6) return false;
    if (t >= steps / 2 - window && t < steps / 2) middle_peak = std::max(middle_peak, amplitude);
    if (t >= steps - window) last_peak = std::max(last_peak, amplitude);
    push.set_push_id(t + 1);
    push.set_read_version(version);
    const float gradient = kCurvature * served;
    absl::StatusOr<PushResponse> pushed = (*job)->Push(push, absl::MakeConstSpan(&gradient, 1));
    if (absl::IsInvalidArgument(pushed.status())) return false;  // Non-finite: it blew up.
    if (!pushed.ok()) return pushed.status();
  }
  // Shrinking, or decayed to nothing (where float's rounding of denormals may leave x flickering
  // at the smallest values instead of shrinking further).
  return last_peak < middle_peak || last_peak < 1e-20;
}

absl::StatusOr<double> MeasuredStabilityEdge(int delay, double relative_tolerance,
                                             int64_t steps) {
  double stable = 0, unstable = 2.5;  // Every delay is unstable at 2.5 (> 2, delay 0's edge).
  while (unstable - stable > relative_tolerance * unstable) {
    const double middle = (stable + unstable) / 2;
    absl::StatusOr<bool> is_stable = IsStable(delay, middle, steps);
    if (!is_stable.ok()) return is_stable.status();
    (*is_stable ? stable : unstable) = middle;
  }
  return (stable + unstable) / 2;
}

}  // namespace ps
