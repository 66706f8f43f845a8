#include "worker/data/dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/data/test_files.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// Example i has features (i, -i) and label i, so a batch tells which examples it holds.
Dataset Indexed(int64_t n) {
  Dataset data;
  data.num_examples = n;
  data.feature_dim = 2;
  for (int64_t i = 0; i < n; ++i) {
    data.features.push_back(static_cast<float>(i));
    data.features.push_back(static_cast<float>(-i));
    data.labels.push_back(static_cast<float>(i));
  }
  return data;
}

// Reads one epoch of `reader` in batches of `batch_size`; checks each batch against the data
// and the reader's shard_indices(), and returns the examples read, in order.
std::vector<int64_t> ReadEpoch(ShardReader& reader, int batch_size) {
  const int64_t epoch = reader.epochs_completed();
  const std::vector<int64_t> expected = reader.shard_indices();
  std::vector<int64_t> read;
  std::vector<float> features;
  std::vector<float> labels;
  while (reader.epochs_completed() == epoch) {
    const int size = reader.NextBatch(batch_size, &features, &labels);
    if (size == 0) break;
    EXPECT_LE(size, batch_size);
    EXPECT_EQ(labels.size(), static_cast<size_t>(size));
    EXPECT_EQ(features.size(), static_cast<size_t>(2 * size));
    for (int b = 0; b < size; ++b) {
      EXPECT_EQ(features[2 * b], labels[b]);
      EXPECT_EQ(features[2 * b + 1], -labels[b]);
      read.push_back(static_cast<int64_t>(labels[b]));
    }
  }
  EXPECT_EQ(read, expected);
  return read;
}

TEST(ShardReaderTest, AReaderOfIndicesReadsTheSameExamples) {
  const Dataset data = Indexed(23);
  ShardReader dense(&data, 1, 3, /*seed=*/5, /*shuffle=*/true);
  ShardReader indices(data.num_examples, 1, 3, /*seed=*/5, /*shuffle=*/true);
  dense.SkipBatches(2, 3);
  indices.SkipBatches(2, 3);
  std::vector<float> features, labels;
  std::vector<int64_t> examples;
  for (int batch = 0; batch < 12; ++batch) {  // Over several epochs.
    const int size = dense.NextBatch(3, &features, &labels);
    ASSERT_EQ(indices.NextExamples(3, &examples), size);
    ASSERT_EQ(examples.size(), static_cast<size_t>(size));
    for (int b = 0; b < size; ++b) EXPECT_EQ(static_cast<float>(examples[b]), labels[b]);
    EXPECT_EQ(indices.epochs_completed(), dense.epochs_completed());
  }
}

TEST(ShardReaderTest, ShardsCoverEveryExampleOncePerEpoch) {
  constexpr int64_t kExamples = 23;  // Divisible by none of 2, 3, 4.
  const Dataset data = Indexed(kExamples);
  for (bool shuffle : {false, true}) {
    for (int num_workers = 1; num_workers <= 4; ++num_workers) {
      SCOPED_TRACE(absl::StrCat("shuffle ", shuffle, ", ", num_workers, " workers"));
      std::vector<ShardReader> readers;
      for (int k = 0; k < num_workers; ++k) readers.emplace_back(&data, k, num_workers, 7, shuffle);
      for (int epoch = 0; epoch < 4; ++epoch) {
        std::vector<int> times_read(kExamples, 0);
        for (int k = 0; k < num_workers; ++k) {
          const std::vector<int64_t> shard = ReadEpoch(readers[k], 4);
          // Positions k, k + N, ...: the shard sizes differ by at most one.
          EXPECT_EQ(static_cast<int64_t>(shard.size()),
                    (kExamples - k + num_workers - 1) / num_workers);
          for (int64_t example : shard) ++times_read[example];
          EXPECT_EQ(readers[k].epochs_completed(), epoch + 1);
        }
        EXPECT_THAT(times_read, ::testing::Each(1)) << "epoch " << epoch;
      }
    }
  }
}

TEST(ShardReaderTest, WithoutShufflingWorkersReadStridedFileOrder) {
  const Dataset data = Indexed(10);
  ShardReader reader(&data, 1, 3, 42, /*shuffle=*/false);
  for (int epoch = 0; epoch < 3; ++epoch) {
    EXPECT_EQ(ReadEpoch(reader, 2), (std::vector<int64_t>{1, 4, 7}));
  }
}

TEST(ShardReaderTest, ShufflingChangesTheOrderEachEpochAndFollowsTheSeed) {
  const Dataset data = Indexed(50);
  ShardReader reader(&data, 0, 1, 42, /*shuffle=*/true);
  ShardReader same_seed(&data, 0, 1, 42, /*shuffle=*/true);
  ShardReader other_seed(&data, 0, 1, 43, /*shuffle=*/true);
  std::vector<int64_t> identity(50);
  std::iota(identity.begin(), identity.end(), 0);
  std::vector<std::vector<int64_t>> orders;
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> order = ReadEpoch(reader, 8);
    EXPECT_NE(order, identity);
    EXPECT_EQ(ReadEpoch(same_seed, 5), order);
    EXPECT_NE(ReadEpoch(other_seed, 8), order);
    for (const std::vector<int64_t>& earlier : orders) EXPECT_NE(order, earlier);
    orders.push_back(std::move(order));
  }
}

TEST(ShardReaderTest, BatchesEndWithASmallerOneThenMoveToTheNextEpoch) {
  const Dataset data = Indexed(11);
  ShardReader reader(&data, 0, 2, 1, /*shuffle=*/false);  // Examples 0, 2, ..., 10: six.
  std::vector<float> features;
  std::vector<float> labels;
  EXPECT_EQ(reader.NextBatch(4, &features, &labels), 4);
  EXPECT_EQ(labels, (std::vector<float>{0, 2, 4, 6}));
  EXPECT_EQ(reader.epochs_completed(), 0);
  EXPECT_EQ(reader.NextBatch(4, &features, &labels), 2);
  EXPECT_EQ(labels, (std::vector<float>{8, 10}));
  EXPECT_EQ(features, (std::vector<float>{8, -8, 10, -10}));
  EXPECT_EQ(reader.epochs_completed(), 1);
  EXPECT_EQ(reader.NextBatch(4, &features, &labels), 4);
  EXPECT_EQ(labels, (std::vector<float>{0, 2, 4, 6}));
  EXPECT_EQ(reader.NextBatch(100, &features, &labels), 2);
  EXPECT_EQ(reader.epochs_completed(), 2);
}

TEST(ShardReaderTest, SkippingBatchesLandsWhereReadingThemWould) {
  const Dataset data = Indexed(47);
  for (int64_t skip : {0, 1, 3, 4, 5, 11, 17}) {  // 24 examples in batches of 5: 5 a epoch.
    ShardReader read(&data, 1, 2, 9, /*shuffle=*/true);
    ShardReader skipped(&data, 1, 2, 9, /*shuffle=*/true);
    std::vector<float> features, labels, skipped_features, skipped_labels;
    for (int64_t i = 0; i < skip; ++i) read.NextBatch(5, &features, &labels);
    skipped.SkipBatches(skip, 5);
    EXPECT_EQ(skipped.epochs_completed(), read.epochs_completed()) << skip;
    for (int i = 0; i < 7; ++i) {
      read.NextBatch(5, &features, &labels);
      skipped.NextBatch(5, &skipped_features, &skipped_labels);
      EXPECT_EQ(skipped_labels, labels) << skip << " " << i;
    }
  }
}

TEST(ShardReaderTest, EmptyShardReturnsNothing) {
  const Dataset data = Indexed(2);
  ShardReader reader(&data, 2, 3, 1, /*shuffle=*/true);
  std::vector<float> features = {1};
  std::vector<float> labels = {1};
  EXPECT_TRUE(reader.shard_indices().empty());
  EXPECT_EQ(reader.NextBatch(4, &features, &labels), 0);
  EXPECT_TRUE(features.empty());
  EXPECT_TRUE(labels.empty());
}

TEST(SplitTrainTestTest, TheLastExamplesFormTheTestSet) {
  TrainTestSplit split = SplitTrainTest(Indexed(100), 0.1);
  EXPECT_EQ(split.train.num_examples, 90);
  EXPECT_EQ(split.test.num_examples, 10);
  EXPECT_EQ(split.train.labels.size(), 90u);
  EXPECT_EQ(split.train.features.size(), 180u);
  EXPECT_EQ(split.test.labels.size(), 10u);
  EXPECT_EQ(split.test.features.size(), 20u);
  EXPECT_EQ(split.train.labels.back(), 89);
  EXPECT_EQ(split.test.labels.front(), 90);
  EXPECT_EQ(split.test.features.front(), 90);
  EXPECT_EQ(split.test.feature_dim, 2);
}

TEST(SplitTrainTestTest, Sizes) {
  struct Case {
    int64_t n;
    double fraction;
    int64_t test_size;
  };
  for (const Case& c : {Case{100, 0.0, 0}, Case{100, 0.25, 25}, Case{100, 0.001, 1},
                        Case{7, 0.5, 4}, Case{2, 0.9, 1}, Case{1, 0.5, 0}, Case{1, 0.0, 0}}) {
    SCOPED_TRACE(absl::StrCat("n ", c.n, ", fraction ", c.fraction));
    TrainTestSplit split = SplitTrainTest(Indexed(c.n), c.fraction);
    EXPECT_EQ(split.test.num_examples, c.test_size);
    EXPECT_EQ(split.train.num_examples, c.n - c.test_size);
    EXPECT_EQ(split.test.labels.size(), static_cast<size_t>(c.test_size));
    EXPECT_EQ(split.train.features.size(), static_cast<size_t>(2 * (c.n - c.test_size)));
  }
}

TEST(LoadDatasetTest, GeneratesSyntheticData) {
  DataSpec spec;
  spec.mutable_synthetic()->set_kind(SyntheticData::GAUSSIAN_MIXTURE);
  spec.mutable_synthetic()->set_num_examples(30);
  spec.mutable_synthetic()->set_feature_dim(4);
  spec.mutable_synthetic()->set_num_classes(3);
  absl::StatusOr<Dataset> loaded = LoadDataset(spec, 5);
  absl::StatusOr<Dataset> made = MakeSyntheticDataset(spec.synthetic(), 5);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(loaded->features, made->features);
  EXPECT_EQ(loaded->labels, made->labels);
  EXPECT_EQ(loaded->num_classes, 3);
}

TEST(DataSeedTest, TheDataSeedKeepsTheDataWhileTheJobSeedChanges) {
  JobSpec spec;
  spec.mutable_data()->mutable_synthetic()->set_kind(SyntheticData::GAUSSIAN_MIXTURE);
  spec.mutable_data()->mutable_synthetic()->set_num_examples(40);
  spec.mutable_data()->mutable_synthetic()->set_feature_dim(3);
  spec.mutable_data()->mutable_synthetic()->set_num_classes(2);
  auto features = [](const JobSpec& job) {
    absl::StatusOr<DataSplits> splits = LoadSplits(job.data(), DataSeed(job));
    EXPECT_TRUE(splits.ok()) << splits.status();
    return splits.ok() ? splits->train.features : std::vector<float>();
  };
  spec.set_seed(1);
  const std::vector<float> first = features(spec);
  spec.set_seed(2);
  EXPECT_NE(features(spec), first);  // Unset, the data follows the job's seed.
  spec.mutable_data()->set_seed(7);
  const std::vector<float> fixed = features(spec);
  spec.set_seed(3);
  EXPECT_EQ(features(spec), fixed);
  EXPECT_EQ(DataSeed(spec), 7u);
}

TEST(LoadSplitsTest, NormalizeScalesEachFeatureByTheTrainingExamplesAlone) {
  DataSpec spec;
  spec.mutable_synthetic()->set_kind(SyntheticData::LINEAR);
  spec.mutable_synthetic()->set_num_examples(200);
  spec.mutable_synthetic()->set_feature_dim(3);
  spec.set_validation_fraction(0.25f);
  spec.set_normalize(true);
  absl::StatusOr<Dataset> raw = LoadDataset(spec, 5);
  absl::StatusOr<DataSplits> splits = LoadSplits(spec, 5);
  ASSERT_TRUE(raw.ok()) << raw.status();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->test.num_examples, 20);        // The default 0.1.
  EXPECT_EQ(splits->validation.num_examples, 45);  // 0.25 of the other 180.
  EXPECT_EQ(splits->train.num_examples, 135);
  ASSERT_EQ(splits->scaling.kind, FeatureScaling::Kind::kMinMax);
  for (int j = 0; j < 3; ++j) {
    // The statistics are the raw training rows' (the first 135), not the whole file's.
    float low = raw->features[j], high = raw->features[j];
    for (int64_t i = 0; i < 135; ++i) {
      low = std::min(low, raw->features[i * 3 + j]);
      high = std::max(high, raw->features[i * 3 + j]);
    }
    EXPECT_EQ(splits->scaling.low[j], low) << "feature " << j;
    EXPECT_EQ(splits->scaling.high[j], high) << "feature " << j;
    float train_low = 1, train_high = 0;
    for (int64_t i = 0; i < 135; ++i) {
      train_low = std::min(train_low, splits->train.features[i * 3 + j]);
      train_high = std::max(train_high, splits->train.features[i * 3 + j]);
    }
    EXPECT_EQ(train_low, 0) << "feature " << j;
    EXPECT_EQ(train_high, 1) << "feature " << j;
    // Held-out rows are scaled alike: the first test row's value from its raw one.
    const float raw_test = raw->features[180 * 3 + j];
    EXPECT_FLOAT_EQ(splits->test.features[j], (raw_test - low) / (high - low)) << "feature " << j;
  }
}

TEST(LoadSplitsTest, NormalizeMapsAConstantFeatureToZero) {
  DataSpec spec;
  spec.set_csv(testing_files::WriteTestFile("constant_feature.csv", "1,5,2\n0,5,4\n1,5,3\n"));
  spec.set_test_fraction(0);
  spec.set_normalize(true);
  absl::StatusOr<DataSplits> data = LoadSplits(spec, 0);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->test.num_examples, 0);
  EXPECT_EQ(data->train.features, (std::vector<float>{0, 0, 0, 1, 0, 0.5f}));
  EXPECT_EQ(data->train.labels, (std::vector<float>{1, 0, 1}));
}

TEST(LoadSplitsTest, TestFractionZeroHoldsOutNothing) {
  DataSpec spec;
  spec.mutable_synthetic()->set_kind(SyntheticData::LINEAR);
  spec.mutable_synthetic()->set_num_examples(50);
  spec.mutable_synthetic()->set_feature_dim(2);
  spec.set_test_fraction(0);
  absl::StatusOr<DataSplits> splits = LoadSplits(spec, 1);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train.num_examples, 50);
  EXPECT_EQ(splits->test.num_examples, 0);
  EXPECT_EQ(splits->validation.num_examples, 0);
  spec.clear_test_fraction();  // Unset: the default 0.1.
  splits = LoadSplits(spec, 1);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->test.num_examples, 5);
}

TEST(LoadSplitsTest, ATestFileIsTheWholeTestSetAndTheSourceAllTraining) {
  DataSpec spec;
  spec.set_csv(testing_files::WriteTestFile("train.csv", "0,1,2\n1,3,4\n0,5,6\n1,7,8\n"));
  spec.set_test_data(testing_files::WriteTestFile("test.csv", "2,10,20\n0,30,40\n"));
  spec.set_normalize(true);
  absl::StatusOr<DataSplits> splits = LoadSplits(spec, 0);
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train.num_examples, 4);
  EXPECT_EQ(splits->test.num_examples, 2);
  EXPECT_EQ(splits->test.labels, (std::vector<float>{2, 0}));
  // Three classes in all, though training has two; test rows scaled by training's 1..7, 2..8.
  EXPECT_EQ(splits->train.num_classes, 3);
  EXPECT_EQ(splits->test.num_classes, 3);
  EXPECT_EQ(splits->test.features, (std::vector<float>{1.5f, 3, 29.0f / 6, 38.0f / 6}));

  spec.set_test_data(testing_files::WriteTestFile("narrow.csv", "1,2\n"));
  absl::StatusOr<DataSplits> narrow = LoadSplits(spec, 0);
  EXPECT_EQ(narrow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(narrow.status().message(), HasSubstr("has 1 features but the training data has 2"));
}

TEST(LoadDatasetTest, RejectsAMissingSourceOrPath) {
  absl::StatusOr<Dataset> none = LoadDataset(DataSpec(), 0);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("data has no source"));

  DataSpec no_labels;
  no_labels.set_mnist_images("images.idx");
  EXPECT_THAT(LoadDataset(no_labels, 0).status().message(), HasSubstr("data.mnist_labels"));

  DataSpec empty_path;
  empty_path.set_libsvm("");
  EXPECT_THAT(LoadDataset(empty_path, 0).status().message(), HasSubstr("data.libsvm is empty"));
}

}  // namespace
}  // namespace ps
