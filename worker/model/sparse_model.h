// Models over sparse examples (worker/data/sparse_dataset.h): each has one sparse table
// (ParameterSpec.sparse_tables) whose rows the batch's keys address, and dense variables.
//   SPARSE_LOGISTIC_REGRESSION  table "weights" of width 1 (zeros) and variable "bias" [1];
//                               logit = sum over the features of value * weights[key] + bias,
//                               sigmoid cross-entropy on labels 0 and 1. On the host.
//   EMBEDDING_BAG_MLP           table "embeddings" of width embedding_dim; the bag, sum over the
//                               features of value * embeddings[key], feeds an MLP (model.h, its
//                               variables "layer0/weights", ...) with softmax cross-entropy. The
//                               bag and its scatter on the host, the MLP on the ComputeBackend.
// A step pulls the rows of its batch's keys (SparseBatch::keys, in that order), computes, and
// pushes the gradients of those rows: the mean loss's gradient, as for the dense variables.
#ifndef PS_WORKER_MODEL_SPARSE_MODEL_H_
#define PS_WORKER_MODEL_SPARSE_MODEL_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/job/variables.h"
#include "proto/job.pb.h"
#include "proto/parameter.pb.h"
#include "worker/compute/compute_backend.h"
#include "worker/data/sparse_dataset.h"
#include "worker/model/model.h"

namespace ps {

// Not thread-safe; one per training thread.
class SparseModel {
 public:
  // INVALID_ARGUMENT naming the field: a kind that is not sparse, SPARSE_LOGISTIC_REGRESSION
  // without 2 classes, EMBEDDING_BAG_MLP with fewer than 2 classes, embedding_dim < 0, or an MLP
  // Model::Create refuses. `backend` must outlive the model.
  static absl::StatusOr<std::unique_ptr<SparseModel>> Create(const ModelSpec& spec, int num_classes,
                                                             int max_batch_size,
                                                             ComputeBackend* backend);
  virtual ~SparseModel() = default;

  const SparseTableDef& table() const { return table_; }
  const std::vector<VariableDef>& variables() const { return variables_; }

  // The mean loss of `batch` and its gradients: of every dense variable into `gradients`, and
  // of the rows of batch.keys into `row_gradients`. `rows` holds those rows as pulled
  // (batch.keys.size() x table().width()); `row_gradients` the same shape. INVALID_ARGUMENT for
  // a batch larger than max_batch_size, a label out of range, a slot beyond the keys, a missing
  // or wrongly sized variable, or rows of the wrong size.
  virtual absl::StatusOr<BatchMetrics> ComputeGradients(const SparseBatch& batch,
                                                        const ConstVariables& weights,
                                                        absl::Span<const float> rows,
                                                        const MutableVariables& gradients,
                                                        absl::Span<float> row_gradients) = 0;
  // Loss and accuracy only.
  virtual absl::StatusOr<BatchMetrics> Evaluate(const SparseBatch& batch,
                                                const ConstVariables& weights,
                                                absl::Span<const float> rows) = 0;

 protected:
  SparseModel(SparseTableDef table, std::vector<VariableDef> variables)
      : table_(std::move(table)), variables_(std::move(variables)) {}

  // The checks ComputeGradients and Evaluate share: batch size, slots, labels in
  // [0, num_classes), the rows' (and when given, the row gradients') sizes.
  absl::Status CheckBatch(const SparseBatch& batch, int max_batch_size, int num_classes,
                          absl::Span<const float> rows,
                          const absl::Span<float>* row_gradients) const;

 private:
  const SparseTableDef table_;
  const std::vector<VariableDef> variables_;
};

}  // namespace ps

#endif  // PS_WORKER_MODEL_SPARSE_MODEL_H_
