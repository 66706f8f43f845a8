// LIBSVM and CSV text files, plain or gzip. Lines end in "\n" or "\r\n"; blank lines are
// skipped. Both formats share one rule for telling class labels from regression targets.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "worker/data/dataset.h"
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

}  // namespace

absl::StatusOr<Dataset> ReadLibsvm(const std::string& path, int feature_dim,
                                   int64_t max_feature_values) {
  if (feature_dim < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a LIBSVM file needs feature_dim (data.feature_dim) >= 1, got ", feature_dim));
  }
  absl::StatusOr<FileContents> contents = ReadFileContents(path);
  if (!contents.ok()) return contents.status();
  Dataset data;
  data.feature_dim = feature_dim;
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
        labels.push_back(label);
        if (static_cast<int64_t>(data.features.size()) > max_feature_values - feature_dim) {
          return absl::ResourceExhaustedError(absl::StrCat(
              path, ":", line_number, ": the examples so far times data.feature_dim (",
              feature_dim, ") pass ", max_feature_values,
              " feature values: use fewer examples or features"));
        }
        data.features.resize(data.features.size() + feature_dim, 0.0f);
        float* row = data.features.data() + data.features.size() - feature_dim;
        int64_t previous = 0;
        for (size_t t = 1; t < tokens.size(); ++t) {
          int64_t index;
          float value;
          absl::Status feature_status = ParseLibsvmFeature(path, line_number, t + 1, tokens[t],
                                                           feature_dim, &previous, &index, &value);
          if (!feature_status.ok()) return feature_status;
          row[index - 1] = value;
        }
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  status = StoreLabels(path, labels, &data.num_examples, &data.labels, &data.num_classes);
  if (!status.ok()) return status;
  return data;
}

absl::StatusOr<Dataset> ReadCsv(const std::string& path, int label_column, bool has_header) {
  Dataset data;
  std::vector<double> labels;
  absl::Status status = ForEachCsvRow(
      path, label_column, has_header,
      [&](int64_t line_number, const std::vector<absl::string_view>& fields,
          const CsvColumns& columns) -> absl::Status {
        data.feature_dim = static_cast<int>(columns.count() - 1);
        for (size_t k = 0; k < fields.size(); ++k) {
          double value;
          if (!ParseFinite(fields[k], &value)) {
            std::string message =
                absl::StrCat("column ", k + 1, " (counting from 1) is not a finite float32 number");
            if (!has_header && columns.is_first_row(line_number)) {
              absl::StrAppend(&message, " (if the first line is a header, set data.csv_header)");
            }
            return LineError(path, line_number, message);
          }
          if (k == static_cast<size_t>(label_column)) {
            labels.push_back(value);
          } else {
            data.features.push_back(static_cast<float>(value));
          }
        }
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  status = StoreLabels(path, labels, &data.num_examples, &data.labels, &data.num_classes);
  if (!status.ok()) return status;
  return data;
}

}  // namespace ps
