// A sparse model's part of one worker's training (worker/model/sparse_model.h): its data, kept
// sparse (worker/data/sparse_dataset.h), its shard's batches and the table rows each touches,
// and its evaluation. The loop (trainer.cc) reads a batch before the exchange's BeforeCompute,
// which pulls the rows of the batch's keys (step_rows()) with the dense variables; computes; and
// AfterCompute pushes the rows' gradients with the dense ones.
//
// Evaluation reads the shards' values of the dense variables and of each evaluation batch's rows
// through a session of its own, as an observer (OBSERVER_INCARNATION): those reads wait at no
// staleness bound (in SYNC, only for the step asked), count towards no staleness and go into no
// apply log. A key seen first in evaluation gets its row made on its shard with the initial
// value, as a pull would.
#ifndef PS_WORKER_SPARSE_TRAINING_H_
#define PS_WORKER_SPARSE_TRAINING_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "proto/job.pb.h"
#include "proto/parameter.pb.h"
#include "proto/worker_service.pb.h"
#include "worker/compute/compute_backend.h"
#include "worker/data/dataset.h"
#include "worker/data/sparse_dataset.h"
#include "worker/exchange/exchange.h"
#include "worker/host_variables.h"
#include "worker/model/sparse_model.h"

namespace ps {

// Not thread-safe: the training thread makes every call.
class SparseTraining {
 public:
  // Loads the splits and makes the model. `backend` must outlive it. Errors as LoadSparseSplits
  // and SparseModel::Create, and INVALID_ARGUMENT for fewer training examples than workers.
  static absl::StatusOr<std::unique_ptr<SparseTraining>> Create(const JobSpec& spec, int worker,
                                                                int num_workers, int64_t first_step,
                                                                ComputeBackend* backend);

  const SparseSplits& data() const { return data_; }
  const SparseModel& model() const { return *model_; }
  // The rows the current batch touches, as the exchange takes them (ExchangeContext.sparse).
  SparseStepRows* step_rows() { return &rows_; }

  // Opens the evaluation's reading session. Call once the job exists on the ps; `client` must
  // outlive this object.
  absl::Status Connect(PsClient* client, const ParameterSpec& parameters, int worker);

  // Epochs of this worker's shard read so far (ShardReader::epochs_completed).
  int64_t epochs_completed() const { return reader_.epochs_completed(); }
  // Reads the next batch of this worker's shard (dataset.h's sharding rule) and sets
  // step_rows()->keys to its distinct keys.
  void ReadBatch();
  // The batch's mean loss and gradients on `weights` and step_rows()->values: the dense ones
  // into `gradients`, the rows' into step_rows()->gradients.
  absl::StatusOr<BatchMetrics> Compute(const ConstVariables& weights,
                                       const MutableVariables& gradients);
  // Loss and accuracy on the test set, or the validation set, in batches of `batch_size`, on the
  // shards' values once `at` allows a pull (SYNC: once its step has begun). REQUIRES: Connect
  // succeeded.
  absl::StatusOr<EvalResult> Evaluate(bool validation, int batch_size,
                                      const WorkerSession::PullOptions& at);

 private:
  SparseTraining(SparseSplits data, std::unique_ptr<SparseModel> model, ShardReader reader,
                 int batch_size);

  // Pulls into eval_weights_ and eval_rows_ the values eval_batch_ is evaluated on.
  absl::Status ReadEvaluationValues(const WorkerSession::PullOptions& at);

  SparseSplits data_;
  std::unique_ptr<SparseModel> model_;
  ShardReader reader_;
  const int batch_size_;
  std::vector<int64_t> examples_;
  SparseBatch batch_;
  SparseStepRows rows_;
  // Evaluation's.
  std::unique_ptr<WorkerSession> reader_session_;
  std::vector<int64_t> eval_examples_;
  SparseBatch eval_batch_;
  HostVariables eval_weights_;
  std::vector<float> eval_rows_;
};

}  // namespace ps

#endif  // PS_WORKER_SPARSE_TRAINING_H_
