// Fuzzes the CSV readers, of numbers (ReadCsv) and of categories (ReadCsvCategories), plain and
// gzip-compressed: each outcome is sound, and a file of numbers is also one of categories, with
// the same labels.
//
// Input: a byte that picks the label column (0 to 7, or -1: the last) and whether there is a
// header line, then the file's bytes.
#include <string>
#include <vector>

#include "common/testing/fuzz_target.h"
#include "worker/data/dataset.h"
#include "worker/data/reader_fuzzing.h"
#include "worker/data/sparse_dataset.h"

namespace ps {

std::vector<std::string> FuzzSeeds() {
  const std::string csv = "x,y,label\n0.5,1e-3,1\n-2,3.25,0\n7,8,2\n";
  return {std::string(1, '\x12') + csv, std::string(1, '\x0f') + "1,2,3\n4,5,6\n",
          std::string(1, '\x12') + Gzipped(csv)};
}

}  // namespace ps

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::FuzzReader in(data, size);
  const uint8_t options = in.Byte();
  const int label_column = (options & 15) > 7 ? -1 : (options & 7);
  const bool has_header = (options & 16) != 0;
  const std::string path = ps::WriteFuzzFile(in.Rest(), ".csv");
  const absl::StatusOr<ps::Dataset> numbers = ps::ReadCsv(path, label_column, has_header);
  const absl::StatusOr<ps::SparseDataset> categories =
      ps::ReadCsvCategories(path, label_column, has_header);
  ps::CheckReadOutcome(numbers);
  ps::CheckReadOutcome(categories);
  if (!numbers.ok()) return 0;
  CHECK(categories.ok()) << categories.status();
  CHECK(numbers->labels == categories->labels);
  CHECK_EQ(numbers->num_classes, categories->num_classes);
  // Every column but the label holds a number, so every row has one category per column.
  for (int64_t i = 0; i < numbers->num_examples; ++i) {
    CHECK_EQ(categories->offsets[i + 1] - categories->offsets[i], numbers->feature_dim);
  }
  return 0;
}
