#include "common/tensor/topk_compression.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "common/tensor/finite.h"
#include "common/tensor/float16.h"

namespace ps {
namespace {

}  // namespace

TopKCompressor::TopKCompressor(int64_t size, float fraction, TensorEncoding encoding)
    : encoding_(encoding),
      k_(std::clamp<int64_t>(std::llround(static_cast<double>(fraction) * size), 1,
                             std::max<int64_t>(size, 1))),
      residual_(size, 0.0f) {}

absl::StatusOr<TopKCompressor::Compressed> TopKCompressor::Compress(
    absl::Span<const absl::Span<const float>> pieces) {
  size_t size = 0;
  for (absl::Span<const float> piece : pieces) {
    size += piece.size();
    if (!AllFinite(piece)) {
      return absl::InvalidArgumentError(
          "the gradient holds NaN or Inf: not compressed, and kept out of the top-k residual");
    }
  }
  if (size != residual_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a gradient of ", size,
                                                   " floats for a top-k stream of ",
                                                   residual_.size()));
  }
  next_.resize(size);
  size_t at = 0;
  for (absl::Span<const float> piece : pieces) {
    for (float value : piece) {
      next_[at] = residual_[at] + value;
      ++at;
    }
  }
  Compressed out;
  if (next_.empty()) return out;
  // The k-th largest magnitude: every value above it is sent, then values equal to it from the
  // lowest position until k are.
  magnitudes_.resize(size);
  for (size_t i = 0; i < size; ++i) magnitudes_[i] = std::fabs(next_[i]);
  const size_t k = static_cast<size_t>(k_);
  std::nth_element(magnitudes_.begin(), magnitudes_.begin() + (k - 1), magnitudes_.end(),
                   std::greater<float>());
  const float threshold = magnitudes_[k - 1];
  size_t above = 0;
  for (size_t i = 0; i < size; ++i) above += std::fabs(next_[i]) > threshold;
  size_t ties = k - above;
  std::vector<uint32_t> positions;
  positions.reserve(k);
  for (size_t i = 0; i < size && positions.size() < k; ++i) {
    const float magnitude = std::fabs(next_[i]);
    if (magnitude < threshold) continue;
    if (magnitude == threshold) {
      if (ties == 0) continue;
      --ties;
    }
    positions.push_back(static_cast<uint32_t>(i));
  }
  out.index_gaps.reserve(k);
  out.values.reserve(k);
  uint32_t last = 0;
  for (uint32_t position : positions) {
    const float sent = RoundTo(next_[position], encoding_);
    if (!std::isfinite(sent)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the top-k value ", next_[position], " at position ", position,
          " is beyond float16's range (65504): use BFLOAT16, or clip the gradients"));
    }
    out.index_gaps.push_back(position - last);
    last = position;
    out.values.push_back(sent);
  }
  for (size_t j = 0; j < positions.size(); ++j) next_[positions[j]] -= out.values[j];
  residual_.swap(next_);  // What was not sent, and what rounding lost, stays.
  return out;
}

absl::Status CheckTopKGaps(absl::Span<const uint32_t> gaps, int64_t size) {
  int64_t position = -1;
  for (size_t i = 0; i < gaps.size(); ++i) {
    if (i > 0 && gaps[i] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "top-k position ", i, " repeats the one before (a gap of 0): positions must increase"));
    }
    position = (i == 0 ? 0 : position) + gaps[i];
    if (position >= size) {
      return absl::InvalidArgumentError(absl::StrCat("top-k position ", i, " is ", position,
                                                     ", beyond the shard's dense gradient of ",
                                                     size, " floats"));
    }
  }
  return absl::OkStatus();
}

void ExpandTopK(absl::Span<const uint32_t> gaps, absl::Span<const float> values,
                absl::Span<float> dense) {
  std::fill(dense.begin(), dense.end(), 0.0f);
  size_t position = 0;
  for (size_t i = 0; i < gaps.size(); ++i) {
    position += gaps[i];
    dense[position] = values[i];
  }
}

}  // namespace ps
