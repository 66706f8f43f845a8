// Top-k sparsification of dense gradients with error feedback (CompressionSpec.topk_fraction;
// Stich, Cordonnier and Jaggi, "Sparsified SGD with memory", 2018; Lin et al., "Deep gradient
// compression", 2018), both sides of its wire form (PushRequestHeader.topk_index_gaps):
//  - the worker's TopKCompressor adds each gradient to what earlier pushes left out (the
//    residual), sends the k values of largest magnitude and keeps the rest as the new residual,
//    so that nothing is ever dropped, only delayed;
//  - the shard's CheckTopKGaps and ExpandTopK turn the positions and values back into a dense
//    gradient, zero elsewhere.
#ifndef PS_COMMON_TENSOR_TOPK_COMPRESSION_H_
#define PS_COMMON_TENSOR_TOPK_COMPRESSION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/parameter.pb.h"

namespace ps {

// One stream of pushes (a worker's pushes to one shard), its residual included. Not thread-safe.
class TopKCompressor {
 public:
  // `size`: the floats of every gradient; `fraction` in (0, 1); `encoding`: how the values will
  // travel, so that what rounding loses stays in the residual too.
  TopKCompressor(int64_t size, float fraction, TensorEncoding encoding);

  // k: round(fraction * size), at least 1.
  int64_t k() const { return k_; }

  struct Compressed {
    std::vector<uint32_t> index_gaps;  // Strictly increasing positions, as gaps (wire form).
    std::vector<float> values;         // The values there, exactly as the wire will carry them.
  };
  // Compresses the gradient made of `pieces` concatenated (size() floats in all): adds it to the
  // residual, returns the k largest magnitudes (ties: the lower positions) and keeps the rest.
  // Afterwards, residual + every value sent so far == every gradient given so far (up to float32
  // rounding of the sums). INVALID_ARGUMENT, the residual unchanged, for a gradient of another
  // size, one with NaN or Inf (which would stay in the residual for good), or a value to send
  // beyond the encoding's range (FLOAT16's 65504).
  absl::StatusOr<Compressed> Compress(absl::Span<const absl::Span<const float>> pieces);

  absl::Span<const float> residual() const { return residual_; }

 private:
  const TensorEncoding encoding_;
  const int64_t k_;
  std::vector<float> residual_;
  // Scratch, kept to avoid reallocation: the residual to be, and magnitudes for the selection.
  std::vector<float> next_;
  std::vector<float> magnitudes_;
};

// OK when `gaps` name strictly increasing positions below `size` (the receiving side's check,
// before anything is decoded); else INVALID_ARGUMENT naming the first bad one.
absl::Status CheckTopKGaps(absl::Span<const uint32_t> gaps, int64_t size);

// Writes `values` at the positions `gaps` name and zero everywhere else in `dense`.
// REQUIRES: CheckTopKGaps(gaps, dense.size()) is OK and values.size() == gaps.size().
void ExpandTopK(absl::Span<const uint32_t> gaps, absl::Span<const float> values,
                absl::Span<float> dense);

}  // namespace ps

#endif  // PS_COMMON_TENSOR_TOPK_COMPRESSION_H_
