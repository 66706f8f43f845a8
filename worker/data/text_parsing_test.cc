#include "worker/data/text_parsing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ps {
namespace data_internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(StoreLabelsTest, PlusMinusOneClassIdsAndTargets) {
  int64_t examples = 0;
  std::vector<float> stored;
  int classes = -1;
  ASSERT_TRUE(StoreLabels("f", {1, -1, 1}, &examples, &stored, &classes).ok());
  EXPECT_EQ(examples, 3);
  EXPECT_THAT(stored, ElementsAre(1, 0, 1));
  EXPECT_EQ(classes, 2);
  ASSERT_TRUE(StoreLabels("f", {0, 4, 2}, &examples, &stored, &classes).ok());
  EXPECT_THAT(stored, ElementsAre(0, 4, 2));
  EXPECT_EQ(classes, 5);
  ASSERT_TRUE(StoreLabels("f", {0.5, 70000}, &examples, &stored, &classes).ok());
  EXPECT_EQ(classes, 0);  // Regression targets: a fraction, and an integer past 65535.
  absl::Status none = StoreLabels("empty.csv", {}, &examples, &stored, &classes);
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(none.message(), "empty.csv: no examples");
}

TEST(CsvColumnsTest, TheFirstRowSetsTheCountTheOthersMustMatch) {
  CsvColumns columns("f.csv", 2);
  EXPECT_THAT(columns.Check(3, 2).message(), HasSubstr("f.csv:3: label_column 2"));
  CsvColumns one("f.csv", 0);
  EXPECT_THAT(one.Check(1, 1).message(), HasSubstr("f.csv:1: a row needs a label"));
  CsvColumns three("f.csv", 2);
  ASSERT_TRUE(three.Check(2, 3).ok());
  EXPECT_EQ(three.count(), 3u);
  EXPECT_TRUE(three.is_first_row(2));
  EXPECT_TRUE(three.Check(3, 3).ok());
  EXPECT_FALSE(three.is_first_row(3));
  EXPECT_THAT(three.Check(4, 4).message(),
              HasSubstr("f.csv:4: 4 columns, but the first row (line 2) has 3"));
}

TEST(ParseLibsvmFeatureTest, IndicesInRangeAndIncreasingValuesFinite) {
  int64_t previous = 0, index = 0;
  float value = 0;
  ASSERT_TRUE(ParseLibsvmFeature("f", 1, 2, "3:0.5", 10, &previous, &index, &value).ok());
  EXPECT_EQ(index, 3);
  EXPECT_EQ(value, 0.5f);
  EXPECT_EQ(previous, 3);
  EXPECT_THAT(ParseLibsvmFeature("f", 1, 3, "3:1", 10, &previous, &index, &value).message(),
              HasSubstr("indices must increase"));
  EXPECT_THAT(ParseLibsvmFeature("f", 1, 3, "11:1", 10, &previous, &index, &value).message(),
              HasSubstr("feature_dim is 10"));
  EXPECT_THAT(ParseLibsvmFeature("f", 1, 3, "4:inf", 10, &previous, &index, &value).message(),
              HasSubstr("not a finite float32"));
  EXPECT_THAT(ParseLibsvmFeature("f", 1, 3, "4", 10, &previous, &index, &value).message(),
              HasSubstr("token 3 (counting from 1) is not index:value"));
}

}  // namespace
}  // namespace data_internal
}  // namespace ps
