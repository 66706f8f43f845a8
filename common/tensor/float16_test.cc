#include "common/tensor/float16.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace ps {
namespace {

struct Format {
  const char* name;
  uint16_t (*to)(float);
  float (*from)(uint16_t);
  uint16_t infinity;  // The bit pattern of +Inf.
};
const Format kFormats[] = {{"half", FloatToHalf, HalfToFloat, 0x7c00},
                           {"bfloat16", FloatToBfloat16, Bfloat16ToFloat, 0x7f80}};

// Every one of the 65,536 bit patterns: finite values and infinities convert to float and back
// to themselves; NaNs stay NaN.
TEST(Float16Test, RoundToGivesTheValueAsTheWireCarriesIt) {
  const float third = 1.0f / 3.0f;
  EXPECT_EQ(RoundTo(third, FLOAT32), third);
  EXPECT_EQ(RoundTo(third, FLOAT16), HalfToFloat(FloatToHalf(third)));
  EXPECT_NE(RoundTo(third, FLOAT16), third);
  EXPECT_EQ(RoundTo(third, BFLOAT16), Bfloat16ToFloat(FloatToBfloat16(third)));
  EXPECT_NE(RoundTo(third, BFLOAT16), RoundTo(third, FLOAT16));
  EXPECT_TRUE(std::isinf(RoundTo(70000.0f, FLOAT16)));
  EXPECT_EQ(RoundTo(70000.0f, BFLOAT16), 70144.0f);
}

TEST(Float16Test, EveryPatternRoundTrips) {
  for (const Format& format : kFormats) {
    for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
      const float value = format.from(static_cast<uint16_t>(bits));
      if (std::isnan(value)) {
        EXPECT_TRUE(std::isnan(format.from(format.to(value)))) << format.name << " " << bits;
        continue;
      }
      ASSERT_EQ(format.to(value), bits) << format.name << " " << bits << " = " << value;
    }
  }
}

// Between every two neighbouring positive finite values a and b: the midpoint rounds to the
// one with an even last bit, and the floats just below and above it to a and b.
TEST(Float16Test, EveryMidpointRoundsToNearestEven) {
  for (const Format& format : kFormats) {
    for (uint16_t a = 0; a + 1 < format.infinity; ++a) {
      const uint16_t b = a + 1;
      const float low = format.from(a), high = format.from(b);
      // Exact (one more bit than the format has), and without overflow near float's max.
      const float middle = low + (high - low) / 2;
      ASSERT_EQ(format.to(middle), (a & 1) == 0 ? a : b) << format.name << " " << a;
      ASSERT_EQ(format.to(std::nextafter(middle, 0.0f)), a) << format.name << " " << a;
      ASSERT_EQ(format.to(std::nextafter(middle, high)), b) << format.name << " " << a;
      ASSERT_EQ(format.to(-middle), ((a & 1) == 0 ? a : b) | 0x8000) << format.name << " " << a;
    }
  }
}

TEST(Float16Test, OverflowUnderflowAndSpecialValues) {
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);  // Half's largest finite.
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // Half way to the next power: Inf.
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // Smallest subnormal.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // Half of it: a tie, to even 0.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToHalf(1e-30f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBfloat16(3.4e38f), 0x7f80);  // Rounds up past float's largest bfloat16.
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(-std::nanf("")))));
  EXPECT_TRUE(std::signbit(Bfloat16ToFloat(FloatToBfloat16(-std::nanf("")))));
}

TEST(Float16Test, ArraysConvertElementByElement) {
  const std::vector<float> values = {0.1f, -2.5f, 1000.0f, 1e-6f};
  std::vector<uint16_t> halves(4), bfloats(4);
  std::vector<float> back(4);
  FloatsToHalves(values, absl::MakeSpan(halves));
  FloatsToBfloat16s(values, absl::MakeSpan(bfloats));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(halves[i], FloatToHalf(values[i]));
    EXPECT_EQ(bfloats[i], FloatToBfloat16(values[i]));
  }
  HalvesToFloats(halves, absl::MakeSpan(back));
  EXPECT_NEAR(back[0], 0.1f, 0.1f * std::ldexp(1.0f, -11));  // Half's relative precision.
  Bfloat16sToFloats(bfloats, absl::MakeSpan(back));
  EXPECT_NEAR(back[2], 1000.0f, 1000.0f * std::ldexp(1.0f, -8));  // bfloat16's.
}

}  // namespace
}  // namespace ps
