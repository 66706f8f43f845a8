// Finiteness checks for float32 data on the ps hot path (every pushed gradient).
#ifndef PS_COMMON_TENSOR_FINITE_H_
#define PS_COMMON_TENSOR_FINITE_H_

#include <cstdint>

#include "absl/types/span.h"

namespace ps {

// Whether no value is Inf or NaN, at about memory speed: the test is on the exponent bits
// (all ones for Inf and NaN), which the compiler vectorizes where it does not for
// std::isfinite.
bool AllFinite(absl::Span<const float> values);
// The index of the first Inf or NaN in `values`, or -1 when all are finite (AllFinite's pass
// first, so a finite span costs what AllFinite does).
int64_t FirstNonFinite(absl::Span<const float> values);

}  // namespace ps

#endif  // PS_COMMON_TENSOR_FINITE_H_
