// A worker's reader of a job whose data is handed out (DataSpec.sharding DYNAMIC;
// server/data_handout.h): it asks the job's first shard for batch numbers, a few at a time, and
// reads batch g as examples [b * batch_size, (b + 1) * batch_size) (the last batch of an epoch
// may be smaller) of epoch e's order (EpochOrder), where e = g / batches_per_epoch and
// b = g % batches_per_epoch. Every worker reads the same data, so a batch is the same examples
// whoever reads it.
//
// Not thread-safe: the training thread makes every call.
#ifndef PS_WORKER_DATA_HANDED_OUT_READER_H_
#define PS_WORKER_DATA_HANDED_OUT_READER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps_service.pb.h"
#include "worker/data/dataset.h"

namespace ps {

class HandedOutReader {
 public:
  // Asks the first shard for `count` more batches in request `request_id` (1, 2, 3, ...;
  // PsClient::NextBatches with the worker's job, run and incarnation).
  using Fetch = std::function<absl::StatusOr<NextBatchesResponse>(int64_t request_id, int count)>;
  // How many batch numbers one request asks for.
  static constexpr int kFetchAhead = 4;

  // `data` must outlive the reader. REQUIRES: batch_size >= 1.
  HandedOutReader(const Dataset* data, int batch_size, uint64_t seed, bool shuffle, Fetch fetch);

  // The batches an epoch of `num_examples` has.
  static int64_t BatchesPerEpoch(int64_t num_examples, int batch_size);

  // Reads the next batch handed to this worker into `features` and `labels` (resized) and
  // returns its size, its number in `batch`; 0 when the job has no batch left for this worker.
  // The fetch's errors; FAILED_PRECONDITION when the job numbers its batches for another
  // amount of data (a worker that read other data than the chief).
  absl::StatusOr<int> NextBatch(std::vector<float>* features, std::vector<float>* labels,
                                int64_t* batch);

  // Epochs whose every batch has been trained on, as the first shard last said.
  int64_t epochs_completed() const { return epochs_completed_; }

 private:
  const Dataset* const data_;
  const int batch_size_;
  const uint64_t seed_;
  const bool shuffle_;
  const Fetch fetch_;
  const int64_t batches_per_epoch_;
  int64_t requests_ = 0;
  std::deque<int64_t> queue_;  // Handed to this worker, not read yet.
  int64_t epochs_completed_ = 0;
  int64_t order_epoch_ = -1;  // Whose order `order_` holds.
  std::vector<int64_t> order_;
  std::vector<int64_t> examples_;
};

}  // namespace ps

#endif  // PS_WORKER_DATA_HANDED_OUT_READER_H_
