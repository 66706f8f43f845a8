#include "common/tensor/finite.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ps {

bool AllFinite(absl::Span<const float> values) {
  constexpr uint32_t kExponent = 0x7f800000;
  constexpr size_t kBlock = 64;
  const float* data = values.data();
  auto non_finite = [data](size_t i) {
    uint32_t bits;
    std::memcpy(&bits, data + i, sizeof(bits));
    return static_cast<uint32_t>((bits & kExponent) == kExponent);
  };
  // Blocks without an early exit vectorize; the check between them keeps a bad value near the
  // start from costing a pass over everything.
  uint32_t any = 0;
  size_t i = 0;
  for (; i + kBlock <= values.size() && any == 0; i += kBlock) {
    for (size_t j = 0; j < kBlock; ++j) any |= non_finite(i + j);
  }
  for (; i < values.size() && any == 0; ++i) any |= non_finite(i);
  return any == 0;
}

int64_t FirstNonFinite(absl::Span<const float> values) {
  if (AllFinite(values)) return -1;
  int64_t at = 0;
  while (std::isfinite(values[at])) ++at;
  return at;
}

}  // namespace ps
