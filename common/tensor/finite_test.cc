#include "common/tensor/finite.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(AllFiniteTest, FindsEveryKindOfNonFiniteValueAtEveryPosition) {
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::signaling_NaN(),
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(), -std::nanf("")};
  // Sizes around the 64-value block, so that both the blocked loop and the tail are covered.
  for (size_t size : {1u, 63u, 64u, 65u, 200u}) {
    std::vector<float> values(size, 1.5f);
    EXPECT_TRUE(AllFinite(values)) << size;
    for (size_t at = 0; at < size; ++at) {
      for (float value : bad) {
        values[at] = value;
        EXPECT_FALSE(AllFinite(values)) << "size " << size << " at " << at << " " << value;
      }
      values[at] = 1.5f;
    }
  }
}

TEST(AllFiniteTest, ExtremeFiniteValuesAreFinite) {
  std::vector<float> values = {std::numeric_limits<float>::max(),
                               -std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::min(), 0.0f, -0.0f};
  EXPECT_TRUE(AllFinite(values));
  EXPECT_TRUE(AllFinite({}));
}

TEST(FirstNonFiniteTest, FindsTheFirstInfOrNaNPastTheVectorizedBlocks) {
  std::vector<float> values(200, 1.0f);
  EXPECT_EQ(FirstNonFinite(values), -1);
  EXPECT_EQ(FirstNonFinite({}), -1);
  values[150] = std::numeric_limits<float>::quiet_NaN();
  values[170] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FirstNonFinite(values), 150);
  values[3] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(FirstNonFinite(values), 3);
}

}  // namespace
}  // namespace ps
