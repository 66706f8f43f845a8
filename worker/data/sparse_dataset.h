// Sparse examples for the sparse models (worker/model/sparse_model.h): each example is a list of
// (key, value) features, kept sparse from the file to the model's table rows. A LIBSVM feature id
// and a CSV column's category become 64-bit keys by one fixed hash into [0, 2^40), the same on
// every machine and in every run, so that a model of any number of features (ids up to 2^63)
// needs memory only for the features the data has.
//
// Splits, shards and shuffles follow the dense rules of dataset.h (the same test, validation and
// training examples, the same ShardReader order).
#ifndef PS_WORKER_DATA_SPARSE_DATASET_H_
#define PS_WORKER_DATA_SPARSE_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/job.pb.h"
#include "worker/data/dataset.h"

namespace ps {

// Keys lie in [0, 2^kFeatureKeyBits).
inline constexpr int kFeatureKeyBits = 40;

// The key of LIBSVM feature id `id`.
uint64_t FeatureKey(int64_t id);
// The key of the category `text` in CSV column `column` (counting from 0, the label's included):
// the same text in two columns is two keys.
uint64_t CategoryKey(int column, absl::string_view text);

struct SparseDataset {
  int64_t num_examples = 0;
  int num_classes = 0;  // As dataset.h's labels rule; 0 for regression targets.
  // Example i's features are keys[j], values[j] for j in [offsets[i], offsets[i + 1]).
  std::vector<int64_t> offsets = {0};
  std::vector<uint64_t> keys;
  std::vector<float> values;
  std::vector<float> labels;
};

// A LIBSVM file as sparse rows: feature id k becomes FeatureKey(k). `feature_dim` > 0 bounds the
// ids (as for dense rows); 0 takes any id >= 1. RESOURCE_EXHAUSTED, before it grows further,
// when the file holds more than `max_features` features in all. Errors as ReadLibsvm's.
absl::StatusOr<SparseDataset> ReadSparseLibsvm(const std::string& path, int64_t feature_dim,
                                               int64_t max_features = kMaxFeatureValues);

// A CSV file whose columns other than `label_column` are categories: the field's text (blanks
// around it removed) in column c becomes feature CategoryKey(c, text) with value 1; an empty
// field is a missing category (no feature). The label column holds numbers (the labels rule).
absl::StatusOr<SparseDataset> ReadCsvCategories(const std::string& path, int label_column,
                                                bool has_header,
                                                int64_t max_features = kMaxFeatureValues);

struct SparseSplits {
  SparseDataset train;
  SparseDataset validation;  // Empty without DataSpec.validation_fraction.
  SparseDataset test;        // Empty with test_fraction 0 and no test_data.
};

// The LIBSVM or CSV source of `spec` and its test_data, split as LoadSplits splits dense data
// (no scaling: DataSpec.normalize is for dense features). INVALID_ARGUMENT for other sources.
absl::StatusOr<SparseSplits> LoadSparseSplits(const DataSpec& spec);

// A batch of examples with its distinct keys, in the order they first appear: example b's
// features are (keys[slots[j]], values[j]) for j in [offsets[b], offsets[b + 1]).
struct SparseBatch {
  int size = 0;
  std::vector<uint64_t> keys;
  std::vector<int64_t> offsets;
  std::vector<int32_t> slots;
  std::vector<float> values;
  std::vector<float> labels;
};

// Fills `batch` (its vectors reused) with the examples of `data` at `examples`, in that order.
void GatherSparseBatch(const SparseDataset& data, absl::Span<const int64_t> examples,
                       SparseBatch* batch);

}  // namespace ps

#endif  // PS_WORKER_DATA_SPARSE_DATASET_H_
