#include "worker/trainer.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/job/job_schema.h"
#include "common/job/job_spec.h"
#include "common/random.h"
#include "worker/data/dataset.h"
#include "worker/data/handed_out_reader.h"
#include "worker/divergence.h"
#include "worker/evaluation.h"
#include "worker/exchange/exchange.h"
#include "worker/host_variables.h"
#include "worker/model/model.h"
#include "worker/model/sparse_model.h"
#include "worker/sparse_training.h"
#include "worker/trainer_prepare.h"

namespace ps {
namespace {

// The job seed's stream of dropout masks (worker/data/ holds streams 1 to 3).
constexpr uint64_t kDropoutStream = 4;

// Mean loss and accuracy of `model` on all of `data`, in batches of `batch_size`.
absl::StatusOr<EvalResult> Evaluate(Model* model, const Dataset& data, int batch_size,
                                    const ConstVariables& weights) {
  return EvaluateInBatches(data.num_examples, batch_size, [&](int64_t begin, int size) {
    Batch batch;
    batch.size = size;
    batch.feature_dim = data.feature_dim;
    batch.features = data.features.data() + begin * data.feature_dim;
    batch.labels = data.labels.data() + begin;
    return model->Evaluate(batch, weights);
  });
}

// A uniform guess's loss for a classifier of `num_classes` classes (ln of their number); 0 for
// regression (worker/divergence.h).
double GuessingLoss(ModelSpec::Kind kind, int num_classes) {
  if (kind == ModelSpec::LINEAR_REGRESSION || num_classes < 2) return 0;
  const bool binary =
      kind == ModelSpec::LOGISTIC_REGRESSION || kind == ModelSpec::SPARSE_LOGISTIC_REGRESSION;
  return std::log(binary ? 2.0 : num_classes);
}

// Extra delay of a straggling step that took `compute` to compute (StragglerSpec).
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

// Records a span of the training loop from `begin` to `end` where the job is traced.
void RecordSpan(const TrainerContext& context, TraceEvent::Kind kind, absl::Time begin,
                absl::Time end, int64_t step) {
  if (context.trace != nullptr) context.trace->Record(kind, begin, end, step, context.worker);
}

// The training loop: data, compute, stragglers, stop rules, evaluation and reports. What a
// step's weights are and where its gradient goes is the exchange's (worker/exchange/).
// Times one exchange phase: End adds the time since construction to `phase`, less the part the
// exchange's pulls waited at the shards meanwhile, which goes to `wait`; where the job is
// traced, it records the phase as `kind` of `step`, and its waits as a WAIT from its start.
class PhaseTimer {
 public:
  PhaseTimer(const Exchange& exchange, const TrainerContext& context)
      : exchange_(&exchange),
        context_(&context),
        start_(context.clock->Now()),
        parked_before_(exchange.parked_time()) {}

  void End(absl::Duration* phase, absl::Duration* wait, TraceEvent::Kind kind,
           int64_t step) const {
    const absl::Time end = context_->clock->Now();
    const absl::Duration took = end - start_;
    const absl::Duration waited = std::min(took, exchange_->parked_time() - parked_before_);
    *phase += took - waited;
    *wait += waited;
    RecordSpan(*context_, kind, start_, end, step);
    if (waited > absl::ZeroDuration()) {
      RecordSpan(*context_, TraceEvent::WAIT, start_, start_ + waited, step);
    }
  }

 private:
  const Exchange* exchange_;
  const TrainerContext* context_;
  absl::Time start_;
  absl::Duration parked_before_;
};

class TrainingLoop {
 public:
  // `start`: when the run began, for time_limit_s.
  TrainingLoop(const TrainerContext& context, PreparedJob* job, absl::Time start)
      : context_(context),
        spec_(context.spec),
        job_(*job),
        exchange_(*job->exchange),
        start_(start),
        reader_(&job->data.train, context.worker, context.num_workers, spec_.seed(),
                !spec_.data().no_shuffle()),
        gradients_(job->variables),
        straggler_random_(spec_.seed() * 1000003 + context.worker) {
    progress_.set_job_id(spec_.job_id());
    progress_.set_worker(context.worker);
    if (spec_.data().sharding() == DataSpec::DYNAMIC) {
      handed_out_.emplace(&job->data.train, spec_.batch_size(), spec_.seed(),
                          !spec_.data().no_shuffle(),
                          [&context](int64_t request_id, int count) {
                            NextBatchesRequest request;
                            request.set_job_id(context.spec.job_id());
                            request.set_run_id(context.spec.run_id());
                            request.set_worker(context.worker);
                            request.set_incarnation(context.incarnation);
                            request.set_request_id(request_id);
                            request.set_count(count);
                            return context.ps->NextBatches(request,
                                                           context.spec.replicas() > 1);
                          });
    } else {
      reader_.SkipBatches(context.first_step, spec_.batch_size());
    }
  }

  absl::Status Run();
  // The chief's last word, once Run has ended well: it leaves the job, waits until every
  // worker has (so that no update is still to come), pulls the shards' values, the model psctl
  // saves in params/, and reports their test and validation figures as the job's final ones.
  absl::Status EvaluateFinalModel();

 private:
  // Waits, polling the shards, until every worker has left the job or was lost (its lease ran
  // out), or no update has come for a while (a worker lost for good without a lease), for at
  // most kFinalModelWait; CANCELLED when asked to stop, DEADLINE_EXCEEDED naming who is left.
  absl::Status AwaitEveryWorkerLeft();
  // Computes step's gradient on the exchange's weights into gradients_, then waits out the
  // straggler delay (asleep, or computing where StragglerSpec.busy).
  absl::StatusOr<BatchMetrics> Compute(int64_t step);
  // `weights` (the exchange's when null) on the validation set (into progress_.validation)
  // where the job has one, and on the test set (into progress_.eval) where it has one and either
  // this is the `final` evaluation or there is no validation set: a job with a validation split
  // is watched and judged on it, and its test set is touched once, at the end.
  // `sync_step`: in SYNC, the job's step whose values a sparse model is evaluated on (its reads
  // wait for that step to begin, so that every run evaluates the same values); else unused.
  absl::Status Evaluate(int64_t at_step, int64_t sync_step, bool final,
                        const ConstVariables* weights = nullptr);
  // Evaluate's work, which Evaluate times.
  absl::Status EvaluateSplits(int64_t at_step, int64_t sync_step, bool final,
                              const ConstVariables* weights);
  // Evaluates after step `step` where the spec asks for it; applies the stop rules
  // (target_loss, early_stopping_evals) to the validation loss, else the test loss.
  absl::Status MaybeEvaluate(int64_t step);
  void Report(int64_t step, double loss);

  const TrainerContext& context_;
  const JobSpec& spec_;
  PreparedJob& job_;
  Exchange& exchange_;
  const absl::Time start_;
  absl::Time loop_start_;
  ShardReader reader_;  // Unused when the data is handed out.
  // Data handed out by the job (DataSpec.sharding DYNAMIC): the reader, and the batch it read
  // for the step (its number and size).
  std::optional<HandedOutReader> handed_out_;
  int64_t handed_out_batch_ = -1;
  int handed_out_size_ = 0;
  HostVariables gradients_;
  std::mt19937_64 straggler_random_;
  std::unique_ptr<HostVariables> busy_gradients_;  // A busy straggler's discarded copies.
  std::vector<float> batch_features_, batch_labels_;
  JobProgress progress_;
  int64_t examples_ = 0;
  // Step time by phase: computing; BeforeCompute (pulls) and AfterCompute (pushes, and a
  // PushPull's pull) less their waits at the shards; and those waits.
  absl::Duration compute_time_, pull_time_, push_time_, wait_time_;
  DivergenceWatch divergence_{GuessingLoss(spec_.model().kind(), job_.num_classes)};
  bool stopped_early_ = false;  // A stop rule ended the job; progress_.note says which.
  // Early stopping: the best loss the stop rules saw, its step, and the evaluations since.
  int64_t evaluations_ = 0;
  double best_loss_ = 0;
  int64_t best_step_ = 0;
  int evaluations_since_best_ = 0;
  absl::Duration longest_evaluation_;  // Of this worker's evaluations so far.
  // SYNC: the furthest step of the shards when the chief last asked (AwaitEveryWorkerLeft);
  // -1 before.
  int64_t shards_step_ = -1;
};

absl::Status TrainingLoop::Run() {
  // Throughput and elapsed time count from here: after loading data and creating the job.
  loop_start_ = context_.clock->Now();
  for (int64_t step = context_.first_step; step < job_.step_limit && !stopped_early_; ++step) {
    if (context_.stop->load()) return absl::CancelledError("stopped by request");
    if (spec_.time_limit_s() > 0 &&
        context_.clock->Now() - start_ > absl::Seconds(spec_.time_limit_s())) {
      if (progress_.note().empty()) {
        // The same words on every worker, so that the job's note is one sentence.
        progress_.set_note(absl::StrFormat("stopped before its steps: the job's time_limit_s, "
                                           "%g s, ran out",
                                           spec_.time_limit_s()));
      }
      break;
    }
    // A sparse model's batch first: the pull brings the rows of its keys.
    if (job_.sparse != nullptr) job_.sparse->ReadBatch();
    // A batch handed out first: a worker that gets none is done.
    if (handed_out_.has_value()) {
      absl::StatusOr<int> size =
          handed_out_->NextBatch(&batch_features_, &batch_labels_, &handed_out_batch_);
      if (!size.ok()) return size.status();
      if (*size == 0) break;
      handed_out_size_ = *size;
    }
    PhaseTimer phase(exchange_, context_);
    absl::Status status = exchange_.BeforeCompute(step);
    if (!status.ok()) return status;
    phase.End(&pull_time_, &wait_time_, TraceEvent::PULL, step);
    progress_.set_global_step(exchange_.global_step());
    if (exchange_.job_step() >= job_.step_limit) {  // The job's steps are all done.
      context_.report(progress_);  // The chief's evaluation comes after (EvaluateFinalModel).
      break;
    }
    absl::StatusOr<BatchMetrics> metrics = Compute(step);
    if (!metrics.ok()) return metrics.status();
    if (std::optional<std::string> diverged = divergence_.Observe(step, metrics->loss)) {
      if (!spec_.continue_on_divergence()) {
        return absl::AbortedError(absl::StrCat(
            "training diverged: ", *diverged,
            "; lower the learning rate (or the momentum, which asynchrony adds to), or set "
            "continue_on_divergence to go on"));
      }
      if (progress_.note().empty()) progress_.set_note("training diverged: " + *diverged);
    }
    if (handed_out_.has_value()) job_.step_batches.push_back(handed_out_batch_);
    phase = PhaseTimer(exchange_, context_);
    status = exchange_.AfterCompute(step, gradients_);
    if (!status.ok()) return status;
    phase.End(&push_time_, &wait_time_, TraceEvent::PUSH, step);
    status = MaybeEvaluate(step);
    if (!status.ok()) return status;
    Report(step, metrics->loss);
  }
  // The loop's note (a stop rule, the time limit) also where no report follows it (a worker
  // other than the chief reports last from the loop), else what the divergence watch saw.
  if (context_.outcome != nullptr) {
    context_.outcome->note =
        progress_.note().empty() ? divergence_.StallNote() : progress_.note();
  }
  // A loop that ended early (time limit, target loss) may leave an exchange in flight.
  absl::Status finished = exchange_.Finish();
  if (context_.outcome != nullptr) {  // Finish's own traffic (a last averaging, a publish).
    context_.outcome->bytes_sent = exchange_.bytes_sent();
    context_.outcome->bytes_received = exchange_.bytes_received();
  }
  return finished;
}

absl::StatusOr<BatchMetrics> TrainingLoop::Compute(int64_t step) {
  const absl::Time begin = context_.clock->Now();
  Batch batch;
  if (job_.sparse == nullptr) {
    batch.size = handed_out_.has_value()
                     ? handed_out_size_
                     : reader_.NextBatch(spec_.batch_size(), &batch_features_, &batch_labels_);
    batch.feature_dim = job_.data.train.feature_dim;
    batch.features = batch_features_.data();
    batch.labels = batch_labels_.data();
    job_.model->SetDropoutSeed(StreamSeed(spec_.seed(), kDropoutStream,
                                          static_cast<uint64_t>(step) * context_.num_workers +
                                              static_cast<uint64_t>(context_.worker)));
  }
  // The batch's gradient into `out`: the same result however often it runs (a sparse model's
  // rows' gradients, which it also writes, included), as the busy straggler's copies need.
  auto compute_into = [&](const MutableVariables& out) -> absl::StatusOr<BatchMetrics> {
    if (job_.sparse != nullptr) return job_.sparse->Compute(exchange_.weights().const_view(), out);
    return job_.model->ComputeGradients(batch, exchange_.weights().const_view(), out);
  };
  absl::StatusOr<BatchMetrics> metrics = compute_into(gradients_.mutable_view());
  if (!metrics.ok()) return metrics.status();
  const absl::Duration compute = context_.clock->Now() - begin;
  compute_time_ += compute;
  examples_ += metrics->examples;
  RecordSpan(context_, TraceEvent::COMPUTE, begin, begin + compute, step);
  const absl::Duration delay =
      StragglerDelay(spec_.stragglers(), context_.worker, compute, &straggler_random_);
  if (delay <= absl::ZeroDuration()) return metrics;
  // The delay's span, recorded when it ends (however Compute returns from here).
  struct StraggleSpan {
    const TrainerContext& context;
    int64_t step;
    absl::Time begin = context.clock->Now();
    ~StraggleSpan() {
      RecordSpan(context, TraceEvent::STRAGGLE, begin, context.clock->Now(), step);
    }
  } straggle{context_, step};
  if (!spec_.stragglers().busy() || compute <= absl::ZeroDuration()) {
    context_.clock->SleepFor(delay);
    return metrics;
  }
  // As many whole copies as fit in the delay, then the rest of it asleep: a delay shorter
  // than a step's compute is slept whole.
  const auto copies = static_cast<int64_t>(absl::FDivDuration(delay, compute));
  if (copies > 0 && busy_gradients_ == nullptr) {
    busy_gradients_ = std::make_unique<HostVariables>(job_.variables);
  }
  for (int64_t copy = 0; copy < copies; ++copy) {
    absl::StatusOr<BatchMetrics> again = compute_into(busy_gradients_->mutable_view());
    if (!again.ok()) return again.status();
  }
  context_.clock->SleepFor(delay - copies * compute);
  return metrics;
}

absl::Status TrainingLoop::Evaluate(int64_t at_step, int64_t sync_step, bool final,
                                    const ConstVariables* weights) {
  const absl::Time begin = context_.clock->Now();
  absl::Status status = EvaluateSplits(at_step, sync_step, final, weights);
  const absl::Time end = context_.clock->Now();
  longest_evaluation_ = std::max(longest_evaluation_, end - begin);
  RecordSpan(context_, TraceEvent::EVALUATE, begin, end, at_step);
  return status;
}

absl::Status TrainingLoop::EvaluateSplits(int64_t at_step, int64_t sync_step, bool final,
                                          const ConstVariables* weights) {
  for (const bool validation : {false, true}) {
    if (!validation && !final && job_.has_validation) continue;
    absl::StatusOr<EvalResult> eval;
    if (job_.sparse != nullptr) {
      const SparseSplits& data = job_.sparse->data();
      if ((validation ? data.validation : data.test).num_examples == 0) continue;
      WorkerSession::PullOptions values;
      values.step = std::max<int64_t>(sync_step, 0);
      eval = job_.sparse->Evaluate(validation, spec_.batch_size(), values);
    } else {
      const Dataset& data = validation ? job_.data.validation : job_.data.test;
      if (data.num_examples == 0) continue;
      eval = ps::Evaluate(job_.model.get(), data, spec_.batch_size(),
                          weights != nullptr ? *weights : exchange_.weights().const_view());
    }
    if (!eval.ok()) return eval.status();
    eval->set_step(at_step);
    *(validation ? progress_.mutable_validation() : progress_.mutable_eval()) = *eval;
  }
  return absl::OkStatus();
}

// How long the chief's final evaluation waits for the other workers to finish.
constexpr absl::Duration kFinalModelWait = absl::Minutes(30);

absl::Status TrainingLoop::AwaitEveryWorkerLeft() {
  const absl::Time begin = context_.clock->Now();
  const absl::Time deadline = begin + kFinalModelWait;
  absl::Time next_log = begin + absl::Seconds(30);
  // A worker lost for good without a lease (its host died, and the job went on without it)
  // never leaves: once no update has come for this long, none is coming. Long enough for five
  // of the chief's steps and three of its evaluations, which another worker's stop rules make
  // too.
  const absl::Duration quiet =
      std::max({absl::Seconds(10),
                5 * (begin - loop_start_) / std::max<int64_t>(1, progress_.step()),
                3 * longest_evaluation_});
  int64_t updates = -1;
  absl::Time last_update = begin;
  while (true) {
    if (context_.stop->load()) return absl::CancelledError("stopped by request");
    absl::StatusOr<std::vector<JobStats>> stats =
        context_.ps->GetJobStats(spec_.job_id(), spec_.replicas() > 1);
    if (!stats.ok()) return stats.status();
    // Epochs handed out are counted by the first shard, which has seen every worker's pushes.
    if ((*stats)[0].has_handout()) progress_.set_epoch((*stats)[0].handout().epochs_completed());
    // The furthest: a shard that holds no slice takes no step (it stays at the run's first),
    // and SYNC's shards with slices are at most one step apart.
    shards_step_ = (*stats)[0].step();
    for (const JobStats& shard : *stats) shards_step_ = std::max(shards_step_, shard.step());
    std::vector<int> running;
    for (const WorkerStats& worker : (*stats)[0].workers()) {
      bool done = true;  // Left, or lost (its lease ran out), on every shard.
      for (const JobStats& shard : *stats) {
        for (const WorkerStats& other : shard.workers()) {
          if (other.worker() == worker.worker()) done = done && (other.left() || other.lost());
        }
      }
      if (!done) running.push_back(worker.worker());
    }
    if (running.empty()) return absl::OkStatus();
    const absl::Time now = context_.clock->Now();
    const std::string who = absl::StrCat("worker(s) ", absl::StrJoin(running, ", "));
    int64_t applied = 0;
    for (const JobStats& shard : *stats) applied += shard.applied_updates();
    if (applied != updates) {
      updates = applied;
      last_update = now;
    } else if (now - last_update >= quiet) {
      LOG(INFO) << "job " << spec_.job_id() << ": " << who << " had not left, but no update "
                << "came for " << absl::FormatDuration(quiet)
                << "; the final evaluation takes the values as they are";
      return absl::OkStatus();
    }
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(who, " had not finished ", absl::FormatDuration(kFinalModelWait),
                       " after the chief; the final figures are of the values then"));
    }
    if (now >= next_log) {
      LOG(INFO) << "job " << spec_.job_id() << ": the final evaluation waits for " << who
                << " to finish";
      next_log = now + absl::Seconds(30);
    }
    context_.clock->SleepFor(absl::Milliseconds(50));
  }
}

absl::Status TrainingLoop::EvaluateFinalModel() {
  const bool data = job_.sparse != nullptr
                        ? job_.sparse->data().test.num_examples > 0 ||
                              job_.sparse->data().validation.num_examples > 0
                        : job_.data.test.num_examples > 0 || job_.data.validation.num_examples > 0;
  if (!data) return absl::OkStatus();
  // Leaving first: no peer waits for the chief while it waits for them.
  absl::Status status =
      context_.ps->LeaveJob(spec_.job_id(), spec_.run_id(), context_.worker,
                            spec_.replicas() > 1, context_.incarnation);
  if (!status.ok()) return status;
  status = AwaitEveryWorkerLeft();
  if (absl::IsCancelled(status)) return status;
  if (!status.ok()) {
    LOG(WARNING) << "job " << spec_.job_id() << ": " << status;
    if (progress_.note().empty()) progress_.set_note(std::string(status.message()));
  }
  // The final model is the job's: at the job's step where its steps are counted (SYNC: the
  // shards', some of which a backup worker's gradients may have made), else the chief's own.
  const int64_t final_step = exchange_.job_step() >= 0 && shards_step_ >= 0
                                 ? std::min(shards_step_, job_.step_limit)
                                 : progress_.step();
  if (job_.sparse != nullptr) {
    // Its pulls wait for nothing.
    status = Evaluate(final_step, /*sync_step=*/0, /*final=*/true);
  } else {
    HostVariables final_model(job_.variables);
    status = PullCurrentValues(context_.ps, job_.parameters, final_model.mutable_view());
    if (!status.ok()) return status;
    status = Evaluate(final_step, /*sync_step=*/0, /*final=*/true, &final_model.const_view());
  }
  if (!status.ok()) return status;
  context_.report(progress_);
  return absl::OkStatus();
}

absl::Status TrainingLoop::MaybeEvaluate(int64_t step) {
  // Everyone when a stop rule may end the job, else the chief only. The final figures are the
  // chief's evaluation of the final model (EvaluateFinalModel).
  const bool stop_rules = spec_.target_loss() > 0 || spec_.early_stopping_evals() > 0;
  const bool interval = spec_.eval_interval() > 0 && (step + 1) % spec_.eval_interval() == 0;
  if (!(interval && (context_.worker == 0 || stop_rules))) return absl::OkStatus();
  // After this step's push: SYNC's values are those of the job's next step.
  absl::Status evaluated = Evaluate(step + 1, exchange_.job_step() + 1, /*final=*/false);
  if (!evaluated.ok() || !stop_rules) return evaluated;
  const bool validation = job_.has_validation;
  const double loss = validation ? progress_.validation().loss() : progress_.eval().loss();
  const char* judged = validation ? "validation" : "test";
  if (spec_.target_loss() > 0 && loss < spec_.target_loss()) {
    stopped_early_ = true;
    progress_.set_note(absl::StrFormat("stopped at step %d: the %s loss %.6g is below target_loss",
                                       step + 1, judged, loss));
  }
  if (spec_.early_stopping_evals() > 0) {
    if (evaluations_ == 0 || loss < best_loss_) {
      best_loss_ = loss;
      best_step_ = step + 1;
      evaluations_since_best_ = 0;
    } else if (++evaluations_since_best_ >= spec_.early_stopping_evals() && !stopped_early_) {
      stopped_early_ = true;
      progress_.set_note(absl::StrFormat(
          "stopped early at step %d: the %s loss has not fallen below its best, %.6g at step %d, "
          "in %d evaluations (early_stopping_evals)",
          step + 1, judged, best_loss_, best_step_, evaluations_since_best_));
    }
    ++evaluations_;
  }
  return absl::OkStatus();
}

void TrainingLoop::Report(int64_t step, double loss) {
  progress_.set_step(step + 1);
  progress_.set_epoch(job_.sparse != nullptr ? job_.sparse->epochs_completed()
                      : handed_out_.has_value() ? handed_out_->epochs_completed()
                                                : reader_.epochs_completed());
  progress_.set_loss(loss);
  progress_.set_global_step(exchange_.global_step());
  const double elapsed = absl::ToDoubleSeconds(context_.clock->Now() - loop_start_);
  progress_.set_elapsed_seconds(elapsed);
  progress_.set_examples_per_second(elapsed > 0 ? examples_ / elapsed : 0);
  progress_.set_examples(context_.first_step * spec_.batch_size() + examples_);
  progress_.set_staleness(exchange_.mean_staleness());
  progress_.set_compute_seconds(absl::ToDoubleSeconds(compute_time_));
  progress_.set_pull_seconds(absl::ToDoubleSeconds(pull_time_));
  progress_.set_push_seconds(absl::ToDoubleSeconds(push_time_));
  progress_.set_wait_seconds(absl::ToDoubleSeconds(wait_time_));
  progress_.set_communication_seconds(absl::ToDoubleSeconds(pull_time_ + push_time_ + wait_time_));
  progress_.set_device_memory_bytes(context_.backend->DeviceMemoryInUse());
  progress_.set_bytes_sent(exchange_.bytes_sent());
  progress_.set_bytes_received(exchange_.bytes_received());
  context_.report(progress_);
}

// The training proper; RunTrainer adds leaving the job.
absl::Status Train(const TrainerContext& context) {
  // The run's start, for time_limit_s (a worker started again in the run counts from there).
  const absl::Time start = context.clock->Now() - context.elapsed_before;
  absl::StatusOr<std::unique_ptr<PreparedJob>> job = PrepareJob(context);
  if (!job.ok()) return job.status();
  TrainingLoop loop(context, job->get(), start);
  absl::Status status = loop.Run();
  if (!status.ok() || context.worker != 0) return status;
  return loop.EvaluateFinalModel();
}

}  // namespace

absl::Status RunTrainer(const TrainerContext& context) {
  absl::Status status = Train(context);
  // However this worker ends, the others must not wait for it at an SSP bound. Best effort: a
  // ps that is down, or a job that was never created, has nothing to release.
  absl::Status left = context.ps->LeaveJob(context.spec.job_id(), context.spec.run_id(),
                                           context.worker, context.spec.replicas() > 1,
                                           context.incarnation);
  if (!left.ok() && status.ok() && !absl::IsNotFound(left)) {
    LOG(WARNING) << "worker " << context.worker << " could not leave job "
                 << context.spec.job_id() << ": " << left;
  }
  return status;
}

}  // namespace ps
