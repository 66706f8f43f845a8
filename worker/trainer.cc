#include "worker/trainer.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <thread>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/job_spec.h"
#include "worker/background_task.h"
#include "worker/data/dataset.h"
#include "worker/model/model.h"

namespace ps {
namespace {

// Host copies of every variable of the model, with the maps the ps client and model take.
class HostVariables {
 public:
  explicit HostVariables(const std::vector<VariableDef>& variables) {
    for (const VariableDef& variable : variables) {
      int64_t count = 1;
      for (int64_t dimension : variable.shape()) count *= dimension;
      storage_.emplace_back(count, 0.0f);
      mutable_[variable.name()] = absl::MakeSpan(storage_.back());
      const_[variable.name()] = absl::MakeConstSpan(storage_.back());
    }
  }
  HostVariables(const HostVariables&) = delete;

  const MutableVariables& mutable_view() const { return mutable_; }
  const ConstVariables& const_view() const { return const_; }
  std::vector<std::vector<float>>& arrays() { return storage_; }
  void SetToZero() {
    for (std::vector<float>& array : storage_) std::fill(array.begin(), array.end(), 0.0f);
  }

 private:
  std::vector<std::vector<float>> storage_;
  MutableVariables mutable_;
  ConstVariables const_;
};

// The oldest version among the shards' values: the job's progress as a pull saw it.
int64_t OldestVersion(const WorkerSession::PullResult& pulled) {
  return *std::min_element(pulled.versions.begin(), pulled.versions.end());
}

// Mean loss and accuracy of `model` on all of `data`, in batches of `batch_size`.
absl::StatusOr<EvalResult> Evaluate(Model* model, const Dataset& data, int batch_size,
                                    const ConstVariables& weights) {
  EvalResult result;
  double loss_sum = 0;
  double correct = 0;
  for (int64_t begin = 0; begin < data.num_examples; begin += batch_size) {
    Batch batch;
    batch.size = static_cast<int>(std::min<int64_t>(batch_size, data.num_examples - begin));
    batch.feature_dim = data.feature_dim;
    batch.features = data.features.data() + begin * data.feature_dim;
    batch.labels = data.labels.data() + begin;
    absl::StatusOr<BatchMetrics> metrics = model->Evaluate(batch, weights);
    if (!metrics.ok()) return metrics.status();
    loss_sum += metrics->loss * batch.size;
    correct += metrics->accuracy * batch.size;
  }
  result.set_examples(data.num_examples);
  if (data.num_examples > 0) {
    result.set_loss(loss_sum / data.num_examples);
    result.set_accuracy(correct / data.num_examples);
  }
  return result;
}

// Extra delay of a straggling step that took `compute` to compute.
absl::Duration StragglerDelay(const StragglerSpec& stragglers, int worker, absl::Duration compute,
                              std::mt19937_64* random) {
  if (stragglers.distribution() == StragglerSpec::NONE) return absl::ZeroDuration();
  if (!stragglers.workers().empty() &&
      std::find(stragglers.workers().begin(), stragglers.workers().end(), worker) ==
          stragglers.workers().end()) {
    return absl::ZeroDuration();
  }
  switch (stragglers.distribution()) {
    case StragglerSpec::FIXED:
      return compute * (stragglers.factor() - 1);
    case StragglerSpec::EXPONENTIAL:
      return absl::Milliseconds(
          std::exponential_distribution<double>(1.0 / stragglers.mean_delay_ms())(*random));
    case StragglerSpec::UNIFORM:
      return absl::Milliseconds(
          std::uniform_real_distribution<double>(0, 2.0 * stragglers.mean_delay_ms())(*random));
    default:
      return absl::ZeroDuration();
  }
}

}  // namespace

// The training loop proper; RunTrainer adds leaving the job.
absl::Status Train(const TrainerContext& context) {
  const JobSpec& spec = context.spec;
  const ConsistencyConfig::Mode mode = spec.consistency().mode();
  const absl::Time start = absl::Now();

  absl::StatusOr<Dataset> data = LoadDataset(spec.data(), spec.seed());
  if (!data.ok()) return data.status();
  double test_fraction = spec.data().test_fraction() > 0 ? spec.data().test_fraction() : 0.1;
  TrainTestSplit split = SplitTrainTest(*std::move(data), test_fraction);
  if (split.train.num_examples < context.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the training data has ", split.train.num_examples, " examples, fewer than the ",
        context.num_workers, " workers"));
  }
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(spec.model(), split.train.feature_dim, split.train.num_classes,
                    spec.batch_size(), context.backend);
  if (!model.ok()) return model.status();

  ParameterSpec parameters = ToParameterSpec(spec, (*model)->variables(), context.num_workers);
  absl::StatusOr<Placement> placement = context.ps->CreateJob(parameters);  // Idempotent.
  if (!placement.ok()) return placement.status();
  absl::StatusOr<std::unique_ptr<WorkerSession>> session =
      WorkerSession::Create(context.ps, parameters, context.worker);
  if (!session.ok()) return session.status();

  const bool overlap =
      mode == ConsistencyConfig::ASYNC && spec.downpour().overlap_communication();
  HostVariables gradients((*model)->variables());
  // What steps compute on and the chief evaluates; with overlap, a pull in the background
  // lands in the spare, and the two trade places once it is in.
  HostVariables weights_storage((*model)->variables());
  HostVariables* weights = &weights_storage;
  // ASYNC: where gradients add up between pushes; with overlap, a push in the background
  // reads the spare, and the two trade places when the next push starts.
  HostVariables accumulated_storage((*model)->variables());
  HostVariables* accumulated = &accumulated_storage;
  std::unique_ptr<HostVariables> spare_weights_storage, spare_accumulated_storage;
  if (overlap) {
    spare_weights_storage = std::make_unique<HostVariables>((*model)->variables());
    spare_accumulated_storage = std::make_unique<HostVariables>((*model)->variables());
  }
  HostVariables* spare_weights = spare_weights_storage.get();
  HostVariables* spare_accumulated = spare_accumulated_storage.get();
  ShardReader reader(&split.train, context.worker, context.num_workers, spec.seed(),
                     !spec.data().no_shuffle());

  // Every worker stops after the same number of steps: epochs count against the largest shard.
  int64_t step_limit = spec.steps() > 0 ? spec.steps() : std::numeric_limits<int64_t>::max();
  if (spec.epochs() > 0) {
    int64_t largest_shard =
        (split.train.num_examples + context.num_workers - 1) / context.num_workers;
    int64_t steps_per_epoch = (largest_shard + spec.batch_size() - 1) / spec.batch_size();
    step_limit = std::min(step_limit, spec.epochs() * steps_per_epoch);
  }
  const int n_fetch = std::max(1, spec.downpour().n_fetch());
  const int n_push = std::max(1, spec.downpour().n_push());
  std::mt19937_64 straggler_random(spec.seed() * 1000003 + context.worker);

  JobProgress progress;
  progress.set_job_id(spec.job_id());
  progress.set_worker(context.worker);
  double staleness_sum = 0;
  int64_t staleness_count = 0;
  int64_t examples = 0;
  absl::Duration compute_time, communication_time;
  int64_t sync_step = 0;  // SYNC: the step to pull for next.
  std::vector<float> batch_features, batch_labels;
  bool target_reached = false;
  // The values of the next step's pull, when they came with this step's push (PushPull).
  std::optional<WorkerSession::PullResult> prefetched;
  std::vector<int64_t> weights_versions;  // Per shard, the versions *weights holds.
  // Overlap: what the exchange (push, pull or both) running in the background returned. It
  // runs while the next step computes, and is finished after that step's compute. Declared
  // after everything it uses, so that its destructor waits for it first.
  std::vector<PushResponse> exchange_pushed;
  std::optional<WorkerSession::PullResult> exchange_pulled;
  BackgroundTask exchange;

  // The current weights on the test split (the training split when there is none).
  auto evaluate = [&](int64_t at_step) -> absl::Status {
    absl::StatusOr<EvalResult> eval =
        Evaluate(model->get(), split.test.num_examples > 0 ? split.test : split.train,
                 spec.batch_size(), weights->const_view());
    if (!eval.ok()) return eval.status();
    eval->set_step(at_step);
    *progress.mutable_eval() = *eval;
    return absl::OkStatus();
  };

  // Throughput and elapsed time count from here: after loading data and creating the job.
  const absl::Time loop_start = absl::Now();
  auto record_staleness = [&](const std::vector<PushResponse>& pushed) {
    for (const PushResponse& response : pushed) {
      staleness_sum += response.staleness();
      ++staleness_count;
    }
  };
  // Overlap: waits for the exchange in flight (if any), takes the weights it pulled and counts
  // the staleness of what it pushed.
  auto finish_exchange = [&]() -> absl::Status {
    if (!exchange.busy()) return absl::OkStatus();
    absl::Status status = exchange.Wait();
    if (!status.ok()) return status;
    record_staleness(exchange_pushed);
    if (exchange_pulled.has_value()) {
      std::swap(weights, spare_weights);
      weights_versions = exchange_pulled->versions;
      progress.set_global_step(OldestVersion(*exchange_pulled));
    }
    return absl::OkStatus();
  };
  for (int64_t step = 0; step < step_limit && !target_reached; ++step) {
    if (context.stop->load()) return absl::CancelledError("stopped by request");
    if (spec.time_limit_s() > 0 && absl::Now() - start > absl::Seconds(spec.time_limit_s())) {
      break;
    }
    // Pull.
    absl::Time phase = absl::Now();
    int64_t step_tag = 0;
    // With overlap, every pull after the first comes in the background exchanges.
    if ((mode != ConsistencyConfig::ASYNC || step % n_fetch == 0) && (!overlap || step == 0)) {
      WorkerSession::PullOptions pull;
      pull.step = sync_step;
      pull.clock = step;
      absl::StatusOr<WorkerSession::PullResult> pulled;
      if (prefetched.has_value()) {
        pulled = *std::move(prefetched);
        prefetched.reset();
      } else {
        pulled = (*session)->Pull(pull, weights->mutable_view());
      }
      if (!pulled.ok()) return pulled.status();
      step_tag = pulled->step;
      weights_versions = pulled->versions;
      progress.set_global_step(mode == ConsistencyConfig::SYNC ? pulled->step
                                                               : OldestVersion(*pulled));
    }
    communication_time += absl::Now() - phase;
    // SYNC counts the job's steps on the shards, as TensorFlow's SyncReplicasOptimizer counts
    // its global step: with backup workers (R < N) a worker's own steps lag behind, and one
    // that went on to its own count would wait at a barrier the others have left.
    if (mode == ConsistencyConfig::SYNC && step_tag >= step_limit) {
      if (context.worker == 0) {
        absl::Status evaluated = evaluate(step_tag);
        if (!evaluated.ok()) return evaluated;
      }
      context.report(progress);
      break;
    }

    // Compute.
    phase = absl::Now();
    Batch batch;
    batch.size = reader.NextBatch(spec.batch_size(), &batch_features, &batch_labels);
    batch.feature_dim = split.train.feature_dim;
    batch.features = batch_features.data();
    batch.labels = batch_labels.data();
    absl::StatusOr<BatchMetrics> metrics =
        (*model)->ComputeGradients(batch, weights->const_view(), gradients.mutable_view());
    if (!metrics.ok()) return metrics.status();
    absl::Duration compute = absl::Now() - phase;
    compute_time += compute;
    examples += batch.size;
    absl::SleepFor(StragglerDelay(spec.stragglers(), context.worker, compute, &straggler_random));

    // Push.
    phase = absl::Now();
    const ConstVariables* to_push = &gradients.const_view();
    bool push_now = true;
    if (mode == ConsistencyConfig::ASYNC) {
      float local_rate = spec.downpour().local_learning_rate();
      for (size_t v = 0; v < gradients.arrays().size(); ++v) {
        std::vector<float>& g = gradients.arrays()[v];
        std::vector<float>& a = accumulated->arrays()[v];
        std::vector<float>& w = weights->arrays()[v];
        for (size_t i = 0; i < g.size(); ++i) {
          a[i] += g[i] / n_push;
          if (local_rate > 0) w[i] -= local_rate * g[i];
        }
      }
      push_now = (step + 1) % n_push == 0;
      to_push = &accumulated->const_view();
    }
    // The next step's pull goes with this push, in one round trip (PushPull), when there is
    // one: that step then starts from the values it brought (with overlap, the step after).
    const bool pull_next =
        step + 1 < step_limit && (mode != ConsistencyConfig::ASYNC || (step + 1) % n_fetch == 0);
    if (overlap) {
      WorkerSession::PushOptions push;
      push.clock = step;
      push.read_versions = weights_versions;  // What this step computed on.
      absl::Status finished = finish_exchange();  // The previous step's, which this one hid.
      if (!finished.ok()) return finished;
      WorkerSession::PullOptions next;
      next.clock = step + 1;
      exchange_pushed.clear();
      exchange_pulled.reset();
      if (push_now) {
        // The spare was pushed by the exchange just finished; gradients add up there next.
        std::swap(accumulated, spare_accumulated);
        accumulated->SetToZero();
      }
      const ConstVariables* pushing = push_now ? &spare_accumulated->const_view() : nullptr;
      const MutableVariables* pulling = pull_next ? &spare_weights->mutable_view() : nullptr;
      if (pushing != nullptr || pulling != nullptr) {
        exchange.Start([&, push, next, pushing, pulling]() -> absl::Status {
          if (pushing != nullptr && pulling != nullptr) {
            absl::StatusOr<WorkerSession::PushPullResult> both =
                (*session)->PushPull(push, *pushing, next, *pulling);
            if (!both.ok()) return both.status();
            exchange_pushed = std::move(both->pushed);
            exchange_pulled = std::move(both->pulled);
          } else if (pushing != nullptr) {
            absl::StatusOr<std::vector<PushResponse>> pushed = (*session)->Push(push, *pushing);
            if (!pushed.ok()) return pushed.status();
            exchange_pushed = *std::move(pushed);
          } else {
            absl::StatusOr<WorkerSession::PullResult> pulled = (*session)->Pull(next, *pulling);
            if (!pulled.ok()) return pulled.status();
            exchange_pulled = *std::move(pulled);
          }
          return absl::OkStatus();
        });
      }
      if (step + 1 == step_limit) {
        finished = finish_exchange();  // The last push is in before the job ends.
        if (!finished.ok()) return finished;
      }
    } else if (push_now) {
      WorkerSession::PushOptions push;
      push.step = step_tag;
      push.clock = step;
      absl::StatusOr<std::vector<PushResponse>> pushed;
      if (pull_next) {
        WorkerSession::PullOptions next;
        next.step = mode == ConsistencyConfig::SYNC ? step_tag + 1 : 0;
        next.clock = step + 1;
        absl::StatusOr<WorkerSession::PushPullResult> both =
            (*session)->PushPull(push, *to_push, next, weights->mutable_view());
        if (!both.ok()) return both.status();
        pushed = std::move(both->pushed);
        prefetched = std::move(both->pulled);
      } else {
        pushed = (*session)->Push(push, *to_push);
      }
      if (!pushed.ok()) return pushed.status();
      record_staleness(*pushed);
      if (mode == ConsistencyConfig::ASYNC) {
        accumulated->SetToZero();
      }
    }
    if (mode == ConsistencyConfig::SYNC) sync_step = step_tag + 1;
    communication_time += absl::Now() - phase;

    // Evaluate: everyone when a target loss may stop the job, else the chief only.
    bool last = step + 1 == step_limit;
    bool evaluate_now = spec.eval_interval() > 0 && (step + 1) % spec.eval_interval() == 0;
    if ((evaluate_now && (context.worker == 0 || spec.target_loss() > 0)) ||
        (last && context.worker == 0)) {
      absl::Status evaluated = evaluate(step + 1);
      if (!evaluated.ok()) return evaluated;
      target_reached = spec.target_loss() > 0 && progress.eval().loss() < spec.target_loss();
    }

    progress.set_step(step + 1);
    progress.set_epoch(reader.epochs_completed());
    progress.set_loss(metrics->loss);
    double elapsed = absl::ToDoubleSeconds(absl::Now() - loop_start);
    progress.set_elapsed_seconds(elapsed);
    progress.set_examples_per_second(elapsed > 0 ? examples / elapsed : 0);
    progress.set_staleness(staleness_count > 0 ? staleness_sum / staleness_count : 0);
    progress.set_compute_seconds(absl::ToDoubleSeconds(compute_time));
    progress.set_communication_seconds(absl::ToDoubleSeconds(communication_time));
    context.report(progress);
  }
  // A loop that ended early (time limit, target loss) may leave an exchange in flight.
  return finish_exchange();
}

absl::Status RunTrainer(const TrainerContext& context) {
  absl::Status status = Train(context);
  // However this worker ends, the others must not wait for it at an SSP bound. Best effort: a
  // ps that is down, or a job that was never created, has nothing to release.
  absl::Status left = context.ps->LeaveJob(context.spec.job_id(), context.worker);
  if (!left.ok() && status.ok() && !absl::IsNotFound(left)) {
    LOG(WARNING) << "worker " << context.worker << " could not leave job "
                 << context.spec.job_id() << ": " << left;
  }
  return status;
}

}  // namespace ps
