// Training data: deterministic synthetic sets and readers for MNIST's IDX, LIBSVM and CSV
// files, split into train and test, and read by each worker through its own shard.
//
// Sharding rule: in epoch e, the training examples are ordered by a permutation drawn from
// (seed, e) (the file order when shuffling is off), and worker k of N reads positions
// k, k + N, k + 2N, ... of that order. So each epoch the N shards together cover every
// training example exactly once, and no two workers read the same example in one epoch.
#ifndef PS_WORKER_DATA_DATASET_H_
#define PS_WORKER_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/job.pb.h"

namespace ps {

// The most feature values a data set holds (16 GiB): a source that would hold more is refused
// with RESOURCE_EXHAUSTED before it allocates them.
inline constexpr int64_t kMaxFeatureValues = int64_t{1} << 32;

struct Dataset {
  int64_t num_examples = 0;
  int feature_dim = 0;
  int num_classes = 0;          // 0 for regression targets.
  std::vector<float> features;  // num_examples x feature_dim, row-major.
  std::vector<float> labels;    // Class ids (as floats) or regression targets.
};

// Loads or generates the source `spec` names (not its test_data), unscaled; synthetic sets
// depend only on (spec, seed). Errors name the file and the line (text formats) or byte offset
// (IDX): NOT_FOUND for a missing file, INVALID_ARGUMENT (DATA_LOSS for a short or corrupt file)
// otherwise.
absl::StatusOr<Dataset> LoadDataset(const DataSpec& spec, uint64_t seed);

// How features were scaled (DataSpec.normalize): x' = (x - offset[j]) * scale[j] for feature j,
// with the training examples' statistics only.
struct FeatureScaling {
  enum class Kind { kNone, kDivideBy255, kMinMax };
  Kind kind = Kind::kNone;
  // kMinMax: per feature, the training examples' minimum and maximum (a constant feature's
  // scaled values are 0).
  std::vector<float> low, high;
};

// What a job trains, stops and reports on.
struct DataSplits {
  Dataset train;
  Dataset validation;  // Empty without DataSpec.validation_fraction.
  Dataset test;        // Empty with test_fraction 0 and no test_data.
  FeatureScaling scaling;
};

// The source, and test_data when given, split as DataSpec says: the test set is test_data, else
// the source's last test_fraction (0.1 when unset); the validation set the last
// validation_fraction of the rest; training the remainder. Then scaled by the training set's
// statistics (normalize). A test_data file whose features or format do not match the source is
// INVALID_ARGUMENT naming both; num_classes is the larger of the two files'.
absl::StatusOr<DataSplits> LoadSplits(const DataSpec& spec, uint64_t seed);
// The seed of a job's data: DataSpec.seed where set, else the job's.
uint64_t DataSeed(const JobSpec& spec);

// Individual sources (LoadDataset dispatches to these). Files may be gzip-compressed (found by
// gzip's magic bytes). MNIST's num_classes is the largest label + 1. LIBSVM and CSV labels: all
// in {-1, +1} -> classes 0 and 1; else all integers in [0, 65536) -> class ids, num_classes =
// the largest + 1; else regression targets, num_classes 0.
absl::StatusOr<Dataset> MakeSyntheticDataset(const SyntheticData& spec, uint64_t seed);
absl::StatusOr<Dataset> ReadMnist(const std::string& images_path, const std::string& labels_path);
// LIBSVM rows are dense: RESOURCE_EXHAUSTED, before a row is allocated, when the rows so far
// times feature_dim would pass `max_feature_values` (a test lowers it).
absl::StatusOr<Dataset> ReadLibsvm(const std::string& path, int feature_dim,
                                   int64_t max_feature_values = kMaxFeatureValues);
absl::StatusOr<Dataset> ReadCsv(const std::string& path, int label_column, bool has_header);

// The number of classes of a job with a test file of its own (DataSpec.test_data) whose examples
// have `test_classes` classes and the source's `source_classes` (0: regression targets): the
// larger. INVALID_ARGUMENT naming the file when one has class labels and the other not.
absl::StatusOr<int> TestDataClasses(const DataSpec& spec, int test_classes, int source_classes);

// The largest batch a job over sets of these sizes needs (its model's buffers are for that
// many): `batch_size`, but no more than the largest set holds.
int LargestBatch(int batch_size, int64_t train_examples, int64_t validation_examples,
                 int64_t test_examples);

// INVALID_ARGUMENT when `num_workers` shards of `train_examples` would leave one empty.
absl::Status CheckEveryShardHasExamples(int64_t train_examples, int num_workers);

// How many of `n` examples a held-out `fraction` takes: round(fraction * n), at least 1 when
// fraction > 0 and n > 1, at most n - 1. REQUIRES: 0 <= fraction < 1.
int64_t HeldOutCount(int64_t n, double fraction);

struct TrainTestSplit {
  Dataset train;
  Dataset test;
};
// The last HeldOutCount(n, test_fraction) examples form the test set (LoadSplits also splits
// validation examples off this way). REQUIRES: 0 <= test_fraction < 1.
TrainTestSplit SplitTrainTest(Dataset data, double test_fraction);

// The order examples 0 .. num_examples - 1 are read in during epoch `epoch`: shuffled
// (Fisher-Yates from the (seed, epoch) stream) when `shuffle`, else as they are; the same on
// every worker.
std::vector<int64_t> EpochOrder(int64_t num_examples, uint64_t seed, int64_t epoch, bool shuffle);

// Copies `examples` of `data` into `features` and `labels` (resized), in that order.
void GatherExamples(const Dataset& data, absl::Span<const int64_t> examples,
                    std::vector<float>* features, std::vector<float>* labels);

// Worker `worker` of `num_workers` reading its shard of `data` batch by batch, epoch after
// epoch, by the sharding rule above. `data` must outlive the reader.
class ShardReader {
 public:
  ShardReader(const Dataset* data, int worker, int num_workers, uint64_t seed, bool shuffle);
  // A reader of example indices only (NextExamples), for data held elsewhere (sparse_dataset.h).
  ShardReader(int64_t num_examples, int worker, int num_workers, uint64_t seed, bool shuffle);

  // Copies the next batch of at most `batch_size` examples into `features` and `labels`
  // (resized) and returns its size. An epoch's last batch may be smaller; the following call
  // starts the next epoch. Returns 0 only if the shard is empty. REQUIRES: batch_size >= 1.
  // REQUIRES: made with the Dataset.
  int NextBatch(int batch_size, std::vector<float>* features, std::vector<float>* labels);
  // As NextBatch, but gives the indices of the batch's examples in the data.
  int NextExamples(int batch_size, std::vector<int64_t>* examples);

  // Moves past the next `count` batches of `batch_size` as if NextBatch had returned them (a
  // resumed job's worker starts where its reader was at the checkpoint's step).
  // REQUIRES: at the start of an epoch (no batch read yet), batch_size >= 1.
  void SkipBatches(int64_t count, int batch_size);

  // Epochs completed so far; counts an epoch as soon as its last batch is returned.
  int64_t epochs_completed() const { return epoch_; }
  // The dataset indices of this worker's shard in the current epoch, in reading order.
  const std::vector<int64_t>& shard_indices() const { return indices_; }

 private:
  void StartEpoch();

  const Dataset* const data_;  // Null for a reader of indices only.
  const int64_t num_examples_;
  const int worker_;
  const int num_workers_;
  const uint64_t seed_;
  const bool shuffle_;
  int64_t epoch_ = 0;
  std::vector<int64_t> indices_;
  size_t position_ = 0;
  std::vector<int64_t> examples_;  // NextBatch's.
};

}  // namespace ps

#endif  // PS_WORKER_DATA_DATASET_H_
