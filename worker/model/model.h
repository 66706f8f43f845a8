// Models a worker trains: linear regression, logistic regression, softmax regression and MLPs.
// A model declares its variables (placed on the ps) and computes the batch's mean loss and its
// gradients with a ComputeBackend. Weights and gradients are host arrays (what the ps client
// pulls and pushes); the model copies them to and from the backend's memory, whose buffers it
// allocates once (for batches up to max_batch_size) and reuses every step.
#ifndef PS_WORKER_MODEL_MODEL_H_
#define PS_WORKER_MODEL_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/job/variables.h"
#include "proto/job.pb.h"
#include "proto/parameter.pb.h"
#include "worker/compute/compute_backend.h"

namespace ps {

// A batch in host memory: `size` rows of `feature_dim` features, and one label per row (a class
// id as a float for classifiers; the target for linear regression).
struct Batch {
  int size = 0;
  int feature_dim = 0;
  const float* features = nullptr;
  const float* labels = nullptr;
};

struct BatchMetrics {
  double loss = 0;       // Mean over the batch.
  double accuracy = 0;   // Classifiers; 0 for regression.
  int examples = 0;
};

// The most floats a model allocates (8 GiB): its weights and their gradients, and its inputs,
// labels, outputs and their gradients for max_batch_size examples.
inline constexpr int64_t kMaxModelFloats = int64_t{1} << 31;

// INVALID_ARGUMENT naming what is wrong unless `batch` holds 1 to max_batch_size examples of
// feature_dim features and, for a classifier of `classes` classes (0: a regression, whose
// targets are any floats), labels that are class ids in [0, classes).
absl::Status CheckBatch(const Batch& batch, int max_batch_size, int feature_dim, int classes);

// The backend's activation for a spec's; INVALID_ARGUMENT for an unknown one.
absl::StatusOr<Activation> ToActivation(ModelSpec::Activation activation);

// Not thread-safe; one per training thread.
class Model {
 public:
  // INVALID_ARGUMENT naming the field: unknown kind, MLP without hidden_sizes or with a size
  // < 1, num_classes < 2 for softmax and MLP, feature_dim < 1. RESOURCE_EXHAUSTED, before
  // anything is allocated, when it would take more than kMaxModelFloats. `backend` must
  // outlive the model.
  static absl::StatusOr<std::unique_ptr<Model>> Create(const ModelSpec& spec, int feature_dim,
                                                       int num_classes, int max_batch_size,
                                                       ComputeBackend* backend);
  virtual ~Model() = default;

  // Variables in a fixed order, named "layer0/weights" [in, out], "layer0/bias" [out], ...
  // (one layer for the regressions). Weights use the spec's initializer (GLOROT_UNIFORM when
  // unset); biases start at zero.
  const std::vector<VariableDef>& variables() const { return variables_; }
  bool is_classifier() const { return is_classifier_; }

  // The mean loss of `batch` and its gradient with respect to every variable.
  // INVALID_ARGUMENT if the batch is larger than max_batch_size, has the wrong feature_dim, or
  // a variable is missing or of the wrong size.
  virtual absl::StatusOr<BatchMetrics> ComputeGradients(const Batch& batch,
                                                        const ConstVariables& weights,
                                                        const MutableVariables& gradients) = 0;
  // As ComputeGradients, and also the loss's gradient with respect to the batch's features into
  // `feature_gradients` (batch.size x feature_dim, row-major): for a model that makes the
  // features itself (an embedding bag, sparse_model.h). INVALID_ARGUMENT as ComputeGradients, or
  // for a span of another size.
  virtual absl::StatusOr<BatchMetrics> ComputeGradientsAndFeatureGradients(
      const Batch& batch, const ConstVariables& weights, const MutableVariables& gradients,
      absl::Span<float> feature_gradients) = 0;
  // Loss and accuracy only.
  virtual absl::StatusOr<BatchMetrics> Evaluate(const Batch& batch,
                                                const ConstVariables& weights) = 0;
  // The seed of the dropout masks of the next ComputeGradients calls (a model without dropout
  // has nothing to seed). The trainer sets one per worker and step, so a run's masks repeat.
  virtual void SetDropoutSeed(uint64_t /*seed*/) {}

 protected:
  Model(std::vector<VariableDef> variables, bool is_classifier)
      : variables_(std::move(variables)), is_classifier_(is_classifier) {}

 private:
  const std::vector<VariableDef> variables_;
  const bool is_classifier_;
};

}  // namespace ps

#endif  // PS_WORKER_MODEL_MODEL_H_
