#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "worker/data/dataset.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

SyntheticData Spec(SyntheticData::Kind kind, int64_t num_examples, int feature_dim,
                   int num_classes) {
  SyntheticData spec;
  spec.set_kind(kind);
  spec.set_num_examples(num_examples);
  spec.set_feature_dim(feature_dim);
  spec.set_num_classes(num_classes);
  return spec;
}

Dataset Make(const SyntheticData& spec, uint64_t seed) {
  absl::StatusOr<Dataset> data = MakeSyntheticDataset(spec, seed);
  EXPECT_TRUE(data.ok()) << data.status();
  return data.ok() ? *std::move(data) : Dataset();
}

class SyntheticKindTest : public ::testing::TestWithParam<SyntheticData::Kind> {};

TEST_P(SyntheticKindTest, DeterministicFromSpecAndSeed) {
  const SyntheticData spec = Spec(GetParam(), 300, 6, 4);
  const Dataset a = Make(spec, 11);
  const Dataset b = Make(spec, 11);
  const Dataset other = Make(spec, 12);
  EXPECT_EQ(a.num_examples, 300);
  EXPECT_EQ(a.feature_dim, 6);
  ASSERT_EQ(a.features.size(), 1800u);
  ASSERT_EQ(a.labels.size(), 300u);
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.features, other.features);
  EXPECT_NE(a.labels, other.labels);
  for (float x : a.features) EXPECT_TRUE(std::isfinite(x));
}

TEST_P(SyntheticKindTest, AnExampleDoesNotDependOnTheSetSize) {
  const Dataset small = Make(Spec(GetParam(), 10, 3, 3), 5);
  const Dataset large = Make(Spec(GetParam(), 20, 3, 3), 5);
  EXPECT_EQ(small.features,
            std::vector<float>(large.features.begin(), large.features.begin() + 30));
  EXPECT_EQ(small.labels, std::vector<float>(large.labels.begin(), large.labels.begin() + 10));
}

INSTANTIATE_TEST_SUITE_P(AllKinds, SyntheticKindTest,
                         ::testing::Values(SyntheticData::LINEAR, SyntheticData::GAUSSIAN_MIXTURE,
                                           SyntheticData::TEACHER_MLP));

TEST(SyntheticTest, LinearFeaturesAreStandardNormal) {
  const Dataset data = Make(Spec(SyntheticData::LINEAR, 4000, 5, 0), 1);
  EXPECT_EQ(data.num_classes, 0);
  double sum = 0;
  double sum_squares = 0;
  for (float x : data.features) {
    sum += x;
    sum_squares += x * x;
  }
  const double n = static_cast<double>(data.features.size());
  EXPECT_NEAR(sum / n, 0, 0.03);
  EXPECT_NEAR(sum_squares / n, 1, 0.05);
}

TEST(SyntheticTest, NoiselessLinearTargetsLieOnALine) {
  const Dataset data = Make(Spec(SyntheticData::LINEAR, 100, 1, 0), 3);
  int64_t far = 1;  // The example farthest from example 0, for an accurate slope.
  for (int64_t i = 1; i < data.num_examples; ++i) {
    if (std::fabs(data.features[i] - data.features[0]) >
        std::fabs(data.features[far] - data.features[0])) {
      far = i;
    }
  }
  const double slope =
      (data.labels[far] - data.labels[0]) / (data.features[far] - data.features[0]);
  for (int64_t i = 1; i < data.num_examples; ++i) {
    const double predicted = data.labels[0] + slope * (data.features[i] - data.features[0]);
    EXPECT_NEAR(data.labels[i], predicted, 1e-4 * (1 + std::fabs(predicted)));
  }
}

TEST(SyntheticTest, NoisyLinearTargetsLeaveTheLine) {
  SyntheticData spec = Spec(SyntheticData::LINEAR, 100, 1, 0);
  spec.set_noise(0.5f);
  const Dataset data = Make(spec, 3);
  const Dataset noiseless = Make(Spec(SyntheticData::LINEAR, 100, 1, 0), 3);
  EXPECT_EQ(data.features, noiseless.features);
  double squared_error = 0;
  for (int64_t i = 0; i < data.num_examples; ++i) {
    squared_error += std::pow(data.labels[i] - noiseless.labels[i], 2);
  }
  EXPECT_NEAR(std::sqrt(squared_error / 100), 0.5, 0.15);
}

TEST(SyntheticTest, GaussianMixtureIsSeparableByNearestMean) {
  constexpr int kClasses = 5;
  constexpr int kDim = 10;
  const Dataset data = Make(Spec(SyntheticData::GAUSSIAN_MIXTURE, 3000, kDim, kClasses), 8);
  ASSERT_EQ(data.num_classes, kClasses);
  std::vector<double> means(kClasses * kDim, 0);
  std::vector<int> counts(kClasses, 0);
  for (int64_t i = 0; i < data.num_examples; ++i) {
    const int label = static_cast<int>(data.labels[i]);
    ASSERT_EQ(static_cast<float>(label), data.labels[i]);
    ASSERT_GE(label, 0);
    ASSERT_LT(label, kClasses);
    ++counts[label];
    for (int j = 0; j < kDim; ++j) means[label * kDim + j] += data.features[i * kDim + j];
  }
  for (int c = 0; c < kClasses; ++c) {
    EXPECT_NEAR(counts[c], 3000 / kClasses, 100) << "class " << c;  // Uniform classes.
    for (int j = 0; j < kDim; ++j) means[c * kDim + j] /= counts[c];
  }
  int correct = 0;
  for (int64_t i = 0; i < data.num_examples; ++i) {
    int nearest = 0;
    double nearest_distance = std::numeric_limits<double>::infinity();
    for (int c = 0; c < kClasses; ++c) {
      double distance = 0;
      for (int j = 0; j < kDim; ++j) {
        distance += std::pow(data.features[i * kDim + j] - means[c * kDim + j], 2);
      }
      if (distance < nearest_distance) {
        nearest_distance = distance;
        nearest = c;
      }
    }
    if (nearest == static_cast<int>(data.labels[i])) ++correct;
  }
  EXPECT_GT(correct, 0.9 * 3000);
}

TEST(SyntheticTest, TeacherMlpLabelsAreClassIdsUsingSeveralClasses) {
  const Dataset data = Make(Spec(SyntheticData::TEACHER_MLP, 2000, 8, 4), 2);
  EXPECT_EQ(data.num_classes, 4);
  std::set<float> seen;
  for (float label : data.labels) {
    EXPECT_EQ(label, std::floor(label));
    EXPECT_GE(label, 0);
    EXPECT_LT(label, 4);
    seen.insert(label);
  }
  EXPECT_GE(seen.size(), 2u);
}

TEST(SyntheticTest, InvalidSpecsNameTheField) {
  struct Case {
    SyntheticData spec;
    const char* field;
  };
  SyntheticData negative_noise = Spec(SyntheticData::LINEAR, 10, 2, 0);
  negative_noise.set_noise(-1);
  const Case cases[] = {
      {Spec(SyntheticData::KIND_UNSPECIFIED, 10, 2, 2), "data.synthetic.kind"},
      {Spec(SyntheticData::LINEAR, 0, 2, 0), "data.synthetic.num_examples"},
      {Spec(SyntheticData::LINEAR, 10, 0, 0), "data.synthetic.feature_dim"},
      {Spec(SyntheticData::GAUSSIAN_MIXTURE, 10, 2, 1), "data.synthetic.num_classes"},
      {Spec(SyntheticData::TEACHER_MLP, 10, 2, 0), "data.synthetic.num_classes"},
      {Spec(SyntheticData::LINEAR, int64_t{1} << 40, 1 << 10, 0), "too large"},
      {negative_noise, "data.synthetic.noise"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Dataset> data = MakeSyntheticDataset(c.spec, 1);
    EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(data.status().message(), HasSubstr(c.field));
  }
}

}  // namespace
}  // namespace ps
