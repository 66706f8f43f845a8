// Fuzzes the LIBSVM readers, dense (ReadLibsvm) and sparse (ReadSparseLibsvm), plain and
// gzip-compressed: each outcome is sound, and the two agree on which files they take and on
// every row's labels and values.
//
// Input: a byte that picks the feature dimension (1 to 64), then the file's bytes.
#include <string>
#include <vector>

#include "common/testing/fuzz_target.h"
#include "worker/data/dataset.h"
#include "worker/data/reader_fuzzing.h"
#include "worker/data/sparse_dataset.h"

namespace ps {

std::vector<std::string> FuzzSeeds() {
  const std::string libsvm = "+1 1:0.5 3:-2 # comment\n-1 2:1e-3\n+1\n";
  return {std::string(1, '\x03') + libsvm, std::string(1, '\x07') + "3 1:1 7:2\n0 4:0.25\n",
          std::string(1, '\x03') + Gzipped(libsvm)};
}

}  // namespace ps

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::FuzzReader in(data, size);
  const int feature_dim = 1 + in.Byte() % 64;
  const std::string path = ps::WriteFuzzFile(in.Rest(), ".libsvm");
  const absl::StatusOr<ps::Dataset> dense = ps::ReadLibsvm(path, feature_dim);
  const absl::StatusOr<ps::SparseDataset> sparse = ps::ReadSparseLibsvm(path, feature_dim);
  ps::CheckReadOutcome(dense);
  ps::CheckReadOutcome(sparse);
  CHECK_EQ(dense.ok(), sparse.ok()) << dense.status() << " against " << sparse.status();
  if (!dense.ok()) return 0;
  CHECK_EQ(dense->num_examples, sparse->num_examples);
  CHECK(dense->labels == sparse->labels);
  CHECK_EQ(dense->num_classes, sparse->num_classes);
  for (int64_t i = 0; i < dense->num_examples; ++i) {
    // The same values in the same order (ids increase along a row), the dense row's zeros aside.
    std::vector<float> row_values;
    for (int64_t j = 0; j < dense->feature_dim; ++j) {
      const float value = dense->features[i * dense->feature_dim + j];
      if (value != 0) row_values.push_back(value);
    }
    std::vector<float> sparse_values;
    for (int64_t j = sparse->offsets[i]; j < sparse->offsets[i + 1]; ++j) {
      if (sparse->values[j] != 0) sparse_values.push_back(sparse->values[j]);
    }
    CHECK(row_values == sparse_values) << "row " << i;
  }
  return 0;
}
