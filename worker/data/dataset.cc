#include "worker/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/random.h"

namespace ps {
namespace {


// The job seed's stream for shuffles; the index is the epoch.
constexpr uint64_t kShuffleStream = 3;

// The per-feature minimum and maximum of `data`.
FeatureScaling MinMaxOf(const Dataset& data) {
  const size_t dim = static_cast<size_t>(data.feature_dim);
  FeatureScaling scaling;
  scaling.kind = FeatureScaling::Kind::kMinMax;
  scaling.low.assign(dim, std::numeric_limits<float>::infinity());
  scaling.high.assign(dim, -std::numeric_limits<float>::infinity());
  for (size_t row = 0; row < data.features.size(); row += dim) {
    for (size_t j = 0; j < dim; ++j) {
      scaling.low[j] = std::min(scaling.low[j], data.features[row + j]);
      scaling.high[j] = std::max(scaling.high[j], data.features[row + j]);
    }
  }
  return scaling;
}

void Scale(const FeatureScaling& scaling, Dataset& data) {
  switch (scaling.kind) {
    case FeatureScaling::Kind::kNone:
      return;
    case FeatureScaling::Kind::kDivideBy255:
      for (float& pixel : data.features) pixel /= 255.0f;
      return;
    case FeatureScaling::Kind::kMinMax: {
      const size_t dim = scaling.low.size();
      for (size_t row = 0; row < data.features.size(); row += dim) {
        for (size_t j = 0; j < dim; ++j) {
          const float range = scaling.high[j] - scaling.low[j];
          float& x = data.features[row + j];
          x = range > 0 ? (x - scaling.low[j]) / range : 0.0f;
        }
      }
      return;
    }
  }
}

absl::Status RequirePath(const std::string& path, const char* field) {
  if (!path.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " is empty; give the file's path"));
}

absl::StatusOr<Dataset> LoadSource(const DataSpec& spec, uint64_t seed) {
  switch (spec.source_case()) {
    case DataSpec::kSynthetic:
      return MakeSyntheticDataset(spec.synthetic(), seed);
    case DataSpec::kMnistImages:
      if (absl::Status status = RequirePath(spec.mnist_images(), "data.mnist_images");
          !status.ok()) {
        return status;
      }
      if (spec.mnist_labels().empty()) {
        return absl::InvalidArgumentError(
            "data.mnist_labels is empty; data.mnist_images needs the matching labels file");
      }
      return ReadMnist(spec.mnist_images(), spec.mnist_labels());
    case DataSpec::kLibsvm:
      if (absl::Status status = RequirePath(spec.libsvm(), "data.libsvm"); !status.ok()) {
        return status;
      }
      return ReadLibsvm(spec.libsvm(), spec.feature_dim());
    case DataSpec::kCsv:
      if (absl::Status status = RequirePath(spec.csv(), "data.csv"); !status.ok()) return status;
      return ReadCsv(spec.csv(), spec.label_column(), spec.csv_header());
    case DataSpec::SOURCE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "data has no source: set one of data.synthetic, data.mnist_images, data.libsvm, data.csv");
}

// DataSpec.test_data, read as the source's format.
absl::StatusOr<Dataset> LoadTestData(const DataSpec& spec) {
  switch (spec.source_case()) {
    case DataSpec::kMnistImages:
      if (spec.test_labels().empty()) {
        return absl::InvalidArgumentError(
            "data.test_labels is empty; MNIST test_data needs the matching labels file");
      }
      return ReadMnist(spec.test_data(), spec.test_labels());
    case DataSpec::kLibsvm:
      return ReadLibsvm(spec.test_data(), spec.feature_dim());
    case DataSpec::kCsv:
      return ReadCsv(spec.test_data(), spec.label_column(), spec.csv_header());
    default:
      return absl::InvalidArgumentError(
          "data.test_data needs a file source (mnist_images, libsvm or csv); synthetic data is "
          "split by test_fraction");
  }
}

// Examples [begin, end) of `data`.
Dataset Slice(const Dataset& data, int64_t begin, int64_t end) {
  Dataset slice;
  slice.num_examples = end - begin;
  slice.feature_dim = data.feature_dim;
  slice.num_classes = data.num_classes;
  slice.features.assign(data.features.begin() + begin * data.feature_dim,
                        data.features.begin() + end * data.feature_dim);
  slice.labels.assign(data.labels.begin() + begin, data.labels.begin() + end);
  return slice;
}

}  // namespace

absl::StatusOr<Dataset> LoadDataset(const DataSpec& spec, uint64_t seed) {
  return LoadSource(spec, seed);
}

uint64_t DataSeed(const JobSpec& spec) {
  return spec.data().has_seed() ? spec.data().seed() : spec.seed();
}

absl::StatusOr<DataSplits> LoadSplits(const DataSpec& spec, uint64_t seed) {
  absl::StatusOr<Dataset> source = LoadSource(spec, seed);
  if (!source.ok()) return source.status();
  DataSplits splits;
  if (spec.test_data().empty()) {
    TrainTestSplit split =
        SplitTrainTest(*std::move(source), spec.has_test_fraction() ? spec.test_fraction() : 0.1);
    splits.train = std::move(split.train);
    splits.test = std::move(split.test);
  } else {
    absl::StatusOr<Dataset> test = LoadTestData(spec);
    if (!test.ok()) return test.status();
    if (test->feature_dim != source->feature_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data.test_data \"", spec.test_data(), "\" has ", test->feature_dim,
          " features but the training data has ", source->feature_dim,
          "; give a test file with the same columns"));
    }
    absl::StatusOr<int> classes = TestDataClasses(spec, test->num_classes, source->num_classes);
    if (!classes.ok()) return classes.status();
    splits.train = *std::move(source);
    splits.test = *std::move(test);
    splits.train.num_classes = splits.test.num_classes = *classes;
  }
  TrainTestSplit validation = SplitTrainTest(std::move(splits.train), spec.validation_fraction());
  splits.train = std::move(validation.train);
  splits.validation = std::move(validation.test);
  if (spec.normalize()) {
    if (spec.source_case() == DataSpec::kMnistImages) {
      splits.scaling.kind = FeatureScaling::Kind::kDivideBy255;
    } else {
      splits.scaling = MinMaxOf(splits.train);
    }
    for (Dataset* data : {&splits.train, &splits.validation, &splits.test}) {
      Scale(splits.scaling, *data);
    }
  }
  return splits;
}

absl::StatusOr<int> TestDataClasses(const DataSpec& spec, int test_classes, int source_classes) {
  if ((test_classes == 0) != (source_classes == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.test_data \"", spec.test_data(), "\" has ",
        test_classes == 0 ? "regression targets" : "class labels", " but the training data has ",
        source_classes == 0 ? "regression targets" : "class labels",
        "; give a test file of the same task"));
  }
  return std::max(test_classes, source_classes);
}

int LargestBatch(int batch_size, int64_t train_examples, int64_t validation_examples,
                 int64_t test_examples) {
  return static_cast<int>(std::min<int64_t>(
      batch_size, std::max({train_examples, validation_examples, test_examples})));
}

absl::Status CheckEveryShardHasExamples(int64_t train_examples, int num_workers) {
  if (train_examples >= num_workers) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("the training data has ", train_examples,
                                                 " examples, fewer than the ", num_workers,
                                                 " workers"));
}

int64_t HeldOutCount(int64_t n, double fraction) {
  int64_t count = std::llround(fraction * static_cast<double>(n));
  if (fraction > 0 && n > 1) count = std::max<int64_t>(count, 1);
  return std::clamp<int64_t>(count, 0, std::max<int64_t>(n - 1, 0));
}

TrainTestSplit SplitTrainTest(Dataset data, double test_fraction) {
  const int64_t n = data.num_examples;
  const int64_t test_size = HeldOutCount(n, test_fraction);
  TrainTestSplit split;
  split.test = Slice(data, n - test_size, n);
  data.num_examples = n - test_size;
  data.features.resize(static_cast<size_t>(data.num_examples * data.feature_dim));
  data.labels.resize(static_cast<size_t>(data.num_examples));
  split.train = std::move(data);
  return split;
}

ShardReader::ShardReader(const Dataset* data, int worker, int num_workers, uint64_t seed,
                         bool shuffle)
    : data_(data),
      num_examples_(data->num_examples),
      worker_(worker),
      num_workers_(num_workers),
      seed_(seed),
      shuffle_(shuffle) {
  StartEpoch();
}

ShardReader::ShardReader(int64_t num_examples, int worker, int num_workers, uint64_t seed,
                         bool shuffle)
    : data_(nullptr),
      num_examples_(num_examples),
      worker_(worker),
      num_workers_(num_workers),
      seed_(seed),
      shuffle_(shuffle) {
  StartEpoch();
}

std::vector<int64_t> EpochOrder(int64_t num_examples, uint64_t seed, int64_t epoch, bool shuffle) {
  std::vector<int64_t> order(static_cast<size_t>(num_examples));
  std::iota(order.begin(), order.end(), 0);
  if (shuffle) {
    SplitMix64 generator(StreamSeed(seed, kShuffleStream, static_cast<uint64_t>(epoch)));
    for (int64_t i = num_examples - 1; i > 0; --i) {
      const auto j = static_cast<int64_t>(generator.Below(static_cast<uint64_t>(i + 1)));
      std::swap(order[i], order[j]);
    }
  }
  return order;
}

void GatherExamples(const Dataset& data, absl::Span<const int64_t> examples,
                    std::vector<float>* features, std::vector<float>* labels) {
  const size_t dim = static_cast<size_t>(data.feature_dim);
  features->resize(examples.size() * dim);
  labels->resize(examples.size());
  for (size_t b = 0; b < examples.size(); ++b) {
    const auto example = static_cast<size_t>(examples[b]);
    std::copy_n(data.features.begin() + example * dim, dim, features->begin() + b * dim);
    (*labels)[b] = data.labels[example];
  }
}

void ShardReader::StartEpoch() {
  const int64_t n = num_examples_;
  const std::vector<int64_t> order = EpochOrder(n, seed_, epoch_, shuffle_);
  indices_.clear();
  for (int64_t position = worker_; position < n; position += num_workers_) {
    indices_.push_back(order[position]);
  }
  position_ = 0;
}

void ShardReader::SkipBatches(int64_t count, int batch_size) {
  if (indices_.empty() || count <= 0) return;
  const auto size = static_cast<int64_t>(indices_.size());
  const int64_t per_epoch = (size + batch_size - 1) / batch_size;
  if (count >= per_epoch) {
    epoch_ += count / per_epoch;
    StartEpoch();
  }
  position_ = static_cast<size_t>((count % per_epoch) * batch_size);
}

int ShardReader::NextBatch(int batch_size, std::vector<float>* features,
                           std::vector<float>* labels) {
  const int count = NextExamples(batch_size, &examples_);
  GatherExamples(*data_, examples_, features, labels);
  return count;
}

int ShardReader::NextExamples(int batch_size, std::vector<int64_t>* examples) {
  const size_t count =
      std::min(static_cast<size_t>(std::max(batch_size, 0)), indices_.size() - position_);
  examples->assign(indices_.begin() + position_, indices_.begin() + position_ + count);
  position_ += count;
  if (!indices_.empty() && position_ == indices_.size()) {
    ++epoch_;
    StartEpoch();
  }
  return static_cast<int>(count);
}

}  // namespace ps
