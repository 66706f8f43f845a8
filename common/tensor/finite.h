// Finiteness checks for float32 data on the ps hot path (every pushed gradient).
#ifndef PS_COMMON_TENSOR_FINITE_H_
#define PS_COMMON_TENSOR_FINITE_H_

#include "absl/types/span.h"

namespace ps {

// Whether no value is Inf or NaN, at about memory speed: the test is on the exponent bits
// (all ones for Inf and NaN), which the compiler vectorizes where it does not for
// std::isfinite.
bool AllFinite(absl::Span<const float> values);

}  // namespace ps

#endif  // PS_COMMON_TENSOR_FINITE_H_
