#include "worker/data/text_parsing.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ps {
namespace data_internal {
namespace {

// Integer labels below this are class ids; larger ones are taken for regression targets.
constexpr double kMaxClassLabel = 1 << 16;

}  // namespace

absl::Status LineError(const std::string& path, int64_t line_number, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": ", message));
}

bool ParseFinite(absl::string_view text, double* value) {
  return absl::SimpleAtod(text, value) && std::isfinite(*value) &&
         std::abs(*value) <= std::numeric_limits<float>::max();
}

absl::Status StoreLabels(const std::string& path, const std::vector<double>& labels,
                         int64_t* num_examples, std::vector<float>* stored, int* num_classes) {
  if (labels.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no examples"));
  *num_examples = static_cast<int64_t>(labels.size());
  const bool plus_minus_one = std::all_of(labels.begin(), labels.end(),
                                          [](double label) { return label == -1 || label == 1; });
  const bool class_ids = std::all_of(labels.begin(), labels.end(), [](double label) {
    return label >= 0 && label < kMaxClassLabel && label == std::floor(label);
  });
  stored->resize(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    (*stored)[i] = static_cast<float>(plus_minus_one ? (labels[i] > 0 ? 1 : 0) : labels[i]);
  }
  if (plus_minus_one) {
    *num_classes = 2;
  } else if (class_ids) {
    *num_classes = static_cast<int>(*std::max_element(labels.begin(), labels.end())) + 1;
  } else {
    *num_classes = 0;
  }
  return absl::OkStatus();
}

absl::Status CsvColumns::Check(int64_t line_number, size_t columns) {
  if (first_row_line_ == 0) {
    first_row_line_ = line_number;
    count_ = columns;
    if (columns < 2) {
      return LineError(path_, line_number,
                       "a row needs a label and at least one feature, found 1 column");
    }
    if (static_cast<size_t>(label_column_) >= columns) {
      return LineError(
          path_, line_number,
          absl::StrCat("label_column ", label_column_,
                       " (counting from 0) is out of range: the row has ", columns, " columns"));
    }
  } else if (columns != count_) {
    return LineError(path_, line_number,
                     absl::StrCat(columns, " columns, but the first row (line ", first_row_line_,
                                  ") has ", count_, "; every row must have the same number"));
  }
  return absl::OkStatus();
}

absl::Status ParseLibsvmFeature(const std::string& path, int64_t line_number, size_t token_number,
                                absl::string_view token, int64_t feature_dim, int64_t* previous,
                                int64_t* index_out, float* value_out) {
  const std::string where = absl::StrCat("token ", token_number, " (counting from 1)");
  const size_t colon = token.find(':');
  if (colon == absl::string_view::npos) {
    return LineError(path, line_number, absl::StrCat(where, " is not index:value"));
  }
  int64_t index;
  if (!absl::SimpleAtoi(token.substr(0, colon), &index)) {
    return LineError(path, line_number,
                     absl::StrCat(where, ": the feature index is not a whole number"));
  }
  if (index < 1) {
    return LineError(path, line_number,
                     absl::StrCat(where, ": feature index ", index, ": indices start at 1"));
  }
  if (index > feature_dim) {
    return LineError(path, line_number,
                     absl::StrCat(where, ": feature index ", index,
                                  " is out of range: feature_dim is ", feature_dim));
  }
  if (index <= *previous) {
    return LineError(
        path, line_number,
        absl::StrCat("feature index ", index, " after ", *previous, ": indices must increase"));
  }
  *previous = index;
  double value;
  if (!ParseFinite(token.substr(colon + 1), &value)) {
    return LineError(path, line_number,
                     absl::StrCat(where, ": the feature value is not a finite float32 number"));
  }
  *index_out = index;
  *value_out = static_cast<float>(value);
  return absl::OkStatus();
}

}  // namespace data_internal
}  // namespace ps
