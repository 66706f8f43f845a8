// What the data readers' fuzz targets (csv_fuzz.cc, libsvm_fuzz.cc, idx_fuzz.cc) share.
#ifndef PS_WORKER_DATA_READER_FUZZING_H_
#define PS_WORKER_DATA_READER_FUZZING_H_

#include <glog/logging.h>

#include <cmath>
#include <string>

#include "absl/status/statusor.h"
#include "worker/data/dataset.h"
#include "worker/data/sparse_dataset.h"
#include "worker/data/test_files.h"

namespace ps {

// A reader's outcome for any input: a data set whose sizes agree and whose values are finite,
// or an error of the codes the readers promise (dataset.h).
inline void CheckReadOutcome(const absl::StatusOr<Dataset>& data) {
  if (!data.ok()) {
    CHECK(absl::IsInvalidArgument(data.status()) || absl::IsDataLoss(data.status()))
        << data.status();
    return;
  }
  CHECK_GE(data->num_examples, 0);
  CHECK_EQ(static_cast<int64_t>(data->features.size()), data->num_examples * data->feature_dim);
  CHECK_EQ(static_cast<int64_t>(data->labels.size()), data->num_examples);
  for (float value : data->features) CHECK(std::isfinite(value));
  for (float label : data->labels) CHECK(std::isfinite(label));
}

// The same for a sparse reader (sparse_dataset.h): rows that partition the features, keys below
// 2^kFeatureKeyBits, finite values and labels.
inline void CheckReadOutcome(const absl::StatusOr<SparseDataset>& data) {
  if (!data.ok()) {
    CHECK(absl::IsInvalidArgument(data.status()) || absl::IsDataLoss(data.status()))
        << data.status();
    return;
  }
  CHECK_EQ(static_cast<int64_t>(data->offsets.size()), data->num_examples + 1);
  CHECK_EQ(data->offsets.front(), 0);
  for (size_t i = 1; i < data->offsets.size(); ++i) {
    CHECK_LE(data->offsets[i - 1], data->offsets[i]);
  }
  CHECK_EQ(data->offsets.back(), static_cast<int64_t>(data->keys.size()));
  CHECK_EQ(data->keys.size(), data->values.size());
  CHECK_EQ(static_cast<int64_t>(data->labels.size()), data->num_examples);
  for (uint64_t key : data->keys) CHECK_LT(key, uint64_t{1} << kFeatureKeyBits);
  for (float value : data->values) CHECK(std::isfinite(value));
  for (float label : data->labels) CHECK(std::isfinite(label));
}

// `contents` gzip-compressed, as a seed for the readers' gzip path.
inline std::string Gzipped(const std::string& contents) {
  return testing_files::ReadTestFile(
      testing_files::WriteGzipTestFile("reader_fuzzing_seed.gz", contents));
}

}  // namespace ps

#endif  // PS_WORKER_DATA_READER_FUZZING_H_
