#include "server/initializer.h"

#include <cmath>
#include <cstddef>

#include "absl/strings/string_view.h"
#include "common/random.h"

namespace ps {
namespace {

// 64-bit FNV-1a.
uint64_t HashName(absl::string_view name) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// Each row's generator, seeded from (seed, variable name, global row index).
SplitMix64 RowGenerator(uint64_t variable_key, int64_t row) {
  return SplitMix64(Mix64(variable_key ^ Mix64(static_cast<uint64_t>(row))));
}

// Fills each row of the slice from its own generator with `fill(generator, row_values)`.
template <typename FillRow>
void ForEachRow(const VariableDef& variable, const SlicePlacement& slice, uint64_t seed,
                absl::Span<float> values, FillRow fill) {
  const uint64_t variable_key = Mix64(seed) ^ HashName(variable.name());
  for (int64_t i = 0; i < slice.row_count; ++i) {
    SplitMix64 generator = RowGenerator(variable_key, slice.row_begin + i);
    fill(generator, values.subspan(static_cast<size_t>(i * slice.row_size),
                                   static_cast<size_t>(slice.row_size)));
  }
}

// U(-limit, limit).
void FillUniform(const VariableDef& variable, const SlicePlacement& slice, uint64_t seed,
                 double limit, absl::Span<float> values) {
  ForEachRow(variable, slice, seed, values, [limit](SplitMix64& generator,
                                                    absl::Span<float> row) {
    for (float& x : row) x = static_cast<float>(limit * (2 * generator.Uniform() - 1));
  });
}

// N(0, stddev^2) by the Box-Muller transform, two values per pair of uniforms.
void FillNormal(const VariableDef& variable, const SlicePlacement& slice, uint64_t seed,
                double stddev, absl::Span<float> values) {
  ForEachRow(variable, slice, seed, values, [stddev](SplitMix64& generator,
                                                     absl::Span<float> row) {
    constexpr double kTwoPi = 6.283185307179586476925286766559;
    for (size_t j = 0; j < row.size(); j += 2) {
      const double u1 = 1 - generator.Uniform();  // In (0, 1], so the log is finite.
      const double u2 = generator.Uniform();
      const double radius = stddev * std::sqrt(-2 * std::log(u1));
      row[j] = static_cast<float>(radius * std::cos(kTwoPi * u2));
      if (j + 1 < row.size()) row[j + 1] = static_cast<float>(radius * std::sin(kTwoPi * u2));
    }
  });
}

// REQUIRES: variable.shape_size() >= 1 (PlaceVariables checks it).
double GlorotLimit(const VariableDef& variable) {
  const double fan_in = static_cast<double>(variable.shape(0));
  double fan_out = fan_in;
  if (variable.shape_size() > 1) {
    fan_out = 1;
    for (int d = 1; d < variable.shape_size(); ++d) fan_out *= variable.shape(d);
  }
  return std::sqrt(6 / (fan_in + fan_out));
}

}  // namespace

void InitializeSlice(const VariableDef& variable, const SlicePlacement& slice, uint64_t seed,
                     absl::Span<float> values) {
  const InitializerConfig& initializer = variable.initializer();
  switch (initializer.kind()) {
    case InitializerConfig::CONSTANT:
      for (float& x : values) x = initializer.scale();
      return;
    case InitializerConfig::UNIFORM:
      FillUniform(variable, slice, seed, initializer.scale(), values);
      return;
    case InitializerConfig::NORMAL:
      FillNormal(variable, slice, seed, initializer.scale(), values);
      return;
    case InitializerConfig::GLOROT_UNIFORM:
      FillUniform(variable, slice, seed, GlorotLimit(variable), values);
      return;
    case InitializerConfig::ZEROS:
    default:
      for (float& x : values) x = 0;
      return;
  }
}

}  // namespace ps
