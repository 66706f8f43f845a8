#include "worker/data/handed_out_reader.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {

HandedOutReader::HandedOutReader(const Dataset* data, int batch_size, uint64_t seed, bool shuffle,
                                 Fetch fetch)
    : data_(data),
      batch_size_(batch_size),
      seed_(seed),
      shuffle_(shuffle),
      fetch_(std::move(fetch)),
      batches_per_epoch_(BatchesPerEpoch(data->num_examples, batch_size)) {}

int64_t HandedOutReader::BatchesPerEpoch(int64_t num_examples, int batch_size) {
  return (num_examples + batch_size - 1) / batch_size;
}

absl::StatusOr<int> HandedOutReader::NextBatch(std::vector<float>* features,
                                               std::vector<float>* labels, int64_t* batch) {
  if (queue_.empty()) {
    absl::StatusOr<NextBatchesResponse> got = fetch_(++requests_, kFetchAhead);
    if (!got.ok()) return got.status();
    if (got->batches_per_epoch() != batches_per_epoch_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the job hands out ", got->batches_per_epoch(), " batches per epoch, but this worker's ",
          data_->num_examples, " training examples make ", batches_per_epoch_, " of ",
          batch_size_, ": every worker of a job whose data is handed out must read the same data"));
    }
    epochs_completed_ = got->epochs_completed();
    queue_.assign(got->batches().begin(), got->batches().end());
    if (queue_.empty()) return 0;
  }
  *batch = queue_.front();
  queue_.pop_front();
  const int64_t epoch = *batch / batches_per_epoch_;
  if (epoch != order_epoch_) {
    order_ = EpochOrder(data_->num_examples, seed_, epoch, shuffle_);
    order_epoch_ = epoch;
  }
  const int64_t begin = (*batch % batches_per_epoch_) * batch_size_;
  const int64_t end = std::min<int64_t>(begin + batch_size_, data_->num_examples);
  examples_.assign(order_.begin() + begin, order_.begin() + end);
  GatherExamples(*data_, examples_, features, labels);
  return static_cast<int>(end - begin);
}

}  // namespace ps
