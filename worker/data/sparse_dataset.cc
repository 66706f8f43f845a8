#include "worker/data/sparse_dataset.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/random.h"
#include "worker/data/file_contents.h"
#include "worker/data/text_parsing.h"

namespace ps {
namespace {

using data_internal::CsvColumns;
using data_internal::FileContents;
using data_internal::ForEachCsvRow;
using data_internal::ForEachLine;
using data_internal::LineError;
using data_internal::ParseFinite;
using data_internal::ParseLibsvmFeature;
using data_internal::ReadFileContents;
using data_internal::StoreLabels;

constexpr uint64_t kKeyMask = (uint64_t{1} << kFeatureKeyBits) - 1;
// Which hash family a key comes from: LIBSVM ids, or the categories of CSV column c at
// kCategoryField + c.
constexpr uint64_t kLibsvmField = 1;
constexpr uint64_t kCategoryField = 2;

uint64_t FieldKey(uint64_t field, uint64_t value) { return Mix64(Mix64(field) ^ value) & kKeyMask; }

// 64-bit FNV-1a of `text`.
uint64_t Fingerprint(absl::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

absl::Status TooManyFeatures(const std::string& path, int64_t line_number, int64_t max_features) {
  return absl::ResourceExhaustedError(absl::StrCat(path, ":", line_number,
                                                   ": the examples so far hold more than ",
                                                   max_features, " features: use fewer examples"));
}

// Examples [begin, end) of `data`.
SparseDataset Slice(const SparseDataset& data, int64_t begin, int64_t end) {
  SparseDataset slice;
  slice.num_examples = end - begin;
  slice.num_classes = data.num_classes;
  const int64_t first = data.offsets[begin];
  const int64_t last = data.offsets[end];
  slice.offsets.resize(static_cast<size_t>(end - begin + 1));
  for (int64_t i = begin; i <= end; ++i) slice.offsets[i - begin] = data.offsets[i] - first;
  slice.keys.assign(data.keys.begin() + first, data.keys.begin() + last);
  slice.values.assign(data.values.begin() + first, data.values.begin() + last);
  slice.labels.assign(data.labels.begin() + begin, data.labels.begin() + end);
  return slice;
}

struct SparseTrainTest {
  SparseDataset train;
  SparseDataset test;
};

// The last HeldOutCount(n, fraction) examples held out, as SplitTrainTest.
SparseTrainTest SplitOff(SparseDataset data, double fraction) {
  const int64_t n = data.num_examples;
  const int64_t keep = n - HeldOutCount(n, fraction);
  SparseTrainTest split;
  split.test = Slice(data, keep, n);
  split.train = Slice(data, 0, keep);
  return split;
}

absl::StatusOr<SparseDataset> ReadSource(const DataSpec& spec, const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError(spec.source_case() == DataSpec::kLibsvm
                                          ? "data.libsvm is empty; give the file's path"
                                          : "data.csv is empty; give the file's path");
  }
  if (spec.source_case() == DataSpec::kLibsvm) return ReadSparseLibsvm(path, spec.feature_dim());
  return ReadCsvCategories(path, spec.label_column(), spec.csv_header());
}

}  // namespace

uint64_t FeatureKey(int64_t id) { return FieldKey(kLibsvmField, static_cast<uint64_t>(id)); }

uint64_t CategoryKey(int column, absl::string_view text) {
  return FieldKey(kCategoryField + static_cast<uint64_t>(column), Fingerprint(text));
}

absl::StatusOr<SparseDataset> ReadSparseLibsvm(const std::string& path, int64_t feature_dim,
                                               int64_t max_features) {
  if (feature_dim < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": data.feature_dim must be >= 0 for sparse LIBSVM rows (0: any id), got ",
        feature_dim));
  }
  absl::StatusOr<FileContents> contents = ReadFileContents(path);
  if (!contents.ok()) return contents.status();
  const int64_t id_limit = feature_dim > 0 ? feature_dim : std::numeric_limits<int64_t>::max();
  SparseDataset data;
  std::vector<double> labels;
  absl::Status status =
      ForEachLine(*contents, 0, [&](int64_t line_number, absl::string_view line) -> absl::Status {
        line = line.substr(0, line.find('#'));  // svmlight's trailing comments.
        std::vector<absl::string_view> tokens =
            absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
        if (tokens.empty()) return absl::OkStatus();
        double label;
        if (!ParseFinite(tokens[0], &label)) {
          return LineError(path, line_number, "the label (token 1) is not a finite float32 number");
        }
        if (static_cast<int64_t>(data.keys.size() + tokens.size()) > max_features + 1) {
          return TooManyFeatures(path, line_number, max_features);
        }
        labels.push_back(label);
        int64_t previous = 0;
        for (size_t t = 1; t < tokens.size(); ++t) {
          int64_t id;
          float value;
          absl::Status feature = ParseLibsvmFeature(path, line_number, t + 1, tokens[t], id_limit,
                                                    &previous, &id, &value);
          if (!feature.ok()) return feature;
          data.keys.push_back(FeatureKey(id));
          data.values.push_back(value);
        }
        data.offsets.push_back(static_cast<int64_t>(data.keys.size()));
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  status = StoreLabels(path, labels, &data.num_examples, &data.labels, &data.num_classes);
  if (!status.ok()) return status;
  return data;
}

absl::StatusOr<SparseDataset> ReadCsvCategories(const std::string& path, int label_column,
                                                bool has_header, int64_t max_features) {
  SparseDataset data;
  std::vector<double> labels;
  absl::Status status = ForEachCsvRow(
      path, label_column, has_header,
      [&](int64_t line_number, const std::vector<absl::string_view>& fields,
          const CsvColumns& columns) -> absl::Status {
        if (static_cast<int64_t>(data.keys.size() + fields.size()) > max_features + 1) {
          return TooManyFeatures(path, line_number, max_features);
        }
        double label;
        if (!ParseFinite(fields[label_column], &label)) {
          std::string message = absl::StrCat("the label (column ", label_column + 1,
                                             ", counting from 1) is not a finite float32 number");
          if (!has_header && columns.is_first_row(line_number)) {
            absl::StrAppend(&message, " (if the first line is a header, set data.csv_header)");
          }
          return LineError(path, line_number, message);
        }
        labels.push_back(label);
        for (size_t k = 0; k < fields.size(); ++k) {
          const absl::string_view category = absl::StripAsciiWhitespace(fields[k]);
          if (k == static_cast<size_t>(label_column) || category.empty()) continue;
          data.keys.push_back(CategoryKey(static_cast<int>(k), category));
          data.values.push_back(1.0f);
        }
        data.offsets.push_back(static_cast<int64_t>(data.keys.size()));
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  status = StoreLabels(path, labels, &data.num_examples, &data.labels, &data.num_classes);
  if (!status.ok()) return status;
  return data;
}

absl::StatusOr<SparseSplits> LoadSparseSplits(const DataSpec& spec) {
  if (spec.source_case() != DataSpec::kLibsvm && spec.source_case() != DataSpec::kCsv) {
    return absl::InvalidArgumentError(
        "a sparse model reads data.libsvm or data.csv (categories); synthetic and MNIST data are "
        "dense: use a dense model kind");
  }
  const std::string& path = spec.source_case() == DataSpec::kLibsvm ? spec.libsvm() : spec.csv();
  absl::StatusOr<SparseDataset> source = ReadSource(spec, path);
  if (!source.ok()) return source.status();
  SparseSplits splits;
  if (spec.test_data().empty()) {
    SparseTrainTest split =
        SplitOff(*std::move(source), spec.has_test_fraction() ? spec.test_fraction() : 0.1);
    splits.train = std::move(split.train);
    splits.test = std::move(split.test);
  } else {
    absl::StatusOr<SparseDataset> test = ReadSource(spec, spec.test_data());
    if (!test.ok()) return test.status();
    absl::StatusOr<int> classes = TestDataClasses(spec, test->num_classes, source->num_classes);
    if (!classes.ok()) return classes.status();
    splits.train = *std::move(source);
    splits.test = *std::move(test);
    splits.train.num_classes = splits.test.num_classes = *classes;
  }
  SparseTrainTest validation = SplitOff(std::move(splits.train), spec.validation_fraction());
  splits.train = std::move(validation.train);
  splits.validation = std::move(validation.test);
  return splits;
}

void GatherSparseBatch(const SparseDataset& data, absl::Span<const int64_t> examples,
                       SparseBatch* batch) {
  batch->size = static_cast<int>(examples.size());
  batch->keys.clear();
  batch->offsets.assign(1, 0);
  batch->slots.clear();
  batch->values.clear();
  batch->labels.clear();
  absl::flat_hash_map<uint64_t, int32_t> slot_of;
  for (const int64_t example : examples) {
    for (int64_t j = data.offsets[example]; j < data.offsets[example + 1]; ++j) {
      auto [it, inserted] =
          slot_of.try_emplace(data.keys[j], static_cast<int32_t>(batch->keys.size()));
      if (inserted) batch->keys.push_back(data.keys[j]);
      batch->slots.push_back(it->second);
      batch->values.push_back(data.values[j]);
    }
    batch->offsets.push_back(static_cast<int64_t>(batch->slots.size()));
    batch->labels.push_back(data.labels[example]);
  }
}

}  // namespace ps
