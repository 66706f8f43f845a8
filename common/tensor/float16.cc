#include "common/tensor/float16.h"

#include <cstring>

namespace ps {
namespace {

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

}  // namespace

uint16_t FloatToHalf(float value) {
  const uint32_t bits = Bits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000) {  // NaN: quiet, with the top fraction bits kept.
    return static_cast<uint16_t>(sign | 0x7e00 | ((magnitude >> 13) & 0x03ff));
  }
  if (magnitude >= 0x477ff000) return sign | 0x7c00;  // >= 65520 (half's max + half ulp): Inf.
  if (magnitude < 0x38800000) {
    // Below half's smallest normal (2^-14): a subnormal m * 2^-24, m = value * 2^24 rounded
    // to nearest even; 0 below 2^-25.
    if (magnitude < 0x33000000) return sign;
    const uint32_t mantissa = (magnitude & 0x007fffff) | 0x00800000;  // The implicit 1.
    const int shift = 126 - static_cast<int>(magnitude >> 23);       // 14..24 bits off.
    const uint32_t kept = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t half_way = 1u << (shift - 1);
    const uint32_t rounded = kept + (rest > half_way || (rest == half_way && (kept & 1)));
    return static_cast<uint16_t>(sign | rounded);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23 fraction bits to 10.
  const uint32_t rebased = magnitude - ((127 - 15) << 23);
  const uint32_t kept = rebased >> 13;
  const uint32_t rest = rebased & 0x1fff;
  const uint32_t rounded = kept + (rest > 0x1000 || (rest == 0x1000 && (kept & 1)));
  return static_cast<uint16_t>(sign | rounded);  // A carry into the exponent is right (even Inf).
}

float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000) << 16;
  const uint32_t exponent = (half >> 10) & 0x1f;
  const uint32_t fraction = half & 0x03ff;
  if (exponent == 0x1f) return FromBits(sign | 0x7f800000 | (fraction << 13));  // Inf, NaN.
  if (exponent != 0) return FromBits(sign | ((exponent + 127 - 15) << 23) | (fraction << 13));
  if (fraction == 0) return FromBits(sign);  // +-0.
  // Subnormal: fraction * 2^-24, exact in float32.
  const float magnitude = static_cast<float>(fraction) * 0x1.0p-24f;
  return sign != 0 ? -magnitude : magnitude;
}

uint16_t FloatToBfloat16(float value) {
  const uint32_t bits = Bits(value);
  if ((bits & 0x7fffffff) > 0x7f800000) {  // NaN: quiet, keeping the sign and top bits.
    return static_cast<uint16_t>((bits >> 16) | 0x0040);
  }
  // Round the low 16 bits away to nearest even; a carry may reach Inf, which is right.
  const uint32_t rounded = bits + 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(rounded >> 16);
}

float Bfloat16ToFloat(uint16_t bfloat16) { return FromBits(static_cast<uint32_t>(bfloat16) << 16); }

void FloatsToHalves(absl::Span<const float> from, absl::Span<uint16_t> to) {
  for (size_t i = 0; i < from.size(); ++i) to[i] = FloatToHalf(from[i]);
}

void HalvesToFloats(absl::Span<const uint16_t> from, absl::Span<float> to) {
  for (size_t i = 0; i < from.size(); ++i) to[i] = HalfToFloat(from[i]);
}

void FloatsToBfloat16s(absl::Span<const float> from, absl::Span<uint16_t> to) {
  for (size_t i = 0; i < from.size(); ++i) to[i] = FloatToBfloat16(from[i]);
}

void Bfloat16sToFloats(absl::Span<const uint16_t> from, absl::Span<float> to) {
  for (size_t i = 0; i < from.size(); ++i) to[i] = Bfloat16ToFloat(from[i]);
}

float RoundTo(float value, TensorEncoding encoding) {
  switch (encoding) {
    case FLOAT16:
      return HalfToFloat(FloatToHalf(value));
    case BFLOAT16:
      return Bfloat16ToFloat(FloatToBfloat16(value));
    default:
      return value;
  }
}

}  // namespace ps
