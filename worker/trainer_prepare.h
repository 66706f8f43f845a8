// The trainer's setup (worker/trainer.h), before its loop starts: the data, the model, the job
// created on the ps, and the exchange of the job's mode. Internal to the trainer library.
#ifndef PS_WORKER_TRAINER_PREPARE_H_
#define PS_WORKER_TRAINER_PREPARE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/parameter.pb.h"
#include "worker/data/dataset.h"
#include "worker/exchange/exchange.h"
#include "worker/model/model.h"
#include "worker/sparse_training.h"
#include "worker/trainer.h"

namespace ps {

// What the loop runs on, made before it starts: the data, the model, the job on the ps and the
// exchange of its mode. A dense model's data and model are `data` and `model`; a sparse
// model's are in `sparse`.
struct PreparedJob {
  DataSplits data;
  std::unique_ptr<Model> model;
  std::unique_ptr<SparseTraining> sparse;
  std::vector<VariableDef> variables;  // The model's dense variables.
  int num_classes = 0;
  bool has_validation = false;
  int64_t step_limit = 0;
  // Data handed out by the job: the batches of the steps not pushed yet (exchange.h).
  StepBatches step_batches;
  std::unique_ptr<Exchange> exchange;
  ParameterSpec parameters;  // As the shards hold the job.
};

// Loads the data, makes the model, creates the job on the ps (idempotent) and the exchange;
// records the data's summary in context.outcome.
absl::StatusOr<std::unique_ptr<PreparedJob>> PrepareJob(const TrainerContext& context);

}  // namespace ps

#endif  // PS_WORKER_TRAINER_PREPARE_H_
