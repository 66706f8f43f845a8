#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "worker/data/dataset.h"
#include "worker/data/test_files.h"

namespace ps {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_files::ReadTestFile;
using testing_files::WriteGzipTestFile;
using testing_files::WriteTestFile;

void AppendBigEndian32(uint32_t value, std::string* bytes) {
  for (int shift = 24; shift >= 0; shift -= 8) bytes->push_back(static_cast<char>(value >> shift));
}

std::string IdxImages(uint32_t count, uint32_t rows, uint32_t cols, uint32_t magic = 2051) {
  std::string bytes;
  AppendBigEndian32(magic, &bytes);
  AppendBigEndian32(count, &bytes);
  AppendBigEndian32(rows, &bytes);
  AppendBigEndian32(cols, &bytes);
  for (uint32_t i = 0; i < count * rows * cols; ++i) bytes.push_back(static_cast<char>(i * 7));
  return bytes;
}

std::string IdxLabels(const std::vector<uint8_t>& labels) {
  std::string bytes;
  AppendBigEndian32(2049, &bytes);
  AppendBigEndian32(static_cast<uint32_t>(labels.size()), &bytes);
  bytes.append(labels.begin(), labels.end());
  return bytes;
}

// Three 2 x 3 images with pixels 0, 7, 14, ... (mod 256), labels 3, 0, 9.
void ExpectTheSmallSet(const absl::StatusOr<Dataset>& data) {
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_examples, 3);
  EXPECT_EQ(data->feature_dim, 6);
  EXPECT_EQ(data->num_classes, 10);
  EXPECT_EQ(data->labels, (std::vector<float>{3, 0, 9}));
  ASSERT_EQ(data->features.size(), 18u);
  for (int i = 0; i < 18; ++i) EXPECT_EQ(data->features[i], (i * 7) % 256);
}

TEST(ReadMnistTest, ReadsPlainFiles) {
  ExpectTheSmallSet(ReadMnist(WriteTestFile("plain-images.idx", IdxImages(3, 2, 3)),
                              WriteTestFile("plain-labels.idx", IdxLabels({3, 0, 9}))));
}

TEST(ReadMnistTest, ReadsGzipFiles) {
  ExpectTheSmallSet(ReadMnist(WriteGzipTestFile("images.idx.gz", IdxImages(3, 2, 3)),
                              WriteGzipTestFile("labels.idx.gz", IdxLabels({3, 0, 9}))));
}

TEST(ReadMnistTest, LoadSplitsNormalizesByDividingBy255) {
  DataSpec spec;
  spec.set_mnist_images(WriteTestFile("norm-images.idx", IdxImages(40, 2, 2)));
  spec.set_mnist_labels(WriteTestFile("norm-labels.idx", IdxLabels(std::vector<uint8_t>(40, 1))));
  spec.set_test_fraction(0);
  spec.set_normalize(true);
  absl::StatusOr<DataSplits> data = LoadSplits(spec, 0);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->scaling.kind, FeatureScaling::Kind::kDivideBy255);
  for (int i = 0; i < 160; ++i) {
    EXPECT_FLOAT_EQ(data->train.features[i], ((i * 7) % 256) / 255.0f);
  }
}

TEST(ReadMnistTest, ATestPairOfIdxFilesIsTheTestSet) {
  DataSpec spec;
  spec.set_mnist_images(WriteTestFile("train-images.idx", IdxImages(10, 2, 2)));
  spec.set_mnist_labels(WriteTestFile("train-labels.idx", IdxLabels(std::vector<uint8_t>(10, 1))));
  spec.set_test_data(WriteTestFile("t10k-images.idx", IdxImages(3, 2, 2)));
  spec.set_test_labels(WriteTestFile("t10k-labels.idx", IdxLabels({7, 0, 2})));
  absl::StatusOr<DataSplits> data = LoadSplits(spec, 0);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train.num_examples, 10);
  EXPECT_EQ(data->test.num_examples, 3);
  EXPECT_EQ(data->test.labels, (std::vector<float>{7, 0, 2}));
  EXPECT_EQ(data->train.num_classes, 8);
}

TEST(ReadMnistTest, MissingFileIsNotFound) {
  const std::string labels = WriteTestFile("missing-labels.idx", IdxLabels({1}));
  const std::string missing = ::testing::TempDir() + "no-such-images.idx";
  absl::StatusOr<Dataset> data = ReadMnist(missing, labels);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(data.status().message(), HasSubstr(missing));
}

TEST(ReadMnistTest, BadMagicNamesTheFileAndOffset) {
  const std::string images = WriteTestFile("bad-magic-images.idx", IdxImages(1, 2, 2, 1234));
  const std::string labels = WriteTestFile("bad-magic-labels.idx", IdxLabels({1}));
  absl::StatusOr<Dataset> data = ReadMnist(images, labels);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(data.status().message(),
              HasSubstr(images + ": at byte 0: magic 1234, expected 2051 (IDX images)"));
}

TEST(ReadMnistTest, SwappedFilesGetAHint) {
  const std::string images = WriteTestFile("swap-images.idx", IdxImages(1, 2, 2));
  const std::string labels = WriteTestFile("swap-labels.idx", IdxLabels({1}));
  absl::StatusOr<Dataset> data = ReadMnist(labels, images);
  EXPECT_THAT(
      data.status().message(),
      AllOf(HasSubstr(labels + ": at byte 0: magic 2049, expected 2051"), HasSubstr("swapped")));
}

TEST(ReadMnistTest, TruncatedPlainFileNamesTheOffsets) {
  std::string bytes = IdxImages(4, 2, 2);  // 16 + 16 bytes.
  bytes.resize(27);
  const std::string images = WriteTestFile("short-images.idx", bytes);
  const std::string labels = WriteTestFile("short-labels.idx", IdxLabels({1, 2, 3, 4}));
  absl::StatusOr<Dataset> data = ReadMnist(images, labels);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(data.status().message(),
              HasSubstr(images + ": ends at byte 27 but the header promises 32 bytes"));
}

TEST(ReadMnistTest, TruncatedHeader) {
  const std::string images =
      WriteTestFile("short-header-images.idx", IdxImages(1, 2, 2).substr(0, 10));
  const std::string labels = WriteTestFile("short-header-labels.idx", IdxLabels({1}));
  absl::StatusOr<Dataset> data = ReadMnist(images, labels);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(data.status().message(), HasSubstr(images + ": ends at byte 10"));
}

TEST(ReadMnistTest, TruncatedGzipContentNamesTheDecompressedOffsets) {
  const std::string images = WriteTestFile("gz-short-images.idx", IdxImages(2, 2, 2));
  const std::string labels =
      WriteGzipTestFile("gz-short-labels.idx.gz", IdxLabels({1, 2, 3}).substr(0, 9));
  absl::StatusOr<Dataset> data = ReadMnist(images, labels);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(data.status().message(),
              HasSubstr(labels + " (decompressed): ends at byte 9 but the header promises 11"));
}

TEST(ReadMnistTest, CutGzipStreamIsDataLoss) {
  const std::string whole = WriteGzipTestFile("cut-whole.idx.gz", IdxImages(50, 4, 4));
  const std::string compressed = ReadTestFile(whole);
  ASSERT_GT(compressed.size(), 40u);
  const std::string images =
      WriteTestFile("cut-images.idx.gz", compressed.substr(0, compressed.size() / 2));
  const std::string labels = WriteTestFile("cut-labels.idx", IdxLabels({1}));
  absl::StatusOr<Dataset> data = ReadMnist(images, labels);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(data.status().message(),
              AllOf(HasSubstr(images + " (gzip): compressed data ends early at decompressed byte"),
                    HasSubstr("unexpected end of file")));
}

TEST(ReadMnistTest, ExtraBytesAreDataLoss) {
  const std::string images = WriteTestFile("long-images.idx", IdxImages(1, 2, 2) + "xyz");
  const std::string labels = WriteTestFile("long-labels.idx", IdxLabels({1}));
  absl::StatusOr<Dataset> data = ReadMnist(images, labels);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(data.status().message(), HasSubstr(images + ": has 3 bytes after byte 20"));
}

TEST(ReadMnistTest, ZeroDimensionIsRejected) {
  const std::string images = WriteTestFile("zero-images.idx", IdxImages(1, 0, 2));
  const std::string labels = WriteTestFile("zero-labels.idx", IdxLabels({1}));
  absl::StatusOr<Dataset> data = ReadMnist(images, labels);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(data.status().message(), HasSubstr(images + ": at byte 8: rows is 0"));
}

TEST(ReadMnistTest, CountMismatchNamesBothFiles) {
  const std::string images = WriteTestFile("mismatch-images.idx", IdxImages(3, 2, 2));
  const std::string labels = WriteTestFile("mismatch-labels.idx", IdxLabels({1, 2}));
  absl::StatusOr<Dataset> data = ReadMnist(images, labels);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(data.status().message(),
              HasSubstr(images + " holds 3 images but " + labels + " holds 2 labels"));
}

}  // namespace
}  // namespace ps
