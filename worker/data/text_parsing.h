// What the LIBSVM and CSV readers share, dense (text_readers.cc) and sparse
// (sparse_dataset.cc): lines, numbers, error messages and the labels rule.
#ifndef PS_WORKER_DATA_TEXT_PARSING_H_
#define PS_WORKER_DATA_TEXT_PARSING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "worker/data/file_contents.h"

namespace ps {
namespace data_internal {

// INVALID_ARGUMENT "path:line: message".
absl::Status LineError(const std::string& path, int64_t line_number, absl::string_view message);

// Whether `text` is a number that a float32 holds without becoming Inf (3.4e38 at most): the
// values and labels are stored as float32.
bool ParseFinite(absl::string_view text, double* value);

// A reader's last step: INVALID_ARGUMENT "path: no examples" when `labels` is empty; else the
// number of examples, and the labels as stored by the labels rule: all in {-1, +1} -> classes 0
// and 1 (LIBSVM's binary convention); else all integers in [0, 65536) -> kept as class ids,
// max + 1 classes; else regression targets with num_classes 0.
absl::Status StoreLabels(const std::string& path, const std::vector<double>& labels,
                         int64_t* num_examples, std::vector<float>* stored, int* num_classes);

// The number of columns every row of a CSV file has, set by its first row: at least 2 (a label
// and a feature), with `label_column` among them. Check each row in order.
class CsvColumns {
 public:
  CsvColumns(const std::string& path, int label_column)
      : path_(path), label_column_(label_column) {}

  // INVALID_ARGUMENT naming the line where the first row breaks the rule above or a later row
  // has another number of columns than it.
  absl::Status Check(int64_t line_number, size_t columns);
  size_t count() const { return count_; }
  bool is_first_row(int64_t line_number) const { return line_number == first_row_line_; }

 private:
  const std::string path_;
  const int label_column_;
  int64_t first_row_line_ = 0;
  size_t count_ = 0;
};

// One LIBSVM "index:value" token, the `token_number`th of its line (counting from 1): the index
// must be in [1, feature_dim] and above `*previous` (then becomes it), the value a finite
// float32. Messages name the file, the line and the token's place, never its text: they go back
// to whoever submitted the job, who may not be allowed to read the file.
absl::Status ParseLibsvmFeature(const std::string& path, int64_t line_number, size_t token_number,
                                absl::string_view token, int64_t feature_dim, int64_t* previous,
                                int64_t* index, float* value);

// Calls `parse(line_number, line)` for each non-blank line of `contents` (numbered from 1,
// "\r" and surrounding blanks removed) after the first `skip` lines, stopping at the first error.
template <typename ParseLine>
absl::Status ForEachLine(const FileContents& contents, int64_t skip, ParseLine parse) {
  int64_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(contents.bytes, '\n')) {
    ++line_number;
    if (line_number <= skip) continue;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (absl::Status status = parse(line_number, line); !status.ok()) return status;
  }
  return absl::OkStatus();
}

// Reads the CSV file at `path` (plain or gzip) and calls `row(line_number, fields, columns)` for
// each non-blank line after the header line (when `has_header`), its fields split at commas and
// their number checked by `columns` (CsvColumns), stopping at the first error. INVALID_ARGUMENT
// for a negative `label_column`; ReadFileContents' errors for the file.
template <typename Row>
absl::Status ForEachCsvRow(const std::string& path, int label_column, bool has_header, Row row) {
  if (label_column < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": label_column (data.label_column) must be non-negative, got ", label_column));
  }
  absl::StatusOr<FileContents> contents = ReadFileContents(path);
  if (!contents.ok()) return contents.status();
  CsvColumns columns(path, label_column);
  return ForEachLine(*contents, has_header ? 1 : 0,
                     [&](int64_t line_number, absl::string_view line) -> absl::Status {
                       std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
                       absl::Status shape = columns.Check(line_number, fields.size());
                       if (!shape.ok()) return shape;
                       return row(line_number, fields, columns);
                     });
}

}  // namespace data_internal
}  // namespace ps

#endif  // PS_WORKER_DATA_TEXT_PARSING_H_
