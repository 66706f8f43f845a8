// Dropout's mask, one element at a time, written once for both backends (as window_ops.h):
// whether element `i` of a mask is kept depends only on the seed and `i`, through a
// counter-based hash (SplitMix64's mixer), so the CPU and a GPU draw the same masks.
#ifndef PS_WORKER_COMPUTE_DROPOUT_OPS_H_
#define PS_WORKER_COMPUTE_DROPOUT_OPS_H_

#include <cstddef>
#include <cstdint>

#include "worker/compute/host_device.h"

namespace ps {
namespace dropout_ops {

// Element `i` of the mask for `seed`: 0 with probability `rate` (a uniform draw on a 2^-24
// grid below it), else 1 / (1 - rate). `rate` is in [0, 1).
PS_HOST_DEVICE inline float MaskAt(uint64_t seed, float rate, size_t i) {
  uint64_t x = seed + (static_cast<uint64_t>(i) + 1) * 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  const float uniform = static_cast<float>(x >> 40) * (1.0f / 16777216.0f);
  return uniform < rate ? 0.0f : 1.0f / (1.0f - rate);
}

// The seed of layer `layer`'s mask in a step whose models were given `step_seed`
// (Model::SetDropoutSeed).
PS_HOST_DEVICE inline uint64_t LayerSeed(uint64_t step_seed, int layer) {
  uint64_t x = step_seed ^ (static_cast<uint64_t>(layer) * 0xd6e8feb86659fd93ULL);
  x = (x ^ (x >> 32)) * 0xd6e8feb86659fd93ULL;
  return x ^ (x >> 32);
}

}  // namespace dropout_ops
}  // namespace ps

#endif  // PS_WORKER_COMPUTE_DROPOUT_OPS_H_
