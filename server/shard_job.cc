#include "server/shard_job.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/tensor/finite.h"
#include "common/job/job_schema.h"
#include "server/consistency/rule_factory.h"
#include "server/initializer.h"
#include "common/job/learning_rate.h"
#include "server/parallel_for.h"

namespace ps {
namespace {

// How far ahead of a worker's last push a push_id may be (pushes in flight at once, arriving
// out of order).
constexpr int64_t kMaxPushIdAhead = 64;

// What a job of `spec` is made of on shard `ps_index` of `num_ps`, before anything of its size
// is allocated; INVALID_ARGUMENT for a spec that cannot be a job.
struct Layout {
  std::unique_ptr<Optimizer> optimizer;
  Placement placement;
};

absl::StatusOr<Layout> LayOut(const ParameterSpec& spec, int num_ps, int ps_index) {
  absl::Status status = ValidateParameterSpec(spec);
  if (!status.ok()) return status;
  if (ps_index < 0 || ps_index >= num_ps) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps_index ", ps_index, " is out of range for num_ps ", num_ps));
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = Optimizer::Create(spec.optimizer());
  if (!optimizer.ok()) {
    return absl::InvalidArgumentError(JobPrefix(spec.job_id()) +
                                      std::string(optimizer.status().message()));
  }
  absl::StatusOr<Placement> placement = PlaceVariables(spec, num_ps);
  if (!placement.ok()) {
    return absl::InvalidArgumentError(JobPrefix(spec.job_id()) +
                                      std::string(placement.status().message()));
  }
  return Layout{*std::move(optimizer), *std::move(placement)};
}

}  // namespace

absl::StatusOr<int64_t> ShardJob::MemoryBytes(const ParameterSpec& spec, int num_ps, int ps_index) {
  absl::StatusOr<Layout> layout = LayOut(spec, num_ps, ps_index);
  if (!layout.ok()) return layout.status();
  int64_t elements = 0;
  for (int index : layout->placement.SlicesOn(ps_index)) {
    elements += layout->placement.slices[index].num_elements();
  }
  // Per worker: counters, lease and incarnation state, a staleness histogram.
  constexpr int64_t kWorkerBytes = 1024;
  return 2 * elements * static_cast<int64_t>(sizeof(float)) *
             (1 + layout->optimizer->num_slots()) +
         spec.num_workers() * kWorkerBytes;
}

absl::StatusOr<std::unique_ptr<ShardJob>> ShardJob::Create(const ParameterSpec& spec, int num_ps,
                                                           int ps_index, Clock* clock) {
  absl::StatusOr<Layout> layout = LayOut(spec, num_ps, ps_index);
  if (!layout.ok()) return layout.status();
  const Placement* placement = &layout->placement;
  std::unique_ptr<ConsistencyRule> rule = CreateConsistencyRule(spec);
  if (rule == nullptr) {
    return absl::InternalError(JobPrefix(spec.job_id()) + "no consistency rule for mode " +
                               ConsistencyConfig::Mode_Name(spec.consistency().mode()));
  }
  std::unique_ptr<ShardJob> job(
      new ShardJob(spec, num_ps, ps_index, clock, std::move(layout->optimizer), std::move(rule)));
  // A spare buffer for the values and each slot of every slice (copied on write).
  job->value_buffers_ = BufferPool::Create(std::max<size_t>(
      1, placement->SlicesOn(ps_index).size() * (1 + job->optimizer_->num_slots())));
  for (int index : placement->SlicesOn(ps_index)) {
    auto slice = std::make_unique<Slice>();
    slice->placement = placement->slices[index];
    slice->offset = job->num_elements_;
    job->num_elements_ += slice->placement.num_elements();
    absl::MutexLock lock(&slice->mu);
    slice->values = std::make_shared<Values>();
    slice->values->buffer = job->value_buffers_->Acquire(slice->placement.num_elements());
    InitializeSlice(spec.variables(slice->placement.variable_index), slice->placement, spec.seed(),
                    absl::MakeSpan(*slice->values->buffer));
    std::vector<absl::Span<float>> slots;
    for (int s = 0; s < job->optimizer_->num_slots(); ++s) {
      auto slot = std::make_shared<Values>();
      slot->buffer = job->value_buffers_->Acquire(slice->placement.num_elements());
      slots.push_back(absl::MakeSpan(*slot->buffer));
      slice->slots.push_back(std::move(slot));
    }
    job->optimizer_->InitializeSlots(slots);
    job->slices_.push_back(std::move(slice));
  }
  absl::StatusOr<std::unique_ptr<ShardSparseTables>> sparse =
      ShardSparseTables::Create(spec, num_ps, ps_index);
  if (!sparse.ok()) return sparse.status();
  job->sparse_ = *std::move(sparse);
  return job;
}

ShardJob::ShardJob(const ParameterSpec& spec, int num_ps, int ps_index, Clock* clock,
                   std::unique_ptr<Optimizer> optimizer, std::unique_ptr<ConsistencyRule> rule)
    : spec_now_(nullptr),
      num_ps_(num_ps),
      ps_index_(ps_index),
      clock_(clock),
      trace_(spec.trace() ? std::make_unique<TraceRecorder>(clock) : nullptr),
      optimizer_(std::move(optimizer)),
      aggregates_(rule->aggregates()),
      served_delay_(rule->served_delay()),
      rule_(std::move(rule)),
      // Each lease runs from the start.
      leases_(spec.num_workers(), absl::Milliseconds(spec.worker_lease_ms()), clock) {
  {
    absl::MutexLock lock(&chunks_mu_);
    assemblies_.resize(spec.num_workers());
  }
  absl::MutexLock lock(&mu_);
  specs_.push_back(std::make_unique<const ParameterSpec>(spec));
  spec_now_.store(specs_.back().get(), std::memory_order_release);
  parked_pushes_.assign(spec.num_workers(), 0);
  last_push_id_.assign(spec.num_workers(), 0);
  applied_by_worker_.assign(spec.num_workers(), 0);
  staleness_by_worker_.resize(spec.num_workers());
  incarnation_.assign(spec.num_workers(), 0);
  steps_pushed_.assign(spec.num_workers(), 0);
  if (spec.has_data_handout() && ps_index == 0) {
    handout_ = std::make_unique<DataHandout>(spec.data_handout(), spec.num_workers());
  }
}

ShardJob::~ShardJob() = default;

std::string ShardJob::RangeText(int64_t begin, int64_t count) {
  int64_t end = 0;
  if (__builtin_add_overflow(begin, count, &end)) {
    return absl::StrCat("[", begin, ", ", begin, " + ", count, ")");
  }
  return absl::StrCat("[", begin, ", ", end, ")");
}

std::vector<SliceRef> ShardJob::SliceRefs() const {
  std::vector<SliceRef> refs;
  for (const auto& slice : slices_) {
    SliceRef ref;
    ref.set_variable(slice->placement.variable);
    ref.set_row_begin(slice->placement.row_begin);
    ref.set_row_count(slice->placement.row_count);
    refs.push_back(ref);
  }
  return refs;
}

int64_t ShardJob::num_parameters() const { return num_elements_; }

absl::Status ShardJob::SetInitialValues(
    const google::protobuf::RepeatedPtrField<SliceValues>& values) {
  const std::string prefix = JobPrefix(spec().job_id()) + "the chief's initial values: ";
  std::vector<const SliceValues*> by_slice(slices_.size(), nullptr);
  for (const SliceValues& given : values) {
    const SliceRef& ref = given.slice();
    const std::string name = absl::StrCat(ref.variable(), " rows [", ref.row_begin(), ", ",
                                          ref.row_begin() + ref.row_count(), ")");
    auto held = std::find_if(slices_.begin(), slices_.end(), [&ref](const auto& slice) {
      return slice->placement.variable == ref.variable() &&
             slice->placement.row_begin == ref.row_begin() &&
             slice->placement.row_count == ref.row_count();
    });
    if (held == slices_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "slice ", name, " is not one of ps:", ps_index_,
          "'s; the chief must place the variables as the shards do (the same ParameterSpec)"));
    }
    const size_t index = held - slices_.begin();
    if (by_slice[index] != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, "slice ", name, " is given twice"));
    }
    if (given.values_size() != (*held)->placement.num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, "slice ", name, " has ",
                                                     given.values_size(), " values, not ",
                                                     (*held)->placement.num_elements()));
    }
    const int64_t bad = FirstNonFinite(given.values());
    if (bad >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, "slice ", name, " has ",
                                                     given.values(bad), " at element ", bad,
                                                     "; a model starts from finite values"));
    }
    by_slice[index] = &given;
  }
  for (size_t i = 0; i < slices_.size(); ++i) {
    if (by_slice[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "no values for slice ", slices_[i]->placement.variable, " rows [",
                       slices_[i]->placement.row_begin, ", ",
                       slices_[i]->placement.row_begin + slices_[i]->placement.row_count,
                       ") of ps:", ps_index_));
    }
  }
  for (size_t i = 0; i < slices_.size(); ++i) {
    absl::MutexLock lock(&slices_[i]->mu);
    std::copy(by_slice[i]->values().begin(), by_slice[i]->values().end(),
              slices_[i]->values->buffer->begin());
  }
  return absl::OkStatus();
}

absl::Status ShardJob::CheckPushSlices(const PushRequestHeader& header) {
  bool matches = header.slices_size() == static_cast<int>(slices_.size());
  for (size_t i = 0; matches && i < slices_.size(); ++i) {
    const SliceRef& ref = header.slices(static_cast<int>(i));
    const SlicePlacement& p = slices_[i]->placement;
    matches = ref.variable() == p.variable && ref.row_begin() == p.row_begin &&
              ref.row_count() == p.row_count;
  }
  if (matches) return absl::OkStatus();
  std::vector<std::string> expected;
  for (const auto& slice : slices_) {
    expected.push_back(absl::StrCat(slice->placement.variable, "[", slice->placement.row_begin, ":",
                                    slice->placement.row_begin + slice->placement.row_count, "]"));
  }
  CountRejected("shape");
  return absl::InvalidArgumentError(absl::StrCat(
      JobPrefix(spec().job_id()), "the push's slices do not match this shard's placement (ps:",
      ps_index_, " holds ", absl::StrJoin(expected, ", "),
      "); compute the placement from the same spec and number of ps tasks"));
}

absl::Status ShardJob::CheckRun(const std::string& run_id, absl::string_view what) const {
  if (run_id == spec().run_id()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      JobPrefix(spec().job_id()), "a ", what, " of run \"", run_id, "\" reached run \"",
      spec().run_id(),
      "\" of this job id; a worker of another submission is still running: stop it (psctl stop) "
      "before the job id is submitted again"));
}

absl::Status ShardJob::CheckPushSender(const PushRequestHeader& header) {
  std::string prefix = JobPrefix(spec().job_id());
  absl::Status run = CheckRun(header.run_id(), "push");
  if (!run.ok()) {
    CountRejected("run");
    return run;
  }
  if (header.worker() < 0 || header.worker() >= spec().num_workers()) {
    CountRejected("worker");
    return absl::InvalidArgumentError(absl::StrCat(prefix, "worker ", header.worker(),
                                                   " is out of range: the job has ",
                                                   spec().num_workers(), " workers"));
  }
  if (header.push_id() < 1) {
    CountRejected("push_id");
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "push_id is ", header.push_id(),
                     ": number each worker's pushes from 1 up, so that retries can be recognized"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<std::vector<float>>> ShardJob::PushBuffer(
    const PushRequestHeader& header, std::vector<absl::Span<float>>* destinations) {
  absl::Status status = CheckPushSlices(header);
  if (!status.ok()) return status;
  status = sparse_->Check(header.sparse(), /*distinct=*/true);
  if (!status.ok()) {
    CountRejected("sparse");
    return status;
  }
  const int64_t sparse = sparse_->Floats(header.sparse());
  std::shared_ptr<std::vector<float>> buffer =
      sparse == 0 ? AcquirePushBuffer(num_elements_, PushGroup(header))
                  : Charged(std::make_shared<std::vector<float>>(num_elements_ + sparse),
                            PushGroup(header));
  destinations->clear();
  for (const auto& slice : slices_) {
    destinations->emplace_back(buffer->data() + slice->offset, slice->placement.num_elements());
  }
  if (sparse > 0) destinations->emplace_back(buffer->data() + num_elements_, sparse);
  return buffer;
}

void ShardJob::UseByteBudget(std::shared_ptr<ByteBudget> budget) {
  absl::MutexLock lock(&budget_mu_);
  byte_budget_ = std::move(budget);
}

std::string ShardJob::PushGroup(const PushRequestHeader& header) {
  if (!IsChunk(header) && header.push_id() == 0) return "";
  return absl::StrCat(header.job_id(), "/", header.has_shard() ? header.shard() : -1, "/",
                      header.worker(), "/", header.incarnation(), "/", header.push_id());
}

std::shared_ptr<void> ShardJob::ParkPush(std::shared_ptr<ShardJob> job, int worker) {
  {
    absl::MutexLock lock(&job->mu_);
    if (worker < 0 || worker >= static_cast<int>(job->parked_pushes_.size())) return nullptr;
    ++job->parked_pushes_[worker];
  }
  ShardJob* raw = job.get();
  return std::shared_ptr<void>(raw, [job = std::move(job), worker](void*) {
    absl::MutexLock lock(&job->mu_);
    --job->parked_pushes_[worker];
  });
}

std::shared_ptr<std::vector<float>> ShardJob::AcquirePushBuffer(size_t floats,
                                                                const std::string& group) {
  return Charged(push_buffers_->Acquire(floats), group);
}

std::shared_ptr<std::vector<float>> ShardJob::Charged(std::shared_ptr<std::vector<float>> buffer,
                                                      const std::string& group) {
  ByteBudget::Charge charge;
  {
    absl::MutexLock lock(&budget_mu_);
    if (byte_budget_ != nullptr) {
      charge =
          byte_budget_->ChargeBuffer(static_cast<int64_t>(buffer->size() * sizeof(float)), group);
    }
  }
  if (charge == nullptr) return buffer;
  // The same buffer, whose last owner gives it back to the pool and the bytes to the budget.
  std::vector<float>* raw = buffer.get();
  return std::shared_ptr<std::vector<float>>(
      raw, [buffer = std::move(buffer), charge = std::move(charge)](std::vector<float>*) {});
}

PushResponse ShardJob::DuplicateLocked(bool count) {
  if (count) ++duplicate_pushes_;
  PushResponse response;
  response.set_outcome(PushResponse::DUPLICATE);
  response.set_version(version_);
  response.set_step(rule_->step());
  return response;
}

void ShardJob::CountRejected(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  ++rejected_[reason];
}

absl::Status ShardJob::RejectLocked(const std::string& reason, absl::Status status) {
  ++rejected_[reason];
  return status;
}

std::string ShardJob::FindNonFinite(absl::Span<const float> gradient) const {
  if (AllFinite(gradient)) return "";
  for (const auto& slice : slices_) {
    const SlicePlacement& p = slice->placement;
    const int64_t i = FirstNonFinite(gradient.subspan(slice->offset, p.num_elements()));
    if (i >= 0) {
      return absl::StrCat(std::isnan(gradient[slice->offset + i]) ? "NaN" : "Inf",
                          " in variable \"", p.variable, "\" at row ", p.row_begin + i / p.row_size,
                          ", column ", i % p.row_size);
    }
  }
  return "";
}

absl::Status ShardJob::CheckIncarnationLocked(int worker, int incarnation) {
  if (incarnation < 0) {  // OBSERVER_INCARNATION reads; it is no worker's process.
    return RejectLocked("incarnation",
                        absl::InvalidArgumentError(absl::StrCat(
                            JobPrefix(spec().job_id()), "a request of worker ", worker,
                            " at incarnation ", incarnation, ": a worker's processes are "
                            "incarnations 0, 1, 2, ... (StartJobRequest.incarnation)")));
  }
  if (incarnation >= incarnation_[worker]) return absl::OkStatus();
  return RejectLocked("incarnation", absl::FailedPreconditionError(absl::StrCat(
                                         JobPrefix(spec().job_id()), "a request of worker ",
                                         worker, "'s incarnation ", incarnation,
                                         ", which incarnation ", incarnation_[worker],
                                         " has replaced in this run: stop the older process")));
}

absl::Status ShardJob::AdoptIncarnationLocked(int worker, int incarnation, int64_t clock) {
  absl::Status status = CheckIncarnationLocked(worker, incarnation);
  if (!status.ok() || incarnation == incarnation_[worker]) return status;
  incarnation_[worker] = incarnation;
  last_push_id_[worker] = 0;
  leases_.Rejoined(worker);
  rule_->Rejoin(worker, clock);
  return absl::OkStatus();
}

absl::StatusOr<PushDecision::Action> ShardJob::AdmitLocked(const PushRequestHeader& header,
                                                           PushResponse* response) {
  const std::string prefix = JobPrefix(spec().job_id());
  HeardLocked(header.worker());
  steps_pushed_[header.worker()] = std::max(steps_pushed_[header.worker()], header.clock() + 1);
  if (header.read_version() < 0 || header.read_version() > version_) {
    return RejectLocked("future_version", absl::InvalidArgumentError(absl::StrCat(
                                              prefix, "read_version ", header.read_version(),
                                              " is not a version this shard has had (it is at ",
                                              version_, "); send the version the pull returned")));
  }
  if (handout_ != nullptr) {
    if (header.batches().empty()) {
      return RejectLocked("batches", absl::InvalidArgumentError(absl::StrCat(
                                         prefix, "the push names no batches: a job whose data is "
                                                 "handed out takes gradients only of the batches "
                                                 "NextBatches gave the worker")));
    }
    absl::Status held = handout_->CheckHeld(header.worker(), header.batches());
    if (!held.ok()) {
      return RejectLocked("batches",
                          absl::Status(held.code(), prefix + std::string(held.message())));
    }
  }
  const int64_t staleness = version_ - header.read_version();
  response->set_staleness(staleness);
  response->set_version(version_);
  response->set_step(rule_->step());
  // A batch this shard took before (its first worker died mid-push, or was taken for lost and
  // pushed late, and the first shard handed the batch out again) is not trained on twice: the
  // rule takes it for its bookkeeping (ConsistencyRule::AdmitRepeat).
  const bool repeat = spec().has_data_handout() && seen_batches_.AllSeen(header.batches());
  PushDecision decision =
      repeat ? rule_->AdmitRepeat(header, staleness) : rule_->Admit(header, staleness);
  if (decision.action == PushDecision::kReject) {
    return RejectLocked(
        decision.reason,
        absl::Status(decision.status.code(), prefix + std::string(decision.status.message())));
  }
  last_push_id_[header.worker()] = header.push_id();
  if (spec().has_data_handout()) seen_batches_.Add(header.batches());
  // A SYNC repeat in the open step (Contribution::repeat): counted with the drops, as no part of
  // the mean.
  if (repeat && decision.action != PushDecision::kDrop) ++dropped_["batch_seen"];
  if (decision.action == PushDecision::kDrop) {
    ++dropped_[decision.reason];
    response->set_outcome(PushResponse::DROPPED);
    response->set_drop_reason(decision.reason);
  }
  // Used, applied or not: a drop is the shard's own decision (another shard may have taken the
  // same gradient), so handing the batch out again could train on it twice there.
  if (handout_ != nullptr) handout_->Trained(header.worker(), header.batches());
  return decision.action;
}

absl::StatusOr<PushResponse> ShardJob::Push(const PushRequestHeader& header,
                                            absl::Span<const float> gradient, bool known_finite) {
  std::string prefix = JobPrefix(spec().job_id());
  absl::Status sender = CheckPushSender(header);
  if (!sender.ok()) return sender;
  const int worker = header.worker();
  absl::Status sparse = sparse_->Check(header.sparse(), /*distinct=*/true);
  if (!sparse.ok()) {
    CountRejected("sparse");
    return sparse;
  }
  const int64_t sparse_floats = sparse_->Floats(header.sparse());
  if (static_cast<int64_t>(gradient.size()) != num_elements_ + sparse_floats) {
    CountRejected("shape");
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "the gradient has ", gradient.size(), " values; this shard holds ",
        num_elements_, sparse_floats > 0 ? absl::StrCat(" and the push names ", sparse_floats,
                                                        " of sparse rows")
                                         : ""));
  }
  {
    // Checked again where the push is admitted, since a retry may arrive while the first
    // attempt is still being handled; this early check skips the work for most retries.
    absl::MutexLock lock(&mu_);
    absl::Status incarnation = CheckIncarnationLocked(worker, header.incarnation());
    if (!incarnation.ok()) return incarnation;
    const int64_t last_push_id = LastPushIdLocked(worker, header.incarnation());
    if (header.push_id() <= last_push_id) return DuplicateLocked();
    // A worker numbers its pushes 1, 2, 3, ...; one far ahead would make the shard take every
    // later push of the real worker for a retry and drop it.
    if (header.push_id() > last_push_id + kMaxPushIdAhead) {
      ++rejected_["push_id_jump"];
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "push_id ", header.push_id(), " of worker ", worker,
                       " is more than ", kMaxPushIdAhead, " ahead of its last, ", last_push_id,
                       ": a worker numbers its pushes one by one"));
    }
  }
  if (!spec().allow_non_finite() && !known_finite) {
    std::string where = FindNonFinite(gradient);
    if (where.empty()) {
      where = sparse_->FindNonFinite(header.sparse(), gradient.subspan(num_elements_));
    }
    if (!where.empty()) {
      CountRejected("non_finite");
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "the gradient from worker ", worker, " has ", where,
                       "; nothing was applied (lower the learning rate, or set allow_non_finite)"));
    }
  }
  if (replaying_) return QueueForReplay(header, gradient);
  if (aggregates_) {
    absl::MutexLock lock(&aggregate_mu_);
    return Aggregate(header, gradient);
  }
  return ApplyNow(header, gradient);
}

absl::StatusOr<PushResponse> ShardJob::ApplyNow(const PushRequestHeader& header,
                                                absl::Span<const float> gradient) {
  const int worker = header.worker();
  absl::Time began;  // Once the update may start: not the waits for the locks or a checkpoint.
  PushResponse response;
  int64_t staleness;
  float learning_rate;
  bool assign;
  // Recording: one update at a time, each whole before the next pull (see GetApplyLog).
  std::optional<absl::MutexLock> order;
  if (recording()) order.emplace(&order_mu_);
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &ShardJob::NotCheckpointingLocked));
    began = TraceStart();
    absl::Status incarnation = AdoptIncarnationLocked(worker, header.incarnation(), header.clock());
    if (!incarnation.ok()) return incarnation;
    if (header.push_id() <= last_push_id_[worker]) return DuplicateLocked();
    absl::StatusOr<PushDecision::Action> action = AdmitLocked(header, &response);
    if (!action.ok()) return action.status();
    if (*action == PushDecision::kDrop) {
      if (recording()) {
        order_mu_.AssertHeld();  // Taken above when recording.
        log_.push_back(UpdateEntry(header, ApplyLogEntry::DROP, 0, response.drop_reason()));
      }
      TraceUpdate(TraceEvent::DROP, began, header.clock(), worker, response.staleness(),
                  version_);
      return response;
    }
    staleness = response.staleness();
    assign = *action == PushDecision::kAssign;
    learning_rate =
        assign ? 0 : rule_->LearningRate(spec().learning_rate(), updates_started_++, staleness);
    ++applying_;
  }
  if (assign) {
    AssignToSlices(gradient);
  } else {
    ApplyUpdate(learning_rate, header, gradient);
  }
  std::vector<Waiter> ready;
  std::vector<ArmedCheckpoint> due;
  {
    absl::MutexLock lock(&mu_);
    CountAppliedLocked(worker, staleness);
    rule_->Applied(header);
    --applying_;
    response.set_outcome(PushResponse::APPLIED);
    response.set_version(version_);
    ready = TakeReadyWaitersLocked();
    due = TakeDueLocked();
  }
  if (recording()) {
    order_mu_.AssertHeld();  // Taken above when recording.
    log_.push_back(UpdateEntry(header, ApplyLogEntry::APPLY, learning_rate, ""));
  }
  TraceUpdate(TraceEvent::APPLY, began, header.clock(), worker, staleness, response.version());
  order.reset();  // Before answering pulls: their snapshots take the order too.
  Complete(std::move(ready));
  for (ArmedCheckpoint& armed : due) TakeCheckpoint(std::move(armed));
  return response;
}

absl::StatusOr<PushResponse> ShardJob::Aggregate(const PushRequestHeader& header,
                                                 absl::Span<const float> gradient) {
  const int worker = header.worker();
  const absl::Time began = TraceStart();
  PushResponse response;
  bool first;
  bool last;
  bool repeat;
  float learning_rate = 0;
  {
    absl::MutexLock lock(&mu_);
    absl::Status incarnation = AdoptIncarnationLocked(worker, header.incarnation(), header.clock());
    if (!incarnation.ok()) return incarnation;
    if (header.push_id() <= last_push_id_[worker]) return DuplicateLocked();
    absl::StatusOr<PushDecision::Action> action = AdmitLocked(header, &response);
    if (!action.ok()) return action.status();
    if (*action == PushDecision::kDrop) {
      TraceUpdate(TraceEvent::DROP, began, header.clock(), worker, response.staleness(),
                  version_);
      return response;
    }
    first = rule_->open_aggregate().size() == 1;
    repeat = rule_->open_aggregate().back().repeat;
    last = *action == PushDecision::kApplyAggregate;
    if (last) learning_rate = NextAggregateLearningRateLocked();
  }
  // sum_ holds the sum of the open aggregate's gradients that are not repeats (zeros while
  // there are none), sized to the shard from its first contribution on.
  if (repeat) {
    if (first) {
      sum_.assign(static_cast<size_t>(num_elements_), 0.0f);
      sparse_->Accumulate(ShardSparseTables::Entries(), {}, /*first=*/true);
    }
  } else if (first) {
    sum_.assign(gradient.begin(), gradient.begin() + num_elements_);
  } else {
    for (size_t i = 0; i < sum_.size(); ++i) sum_[i] += gradient[i];
  }
  if (!repeat) sparse_->Accumulate(header.sparse(), gradient.subspan(num_elements_), first);
  TraceUpdate(repeat ? TraceEvent::DROP : TraceEvent::ACCUMULATE, began, header.clock(), worker,
              response.staleness(), response.version());
  if (!last) {
    response.set_outcome(PushResponse::ACCUMULATED);
    return response;
  }
  ApplyAggregate(learning_rate, &response);
  return response;
}

float ShardJob::NextAggregateLearningRateLocked() {
  return rule_->LearningRate(spec().learning_rate(), updates_started_++, /*staleness=*/0);
}

void ShardJob::ApplyAggregate(float learning_rate, PushResponse* response) {
  const absl::Time began = TraceStart();
  size_t count;
  int64_t step;
  int64_t most_stale = 0;  // Of the aggregate's gradients, for the trace.
  int64_t version;
  {
    absl::MutexLock lock(&mu_);
    count = static_cast<size_t>(rule_->SummedContributions());
    step = rule_->step();
  }
  // An aggregate of repeats only (each of its batches trained on here before) completes its
  // step and changes no value.
  if (count > 0) {
    const float scale = 1.0f / static_cast<float>(count);
    for (float& value : sum_) value *= scale;
    ApplyToSlices(learning_rate, sum_);
    sparse_->ApplySums(learning_rate, scale);
  }
  std::vector<Waiter> ready;
  std::vector<ArmedCheckpoint> due;
  {
    absl::MutexLock lock(&mu_);
    const std::vector<Contribution> applied = rule_->TakeAggregate();
    for (const Contribution& c : applied) {
      if (c.repeat) continue;  // Counted as dropped (batch_seen) when it came.
      int64_t staleness = version_ - c.read_version;
      staleness_.Record(staleness);
      staleness_by_worker_[c.worker].Record(staleness);
      ++applied_by_worker_[c.worker];
      most_stale = std::max(most_stale, staleness);
    }
    applied_gradients_ += static_cast<int64_t>(count);
    ++version_;
    version = version_;
    if (response != nullptr) {
      response->set_outcome(PushResponse::APPLIED);
      response->set_version(version_);
      response->set_step(rule_->step());
    }
    ready = TakeReadyWaitersLocked();
    due = TakeDueLocked();
  }
  TraceUpdate(TraceEvent::APPLY, began, step, /*worker=*/-1, most_stale, version);
  Complete(std::move(ready));
  // The next aggregate waits for aggregate_mu_, held here: the checkpoint is of this step.
  for (ArmedCheckpoint& armed : due) TakeCheckpoint(std::move(armed));
}

ShardJob::ValuesReader::ValuesReader(std::shared_ptr<Values> values) : values_(std::move(values)) {
  values_->readers.fetch_add(1, std::memory_order_relaxed);  // Under the slice's lock.
}

ShardJob::ValuesReader::~ValuesReader() {
  // Orders this reader's last read of the buffer before a later write in place.
  values_->readers.fetch_sub(1, std::memory_order_release);
}

absl::Span<float> ShardJob::WritableLocked(std::shared_ptr<Values>& values) {
  if (values->readers.load(std::memory_order_acquire) > 0) {
    auto fresh = std::make_shared<Values>();
    fresh->buffer = value_buffers_->Acquire(values->buffer->size());
    std::copy(values->buffer->begin(), values->buffer->end(), fresh->buffer->begin());
    values = std::move(fresh);  // The readers keep the old one until they are done.
  }
  return absl::MakeSpan(*values->buffer);
}

absl::Span<float> ShardJob::ValuesToUpdateLocked(Slice& slice) {
  if (served_delay_ > 0) {
    slice.history.push_front(std::make_unique<ValuesReader>(slice.values));
    if (static_cast<int>(slice.history.size()) > served_delay_) slice.history.pop_back();
  }
  return WritableLocked(slice.values);
}

void ShardJob::CountAppliedLocked(int worker, int64_t staleness) {
  ++version_;
  ++applied_gradients_;
  ++applied_by_worker_[worker];
  staleness_.Record(staleness);
  staleness_by_worker_[worker].Record(staleness);
}

void ShardJob::ApplyUpdate(float learning_rate, const PushRequestHeader& header,
                           absl::Span<const float> gradient) {
  ApplyToSlices(learning_rate, gradient);
  sparse_->Apply(learning_rate, header.sparse(), gradient.subspan(num_elements_));
}

void ShardJob::ApplyToSlices(float learning_rate, absl::Span<const float> gradient) {
  // Below this many floats (1 MiB) an update stays on the calling thread.
  constexpr int64_t kParallelGrain = 1 << 18;
  for (const auto& slice : slices_) {
    absl::MutexLock lock(&slice->mu);
    const absl::Span<const float> slice_gradient =
        gradient.subspan(slice->offset, slice->placement.num_elements());
    const absl::Span<float> values = ValuesToUpdateLocked(*slice);
    std::vector<absl::Span<float>> slot_values;
    for (std::shared_ptr<Values>& slot : slice->slots) slot_values.push_back(WritableLocked(slot));
    const int64_t update_count = slice->update_count++;
    // The optimizers are elementwise: disjoint ranges update in parallel.
    ParallelFor(static_cast<int64_t>(values.size()), kParallelGrain,
                [&](int64_t begin, int64_t end) {
                  const size_t length = static_cast<size_t>(end - begin);
                  std::vector<absl::Span<float>> slots;
                  for (absl::Span<float> slot : slot_values) {
                    slots.push_back(slot.subspan(begin, length));
                  }
                  optimizer_->Apply(learning_rate, slice_gradient.subspan(begin, length),
                                    values.subspan(begin, length), slots, update_count);
                });
  }
}

void ShardJob::AssignToSlices(absl::Span<const float> values) {
  for (const auto& slice : slices_) {
    absl::MutexLock lock(&slice->mu);
    const absl::Span<const float> source =
        values.subspan(slice->offset, slice->placement.num_elements());
    const absl::Span<float> destination = ValuesToUpdateLocked(*slice);
    std::copy(source.begin(), source.end(), destination.begin());
  }
}

Trace ShardJob::GetTrace(const TraceRequest& request) const {
  return trace_ != nullptr ? trace_->Snapshot(request) : Trace();
}

void ShardJob::TraceUpdate(TraceEvent::Kind kind, absl::Time began, int64_t step, int worker,
                           int64_t staleness, int64_t version) const {
  if (trace_ == nullptr) return;
  trace_->Record(kind, began, kind == TraceEvent::DROP ? began : clock_->Now(), step, worker,
                 staleness, version);
}

JobStats ShardJob::Stats() const {
  JobStats stats;
  stats.set_job_id(spec().job_id());
  stats.set_ps_index(ps_index_);
  stats.set_mode(spec().consistency().mode());
  *stats.mutable_spec() = spec();
  for (const SliceRef& ref : SliceRefs()) *stats.add_slices() = ref;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, rows] : sparse_->RowCounts()) (*stats.mutable_sparse_rows())[name] = rows;
  if (handout_ != nullptr) *stats.mutable_handout() = handout_->Stats();
  stats.set_version(version_);
  stats.set_step(rule_->step());
  stats.set_applied_updates(version_);
  stats.set_applied_gradients(applied_gradients_);
  stats.set_duplicate_pushes(duplicate_pushes_);
  for (const auto& [reason, count] : dropped_) (*stats.mutable_dropped())[reason] = count;
  for (const auto& [reason, count] : rejected_) (*stats.mutable_rejected())[reason] = count;
  staleness_.ToProto(stats.mutable_staleness());
  for (int w = 0; w < spec().num_workers(); ++w) {
    WorkerStats* worker = stats.add_workers();
    worker->set_worker(w);
    worker->set_clock(rule_->clock(w));
    worker->set_left(rule_->left(w));
    worker->set_lost(leases_.lost(w));
    worker->set_last_push_id(last_push_id_[w]);
    worker->set_applied(applied_by_worker_[w]);
    staleness_by_worker_[w].ToProto(worker->mutable_staleness());
  }
  for (int w : rule_->WaitingFor()) stats.add_waiting_for(w);
  stats.set_parked_pulls(static_cast<int64_t>(waiters_.size()));
  if (!waiters_.empty()) {
    absl::Time oldest = absl::InfiniteFuture();
    for (const auto& [id, waiter] : waiters_) oldest = std::min(oldest, waiter.parked_at);
    stats.set_oldest_parked_pull_ms(absl::ToInt64Milliseconds(clock_->Now() - oldest));
  }
  stats.set_bytes_received(traffic_.bytes_received());
  stats.set_bytes_sent(traffic_.bytes_sent());
  checkpoints_.AddTo(&stats);
  stats.set_checkpoint_clock(rule_->checkpoint_clock(version_));
  return stats;
}

}  // namespace ps
