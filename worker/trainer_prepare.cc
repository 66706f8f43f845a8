#include "worker/trainer_prepare.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "common/job/job_schema.h"
#include "common/job/job_spec.h"
#include "worker/data/handed_out_reader.h"
#include "worker/exchange/exchange_factory.h"

namespace ps {
namespace {

// The examples in each split.
DataSummary SummarizeCounts(int64_t train, int64_t validation, int64_t test) {
  DataSummary summary;
  summary.set_train_examples(train);
  summary.set_validation_examples(validation);
  summary.set_test_examples(test);
  return summary;
}

DataSummary Summarize(const DataSplits& data) {
  DataSummary summary = SummarizeCounts(data.train.num_examples, data.validation.num_examples,
                                        data.test.num_examples);
  switch (data.scaling.kind) {
    case FeatureScaling::Kind::kNone:
      summary.set_scaling("none");
      break;
    case FeatureScaling::Kind::kDivideBy255:
      summary.set_scaling("divide_by_255");
      break;
    case FeatureScaling::Kind::kMinMax:
      summary.set_scaling("min_max");
      summary.mutable_feature_min()->Assign(data.scaling.low.begin(), data.scaling.low.end());
      summary.mutable_feature_max()->Assign(data.scaling.high.begin(), data.scaling.high.end());
      break;
  }
  return summary;
}

// A sparse model's data: unscaled.
DataSummary Summarize(const SparseSplits& data) {
  DataSummary summary = SummarizeCounts(data.train.num_examples, data.validation.num_examples,
                                        data.test.num_examples);
  summary.set_scaling("none");
  return summary;
}

// How many steps every worker runs: `steps`, and `epochs` converted to steps of the largest
// shard, so that all stop after the same number; unbounded when neither is set. Data handed out
// by the job ends a worker's loop when none is left for it, after `epochs` epochs.
int64_t StepLimit(const JobSpec& spec, int64_t train_examples, int num_workers) {
  int64_t step_limit = spec.steps() > 0 ? spec.steps() : std::numeric_limits<int64_t>::max();
  if (spec.epochs() > 0 && spec.data().sharding() == DataSpec::BY_WORKER) {
    int64_t largest_shard = (train_examples + num_workers - 1) / num_workers;
    int64_t steps_per_epoch = (largest_shard + spec.batch_size() - 1) / spec.batch_size();
    step_limit = std::min(step_limit, spec.epochs() * steps_per_epoch);
  }
  return step_limit;
}

// A dense model's data and model into `job`.
absl::Status PrepareDense(const TrainerContext& context, PreparedJob* job) {
  const JobSpec& spec = context.spec;
  absl::StatusOr<DataSplits> data = LoadSplits(spec.data(), DataSeed(spec));
  if (!data.ok()) return data.status();
  job->data = *std::move(data);
  const Dataset& train = job->data.train;
  if (context.outcome != nullptr) context.outcome->data = Summarize(job->data);
  absl::Status sharded = CheckEveryShardHasExamples(train.num_examples, context.num_workers);
  if (!sharded.ok()) return sharded;
  const int max_batch_size =
      LargestBatch(spec.batch_size(), train.num_examples, job->data.validation.num_examples,
                   job->data.test.num_examples);
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(
      spec.model(), train.feature_dim, train.num_classes, max_batch_size, context.backend);
  if (!model.ok()) return model.status();
  job->model = *std::move(model);
  job->variables = job->model->variables();
  job->num_classes = train.num_classes;
  job->has_validation = job->data.validation.num_examples > 0;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedJob>> PrepareJob(const TrainerContext& context) {
  const JobSpec& spec = context.spec;
  auto job = std::make_unique<PreparedJob>();
  std::vector<SparseTableDef> tables;
  int64_t train_examples = 0;
  if (IsSparseModel(spec.model().kind())) {
    absl::StatusOr<std::unique_ptr<SparseTraining>> sparse = SparseTraining::Create(
        spec, context.worker, context.num_workers, context.first_step, context.backend);
    if (!sparse.ok()) return sparse.status();
    job->sparse = *std::move(sparse);
    const SparseSplits& data = job->sparse->data();
    if (context.outcome != nullptr) context.outcome->data = Summarize(data);
    job->variables = job->sparse->model().variables();
    tables.push_back(job->sparse->model().table());
    job->num_classes = data.train.num_classes;
    job->has_validation = data.validation.num_examples > 0;
    train_examples = data.train.num_examples;
  } else {
    absl::Status prepared = PrepareDense(context, job.get());
    if (!prepared.ok()) return prepared;
    train_examples = job->data.train.num_examples;
  }

  ExchangeContext exchange;
  exchange.spec = spec;
  exchange.parameters = ToParameterSpec(spec, job->variables, context.num_workers, tables);
  if (spec.data().sharding() == DataSpec::DYNAMIC) {
    DataHandoutSpec* handout = exchange.parameters.mutable_data_handout();
    handout->set_batches_per_epoch(
        HandedOutReader::BatchesPerEpoch(train_examples, spec.batch_size()));
    handout->set_epochs(spec.epochs());
    exchange.step_batches = &job->step_batches;
  }
  absl::StatusOr<Placement> placement = context.ps->CreateJob(exchange.parameters);  // Idempotent.
  if (!placement.ok()) return placement.status();
  if (job->sparse != nullptr) {
    absl::Status connected = job->sparse->Connect(context.ps, exchange.parameters, context.worker);
    if (!connected.ok()) return connected;
    exchange.sparse = job->sparse->step_rows();
  }
  exchange.variables = job->variables;
  exchange.worker = context.worker;
  exchange.incarnation = context.incarnation;
  exchange.ps = context.ps;
  exchange.ring = context.ring;
  job->step_limit = StepLimit(spec, train_examples, context.num_workers);
  exchange.step_limit = job->step_limit;
  exchange.first_step = context.first_step;
  absl::StatusOr<std::unique_ptr<Exchange>> created = CreateExchange(exchange);
  if (!created.ok()) return created.status();
  job->exchange = *std::move(created);
  job->parameters = std::move(exchange.parameters);
  return job;
}

}  // namespace ps
