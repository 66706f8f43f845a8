#include "server/initializer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/testing/variable_defs.h"

namespace ps {
namespace {

using testing_variables::MakeVariable;

// Rows [row_begin, row_begin + row_count) of `variable`, as the partitioner would place them.
SlicePlacement MakeSlice(const VariableDef& variable, int64_t row_begin, int64_t row_count) {
  SlicePlacement slice;
  slice.variable = variable.name();
  slice.row_begin = row_begin;
  slice.row_count = row_count;
  slice.row_size = 1;
  for (int d = 1; d < variable.shape_size(); ++d) slice.row_size *= variable.shape(d);
  return slice;
}

std::vector<float> InitializeRows(const VariableDef& variable, uint64_t seed, int64_t row_begin,
                                  int64_t row_count) {
  const SlicePlacement slice = MakeSlice(variable, row_begin, row_count);
  std::vector<float> values(static_cast<size_t>(slice.num_elements()));
  InitializeSlice(variable, slice, seed, absl::MakeSpan(values));
  return values;
}

std::vector<float> InitializeWhole(const VariableDef& variable, uint64_t seed) {
  return InitializeRows(variable, seed, 0, variable.shape(0));
}

double Mean(const std::vector<float>& values) {
  double sum = 0;
  for (float x : values) sum += x;
  return sum / values.size();
}

double StandardDeviation(const std::vector<float>& values) {
  const double mean = Mean(values);
  double sum = 0;
  for (float x : values) sum += (x - mean) * (x - mean);
  return std::sqrt(sum / values.size());
}

const InitializerConfig::Kind kAllKinds[] = {
    InitializerConfig::ZEROS, InitializerConfig::CONSTANT, InitializerConfig::UNIFORM,
    InitializerConfig::NORMAL, InitializerConfig::GLOROT_UNIFORM};

TEST(InitializerTest, ValuesDoNotDependOnTheSlicing) {
  // Odd row sizes, so that Box-Muller's pairs straddle no row boundary unnoticed.
  const std::vector<std::vector<int64_t>> kShapes = {{10}, {10, 3}, {10, 3, 5}};
  for (InitializerConfig::Kind kind : kAllKinds) {
    for (const std::vector<int64_t>& shape : kShapes) {
      const VariableDef variable = MakeVariable("layer/w", shape, kind, 0.5f);
      const std::vector<float> whole = InitializeWhole(variable, 7);
      std::vector<float> sliced;
      for (const auto& [begin, count] : {std::pair<int64_t, int64_t>{0, 4}, {4, 3}, {7, 3}}) {
        const std::vector<float> part = InitializeRows(variable, 7, begin, count);
        sliced.insert(sliced.end(), part.begin(), part.end());
      }
      EXPECT_EQ(whole, sliced) << variable.ShortDebugString();
    }
  }
}

TEST(InitializerTest, RandomValuesDependOnSeedAndVariableName) {
  for (InitializerConfig::Kind kind :
       {InitializerConfig::UNIFORM, InitializerConfig::NORMAL, InitializerConfig::GLOROT_UNIFORM}) {
    const VariableDef w = MakeVariable("w", {8, 4}, kind, 1.0f);
    const VariableDef v = MakeVariable("v", {8, 4}, kind, 1.0f);
    const std::vector<float> base = InitializeWhole(w, 1);
    EXPECT_EQ(base, InitializeWhole(w, 1));
    const std::vector<float> other_seed = InitializeWhole(w, 2);
    const std::vector<float> other_name = InitializeWhole(v, 1);
    for (size_t i = 0; i < base.size(); ++i) {
      EXPECT_NE(base[i], other_seed[i]) << InitializerConfig::Kind_Name(kind) << " " << i;
      EXPECT_NE(base[i], other_name[i]) << InitializerConfig::Kind_Name(kind) << " " << i;
    }
    // Rows differ from each other too.
    EXPECT_FALSE(std::equal(base.begin(), base.begin() + 4, base.begin() + 4));
  }
}

TEST(InitializerTest, ZerosAndConstant) {
  EXPECT_EQ(InitializeWhole(MakeVariable("w", {3, 2}, InitializerConfig::ZEROS, 5.0f), 1),
            std::vector<float>(6, 0.0f));
  EXPECT_EQ(InitializeWhole(MakeVariable("w", {3, 2}, InitializerConfig::CONSTANT, -1.5f), 1),
            std::vector<float>(6, -1.5f));
}

// The generator is part of the format: a change to it changes every model's starting point,
// so it should be deliberate. UNIFORM takes no libm calls, so these are exact everywhere.
TEST(InitializerTest, UniformValuesArePinned) {
  const VariableDef variable = MakeVariable("w", {2, 2}, InitializerConfig::UNIFORM, 1.0f);
  EXPECT_EQ(InitializeWhole(variable, 42),
            std::vector<float>({0.69457227f, -0.0644805804f, 0.98419714f, 0.0379976518f}));
}

TEST(InitializerTest, UniformStaysWithinTheScaleAndFillsIt) {
  const float kScale = 0.5f;
  const VariableDef variable =
      MakeVariable("w", {1000, 100}, InitializerConfig::UNIFORM, kScale);
  const std::vector<float> values = InitializeWhole(variable, 3);
  const auto [min, max] = std::minmax_element(values.begin(), values.end());
  EXPECT_GE(*min, -kScale);
  EXPECT_LE(*max, kScale);
  EXPECT_LT(*min, -0.99 * kScale);
  EXPECT_GT(*max, 0.99 * kScale);
  EXPECT_NEAR(Mean(values), 0, 0.01);
  EXPECT_NEAR(StandardDeviation(values), kScale / std::sqrt(3.0), 0.01);
}

TEST(InitializerTest, NormalHasTheExpectedMeanAndStandardDeviation) {
  const float kScale = 2.0f;
  const VariableDef variable =
      MakeVariable("w", {1000, 101}, InitializerConfig::NORMAL, kScale);
  const std::vector<float> values = InitializeWhole(variable, 5);
  EXPECT_NEAR(Mean(values), 0, 0.05);
  EXPECT_NEAR(StandardDeviation(values), kScale, 0.04);
  const double within_one_sigma =
      std::count_if(values.begin(), values.end(), [&](float x) { return std::abs(x) < kScale; });
  EXPECT_NEAR(within_one_sigma / values.size(), 0.6827, 0.01);
}

TEST(InitializerTest, GlorotUniformUsesFanInAndFanOut) {
  struct Case {
    std::vector<int64_t> shape;
    double limit;
  };
  const Case kCases[] = {
      {{300, 20, 10}, std::sqrt(6.0 / (300 + 200))},
      {{400, 100}, std::sqrt(6.0 / (400 + 100))},
      {{5000}, std::sqrt(6.0 / (5000 + 5000))},  // A vector: fan_out = fan_in.
  };
  for (const Case& c : kCases) {
    // The scale is ignored.
    const VariableDef variable =
        MakeVariable("w", c.shape, InitializerConfig::GLOROT_UNIFORM, 100.0f);
    const std::vector<float> values = InitializeWhole(variable, 9);
    const auto [min, max] = std::minmax_element(values.begin(), values.end());
    EXPECT_GE(*min, -c.limit) << variable.ShortDebugString();
    EXPECT_LE(*max, c.limit) << variable.ShortDebugString();
    EXPECT_LT(*min, -0.99 * c.limit) << variable.ShortDebugString();
    EXPECT_GT(*max, 0.99 * c.limit) << variable.ShortDebugString();
  }
}

}  // namespace
}  // namespace ps
