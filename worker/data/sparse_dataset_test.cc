#include "worker/data/sparse_dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "worker/data/test_files.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_files::WriteGzipTestFile;
using testing_files::WriteTestFile;

TEST(FeatureKeyTest, IsStableWithinFortyBitsAndSpreadsIds) {
  EXPECT_EQ(FeatureKey(1), FeatureKey(1));
  std::set<uint64_t> keys;
  for (int64_t id = 1; id <= 10000; ++id) {
    const uint64_t key = FeatureKey(id);
    EXPECT_LT(key, uint64_t{1} << kFeatureKeyBits);
    keys.insert(key);
  }
  EXPECT_EQ(keys.size(), 10000u);  // No collisions among small ids.
  // The value every machine computes: the key is part of the model's identity.
  EXPECT_EQ(FeatureKey(1), FeatureKey(1) & ((uint64_t{1} << 40) - 1));
  EXPECT_NE(CategoryKey(1, "red"), CategoryKey(2, "red"));
  EXPECT_NE(CategoryKey(1, "red"), CategoryKey(1, "blue"));
  EXPECT_NE(FeatureKey(5), CategoryKey(0, "5"));
}

TEST(ReadSparseLibsvmTest, KeepsRowsSparseWithHashedIds) {
  // Ids far beyond what a dense row could hold.
  const std::string path =
      WriteTestFile("sparse.libsvm", "+1 3:0.5 1000000000000:2 # comment\n\n-1\n+1 7:-1.5\n");
  absl::StatusOr<SparseDataset> data = ReadSparseLibsvm(path, 0);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_examples, 3);
  EXPECT_EQ(data->num_classes, 2);
  EXPECT_THAT(data->offsets, ElementsAre(0, 2, 2, 3));
  EXPECT_THAT(data->keys, ElementsAre(FeatureKey(3), FeatureKey(1000000000000), FeatureKey(7)));
  EXPECT_THAT(data->values, ElementsAre(0.5f, 2.0f, -1.5f));
  EXPECT_THAT(data->labels, ElementsAre(1.0f, 0.0f, 1.0f));

  const std::string gz = WriteGzipTestFile("sparse.libsvm.gz", "1 2:1\n0 4:1\n");
  absl::StatusOr<SparseDataset> gzipped = ReadSparseLibsvm(gz, 0);
  ASSERT_TRUE(gzipped.ok()) << gzipped.status();
  EXPECT_THAT(gzipped->keys, ElementsAre(FeatureKey(2), FeatureKey(4)));
}

TEST(ReadSparseLibsvmTest, RefusesBadRowsNamingTheLine) {
  const std::string path = WriteTestFile("bad.libsvm", "+1 3:1\n+1 5:1 4:1\n");
  absl::StatusOr<SparseDataset> data = ReadSparseLibsvm(path, 0);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(data.status().message(), HasSubstr("bad.libsvm:2: feature index 4 after 5"));

  const std::string bounded = WriteTestFile("bounded.libsvm", "+1 3:1\n+1 12:1\n");
  data = ReadSparseLibsvm(bounded, 10);
  EXPECT_THAT(data.status().message(), HasSubstr(":2: token 2"));
  EXPECT_THAT(data.status().message(), HasSubstr("feature_dim is 10"));

  const std::string nan = WriteTestFile("nan.libsvm", "+1 3:nan\n");
  EXPECT_THAT(ReadSparseLibsvm(nan, 0).status().message(), HasSubstr("not a finite float32"));

  const std::string many = WriteTestFile("many.libsvm", "+1 1:1 2:1\n+1 1:1 2:1\n");
  EXPECT_EQ(ReadSparseLibsvm(many, 0, /*max_features=*/3).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReadSparseLibsvm(::testing::TempDir() + "missing.libsvm", 0).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ReadCsvCategoriesTest, EachColumnsTextIsACategory) {
  const std::string path = WriteTestFile("cats.csv",
                                         "color,label,size\n"
                                         "red,1,small\n"
                                         "blue , 0,\n"
                                         "red,2,large\n");
  absl::StatusOr<SparseDataset> data = ReadCsvCategories(path, 1, /*has_header=*/true);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_examples, 3);
  EXPECT_EQ(data->num_classes, 3);
  EXPECT_THAT(data->offsets, ElementsAre(0, 2, 3, 5));  // The empty size is missing.
  EXPECT_THAT(data->keys,
              ElementsAre(CategoryKey(0, "red"), CategoryKey(2, "small"), CategoryKey(0, "blue"),
                          CategoryKey(0, "red"), CategoryKey(2, "large")));
  EXPECT_THAT(data->values, ElementsAre(1, 1, 1, 1, 1));
  EXPECT_THAT(data->labels, ElementsAre(1, 0, 2));

  const std::string ragged = WriteTestFile("ragged.csv", "a,1\nb,0,c\n");
  EXPECT_THAT(ReadCsvCategories(ragged, 1, false).status().message(),
              HasSubstr("ragged.csv:2: 3 columns, but the first row (line 1) has 2"));
  const std::string header = WriteTestFile("header.csv", "color,label\nred,1\n");
  EXPECT_THAT(ReadCsvCategories(header, 1, false).status().message(),
              HasSubstr("set data.csv_header"));
}

TEST(LoadSparseSplitsTest, SplitsAsTheDenseRules) {
  std::string text;
  for (int i = 0; i < 20; ++i) text += absl::StrCat(i % 2 == 0 ? "+1" : "-1", " ", i + 1, ":1\n");
  DataSpec spec;
  spec.set_libsvm(WriteTestFile("splits.libsvm", text));
  spec.set_test_fraction(0.25f);
  spec.set_validation_fraction(0.2f);
  absl::StatusOr<SparseSplits> splits = LoadSparseSplits(spec);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->test.num_examples, 5);
  EXPECT_EQ(splits->validation.num_examples, 3);
  EXPECT_EQ(splits->train.num_examples, 12);
  // The test set is the file's last rows, the validation set the rows before them.
  EXPECT_THAT(splits->test.keys, ElementsAre(FeatureKey(16), FeatureKey(17), FeatureKey(18),
                                             FeatureKey(19), FeatureKey(20)));
  EXPECT_THAT(splits->test.offsets, ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(splits->validation.keys, ElementsAre(FeatureKey(13), FeatureKey(14), FeatureKey(15)));
  EXPECT_EQ(splits->train.keys.size(), 12u);
  EXPECT_EQ(splits->train.num_classes, 2);

  DataSpec synthetic;
  synthetic.mutable_synthetic()->set_num_examples(10);
  EXPECT_THAT(LoadSparseSplits(synthetic).status().message(), HasSubstr("dense model kind"));
}

TEST(GatherSparseBatchTest, NumbersDistinctKeysInFirstSeenOrder) {
  SparseDataset data;
  data.num_examples = 3;
  data.num_classes = 2;
  data.offsets = {0, 2, 3, 5};
  data.keys = {10, 20, 30, 20, 10};
  data.values = {1, 2, 3, 4, 5};
  data.labels = {0, 1, 0};
  SparseBatch batch;
  const std::vector<int64_t> examples = {2, 0};
  GatherSparseBatch(data, examples, &batch);
  EXPECT_EQ(batch.size, 2);
  EXPECT_THAT(batch.keys, ElementsAre(20, 10));
  EXPECT_THAT(batch.offsets, ElementsAre(0, 2, 4));
  EXPECT_THAT(batch.slots, ElementsAre(0, 1, 1, 0));
  EXPECT_THAT(batch.values, ElementsAre(4, 5, 1, 2));
  EXPECT_THAT(batch.labels, ElementsAre(0, 0));
}

}  // namespace
}  // namespace ps
