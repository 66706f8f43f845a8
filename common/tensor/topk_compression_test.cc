#include "common/tensor/topk_compression.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/tensor/float16.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::Pointwise;
using ::testing::HasSubstr;

std::vector<float> Expand(const TopKCompressor::Compressed& compressed, size_t size) {
  std::vector<float> dense(size, -1.0f);
  EXPECT_TRUE(CheckTopKGaps(compressed.index_gaps, static_cast<int64_t>(size)).ok());
  ExpandTopK(compressed.index_gaps, compressed.values, absl::MakeSpan(dense));
  return dense;
}

TEST(TopKCompressorTest, SendsTheLargestMagnitudesAndKeepsTheRest) {
  TopKCompressor compressor(6, 0.5f, FLOAT32);
  EXPECT_EQ(compressor.k(), 3);
  const std::vector<float> first = {0.1f, -5.0f, 0.2f, 3.0f, -0.3f, 4.0f};
  absl::StatusOr<TopKCompressor::Compressed> sent = compressor.Compress({first});
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_THAT(sent->index_gaps, ElementsAre(1, 2, 2));  // Positions 1, 3, 5.
  EXPECT_THAT(sent->values, ElementsAre(-5.0f, 3.0f, 4.0f));
  EXPECT_THAT(compressor.residual(), ElementsAre(0.1f, 0.0f, 0.2f, 0.0f, -0.3f, 0.0f));

  // The residual joins the next gradient: position 0 grows to 2.1 and is sent.
  sent = compressor.Compress({std::vector<float>{2.0f, 0.0f, 0.0f, 1.0f, -1.0f, 0.5f}});
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_THAT(Expand(*sent, 6),
              Pointwise(FloatNear(1e-6f), std::vector<float>{2.1f, 0, 0, 1.0f, -1.3f, 0}));
  EXPECT_THAT(compressor.residual(), ElementsAre(0.0f, 0.0f, 0.2f, 0.0f, 0.0f, 0.5f));
}

TEST(TopKCompressorTest, TiesGoToTheLowerPositionsAndKIsAtLeastOne) {
  TopKCompressor compressor(5, 0.01f, FLOAT32);
  EXPECT_EQ(compressor.k(), 1);
  absl::StatusOr<TopKCompressor::Compressed> sent =
      compressor.Compress({std::vector<float>{1.0f, -2.0f, 2.0f, 0.0f, -2.0f}});
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_THAT(sent->index_gaps, ElementsAre(1));
  EXPECT_THAT(sent->values, ElementsAre(-2.0f));
}

// Error feedback: after every push, what was sent plus the residual equals every gradient given,
// whatever the encoding rounds away (it stays in the residual).
TEST(TopKCompressorTest, SentPlusResidualEqualsTheSumOfTheGradients) {
  constexpr size_t kSize = 1000;
  for (TensorEncoding encoding : {FLOAT32, FLOAT16, BFLOAT16}) {
    TopKCompressor compressor(kSize, 0.02f, encoding);
    EXPECT_EQ(compressor.k(), 20);
    std::mt19937 random(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<double> gradients(kSize, 0.0), sent(kSize, 0.0);
    for (int push = 0; push < 200; ++push) {
      // Two pieces, as a shard's slices come.
      std::vector<float> a(300), b(kSize - 300);
      for (float& value : a) value = normal(random);
      for (float& value : b) value = 0.05f + 0.001f * normal(random);  // Drifts.
      absl::StatusOr<TopKCompressor::Compressed> out = compressor.Compress({a, b});
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->values.size(), 20u);
      const std::vector<float> dense = Expand(*out, kSize);
      for (size_t i = 0; i < kSize; ++i) {
        gradients[i] += i < 300 ? a[i] : b[i - 300];
        sent[i] += dense[i];
      }
      for (float value : out->values) {
        ASSERT_EQ(value, RoundTo(value, encoding)) << "values are what the wire carries";
      }
    }
    double worst = 0.0;
    for (size_t i = 0; i < kSize; ++i) {
      worst = std::max(worst, std::fabs(sent[i] + compressor.residual()[i] - gradients[i]));
    }
    EXPECT_LT(worst, 1e-3) << TensorEncoding_Name(encoding);
    // The small values were sent too, late, once their residual had grown.
    double small_sent = 0.0;
    for (size_t i = 300; i < kSize; ++i) small_sent += std::fabs(sent[i]);
    EXPECT_GT(small_sent, 0.0);
  }
}

TEST(TopKCompressorTest, RefusesABadGradientAndKeepsTheResidual) {
  TopKCompressor compressor(4, 0.25f, FLOAT16);
  ASSERT_TRUE(compressor.Compress({std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}}).ok());
  const std::vector<float> residual(compressor.residual().begin(), compressor.residual().end());

  absl::StatusOr<TopKCompressor::Compressed> out =
      compressor.Compress({std::vector<float>{1.0f, std::nanf(""), 0.0f, 0.0f}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("NaN"));
  out = compressor.Compress({std::vector<float>{1.0f, 2.0f}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("a gradient of 2 floats"));
  out = compressor.Compress({std::vector<float>{1e5f, 0.0f, 0.0f, 0.0f}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("use BFLOAT16"));
  EXPECT_THAT(compressor.residual(), testing::ElementsAreArray(residual));
}

TEST(TopKGapsTest, ChecksPositionsAndExpandsWithZeros) {
  EXPECT_TRUE(CheckTopKGaps({}, 0).ok());
  EXPECT_TRUE(CheckTopKGaps({0, 1, 3}, 5).ok());
  absl::Status repeated = CheckTopKGaps({2, 0}, 5);
  EXPECT_EQ(repeated.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(repeated.message(), HasSubstr("gap of 0"));
  absl::Status beyond = CheckTopKGaps({2, 3}, 5);
  EXPECT_EQ(beyond.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(beyond.message(), HasSubstr("is 5, beyond the shard's dense gradient of 5"));
  absl::Status huge = CheckTopKGaps({4, std::numeric_limits<uint32_t>::max()}, 5);
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);

  std::vector<float> dense(5, 9.0f);
  ExpandTopK(std::vector<uint32_t>{0, 1, 3}, std::vector<float>{1.0f, 2.0f, 3.0f},
             absl::MakeSpan(dense));
  EXPECT_THAT(dense, ElementsAre(1.0f, 2.0f, 0.0f, 0.0f, 3.0f));
}

}  // namespace
}  // namespace ps
