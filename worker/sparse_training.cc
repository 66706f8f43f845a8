#include "worker/sparse_training.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "worker/evaluation.h"

namespace ps {

absl::StatusOr<std::unique_ptr<SparseTraining>> SparseTraining::Create(const JobSpec& spec,
                                                                       int worker, int num_workers,
                                                                       int64_t first_step,
                                                                       ComputeBackend* backend) {
  absl::StatusOr<SparseSplits> data = LoadSparseSplits(spec.data());
  if (!data.ok()) return data.status();
  absl::Status sharded = CheckEveryShardHasExamples(data->train.num_examples, num_workers);
  if (!sharded.ok()) return sharded;
  const int max_batch_size = LargestBatch(spec.batch_size(), data->train.num_examples,
                                          data->validation.num_examples, data->test.num_examples);
  absl::StatusOr<std::unique_ptr<SparseModel>> model =
      SparseModel::Create(spec.model(), data->train.num_classes, max_batch_size, backend);
  if (!model.ok()) return model.status();
  ShardReader reader(data->train.num_examples, worker, num_workers, spec.seed(),
                     !spec.data().no_shuffle());
  reader.SkipBatches(first_step, spec.batch_size());
  return std::unique_ptr<SparseTraining>(new SparseTraining(*std::move(data), *std::move(model),
                                                            std::move(reader), spec.batch_size()));
}

SparseTraining::SparseTraining(SparseSplits data, std::unique_ptr<SparseModel> model,
                               ShardReader reader, int batch_size)
    : data_(std::move(data)),
      model_(std::move(model)),
      reader_(std::move(reader)),
      batch_size_(batch_size),
      eval_weights_(model_->variables()) {
  rows_.table = model_->table().name();
  rows_.width = model_->table().width();
}

absl::Status SparseTraining::Connect(PsClient* client, const ParameterSpec& parameters,
                                     int worker) {
  absl::StatusOr<std::unique_ptr<WorkerSession>> session =
      WorkerSession::Create(client, parameters, worker, OBSERVER_INCARNATION);
  if (!session.ok()) return session.status();
  reader_session_ = *std::move(session);
  return absl::OkStatus();
}

void SparseTraining::ReadBatch() {
  reader_.NextExamples(batch_size_, &examples_);
  GatherSparseBatch(data_.train, examples_, &batch_);
  rows_.keys = batch_.keys;
}

absl::StatusOr<BatchMetrics> SparseTraining::Compute(const ConstVariables& weights,
                                                     const MutableVariables& gradients) {
  rows_.gradients.resize(rows_.values.size());
  return model_->ComputeGradients(batch_, weights, rows_.values, gradients,
                                  absl::MakeSpan(rows_.gradients));
}

absl::Status SparseTraining::ReadEvaluationValues(const WorkerSession::PullOptions& at) {
  eval_rows_.resize(eval_batch_.keys.size() * static_cast<size_t>(model_->table().width()));
  WorkerSession::SparsePull rows{model_->table().name(), eval_batch_.keys,
                                 absl::MakeSpan(eval_rows_)};
  absl::StatusOr<WorkerSession::PullResult> pulled =
      reader_session_->Pull(at, eval_weights_.mutable_view(), {rows});
  return pulled.status();
}

absl::StatusOr<EvalResult> SparseTraining::Evaluate(bool validation, int batch_size,
                                                    const WorkerSession::PullOptions& at) {
  const SparseDataset& data = validation ? data_.validation : data_.test;
  return EvaluateInBatches(
      data.num_examples, batch_size, [&](int64_t begin, int size) -> absl::StatusOr<BatchMetrics> {
        eval_examples_.resize(static_cast<size_t>(size));
        std::iota(eval_examples_.begin(), eval_examples_.end(), begin);
        GatherSparseBatch(data, eval_examples_, &eval_batch_);
        absl::Status read = ReadEvaluationValues(at);
        if (!read.ok()) return read;
        return model_->Evaluate(eval_batch_, eval_weights_.const_view(), eval_rows_);
      });
}

}  // namespace ps
