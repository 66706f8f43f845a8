// What the LIBSVM and CSV readers share, dense (text_readers.cc) and sparse
// (sparse_dataset.cc): lines, numbers, error messages and the labels rule.
#ifndef PS_WORKER_DATA_TEXT_PARSING_H_
#define PS_WORKER_DATA_TEXT_PARSING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
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

// The labels rule: all in {-1, +1} -> classes 0 and 1 (LIBSVM's binary convention); else all
// integers in [0, 65536) -> kept as class ids, max + 1 classes; else regression targets with
// num_classes 0. Writes the labels as stored and the number of classes.
void SetLabels(const std::vector<double>& labels, std::vector<float>* stored, int* num_classes);

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

}  // namespace data_internal
}  // namespace ps

#endif  // PS_WORKER_DATA_TEXT_PARSING_H_
