// Evaluation over a whole data set in batches, as the chief reports it (EvalResult): the same
// rule for dense models (trainer.cc) and sparse ones (sparse_training.cc).
#ifndef PS_WORKER_EVALUATION_H_
#define PS_WORKER_EVALUATION_H_

#include <algorithm>
#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/worker_service.pb.h"
#include "worker/model/model.h"

namespace ps {

// The mean loss and accuracy over examples [0, num_examples), weighted by batch size, where
// `evaluate_batch(begin, size)` gives the metrics of examples [begin, begin + size) and batches
// hold `batch_size` examples (the last fewer). Stops at the first error. REQUIRES:
// batch_size >= 1.
template <typename EvaluateBatch>
absl::StatusOr<EvalResult> EvaluateInBatches(int64_t num_examples, int batch_size,
                                             EvaluateBatch evaluate_batch) {
  double loss_sum = 0;
  double correct = 0;
  for (int64_t begin = 0; begin < num_examples; begin += batch_size) {
    const int size = static_cast<int>(std::min<int64_t>(batch_size, num_examples - begin));
    absl::StatusOr<BatchMetrics> metrics = evaluate_batch(begin, size);
    if (!metrics.ok()) return metrics.status();
    loss_sum += metrics->loss * size;
    correct += metrics->accuracy * size;
  }
  EvalResult result;
  result.set_examples(num_examples);
  if (num_examples > 0) {
    result.set_loss(loss_sum / num_examples);
    result.set_accuracy(correct / num_examples);
  }
  return result;
}

}  // namespace ps

#endif  // PS_WORKER_EVALUATION_H_
