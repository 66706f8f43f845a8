// The stability of gradient descent with a constant delay, measured on the ps itself: a DELAYED
// shard (server/consistency/delayed_rule.h) holds x of f(x) = (h/2) x^2, serves it `delay`
// updates old, and a worker pushes the gradient h x of what it was served, so the shard applies
// x_{t+1} = x_t - lr h x_{t - delay}. That recurrence is stable iff lr h < 2 sin(pi / (2 (2
// delay + 1))) (delay 0: 2; 1: 1; 2: 0.618; 3: 0.445; 5: 0.285; 10: 0.149). docs/EXPERIMENTS.md
// section 7 sweeps the delay; tests/delay_stability_test checks the edge for delays 0, 1, 2.
#ifndef PS_TESTS_DELAY_STABILITY_H_
#define PS_TESTS_DELAY_STABILITY_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace ps {

// 2 sin(pi / (2 (2 delay + 1))): the largest stable lr h for a constant delay.
double TheoreticalStabilityEdge(int delay);

// Whether `steps` updates at lr h = `rate` from x = 1 stay bounded and shrink: the largest |x|
// over the last few periods of the oscillation below the largest over the same span half way
// through, or below 1e-20 (decayed to nothing). A run that overflows, or whose gradient the shard
// refuses as non-finite, is unstable. Errors: the shard's, unexpected.
absl::StatusOr<bool> IsStable(int delay, double rate, int64_t steps);

// The largest stable lr h for `delay`, by bisection over (0, 2.5] until the bracket is within
// `relative_tolerance` of its upper end.
absl::StatusOr<double> MeasuredStabilityEdge(int delay, double relative_tolerance,
                                             int64_t steps);

}  // namespace ps

#endif  // PS_TESTS_DELAY_STABILITY_H_
