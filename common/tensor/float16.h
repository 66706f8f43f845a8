// 16-bit floats for compressed tensors on the wire (issue 20): IEEE 754 binary16 ("half":
// 1 sign, 5 exponent, 10 fraction bits; largest finite 65504) and bfloat16 (float32's top 16
// bits: 8 exponent bits, float32's range, 7 fraction bits). Written here, portable, rather than
// taken from a compiler's _Float16 or a CPU's F16C, so that every machine converts alike.
//
// Conversions from float32 round to nearest, ties to even, as IEEE 754 and hardware converters
// do; a magnitude beyond the format's range becomes an infinity (half: from 65520 up), a NaN
// stays a (quiet) NaN with its sign, and values below half's smallest subnormal go to zero.
#ifndef PS_COMMON_TENSOR_FLOAT16_H_
#define PS_COMMON_TENSOR_FLOAT16_H_

#include <cstdint>

#include "absl/types/span.h"
#include "proto/parameter.pb.h"

namespace ps {

uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t half);
uint16_t FloatToBfloat16(float value);
float Bfloat16ToFloat(uint16_t bfloat16);

// `value` as it arrives after travelling in `encoding`: rounded to 16 bits and widened back for
// FLOAT16 and BFLOAT16, unchanged for FLOAT32.
float RoundTo(float value, TensorEncoding encoding);

// Whole arrays. REQUIRES: `to` as long as `from`.
void FloatsToHalves(absl::Span<const float> from, absl::Span<uint16_t> to);
void HalvesToFloats(absl::Span<const uint16_t> from, absl::Span<float> to);
void FloatsToBfloat16s(absl::Span<const float> from, absl::Span<uint16_t> to);
void Bfloat16sToFloats(absl::Span<const uint16_t> from, absl::Span<float> to);

}  // namespace ps

#endif  // PS_COMMON_TENSOR_FLOAT16_H_
