// ShardJob's pull side: validating pulls, the conditions under which they wait, parked pulls
// and their completion, snapshots, and workers leaving. The push side is in shard_job.cc.
#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/job/consistency_modes.h"
#include "server/shard_job.h"

namespace ps {

absl::Status ShardJob::ValidatePull(const PullRequest& request,
                                    std::vector<PullRange>* ranges) const {
  std::string prefix = JobPrefix(spec().job_id());
  absl::Status run = CheckRun(request.run_id(), "pull");
  if (!run.ok()) return run;
  if (request.worker() < 0 || request.worker() >= spec().num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "worker ", request.worker(),
                                                   " is out of range: the job has ",
                                                   spec().num_workers(), " workers"));
  }
  if (request.step() < 0 || request.clock() < 0) {
    return absl::InvalidArgumentError(prefix + "step and clock must be >= 0");
  }
  if (!TensorEncoding_IsValid(request.encoding())) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "the pull asks for encoding ", request.encoding(),
        ", which this ps does not know: ask for FLOAT32, FLOAT16 or BFLOAT16"));
  }
  absl::Status sparse = sparse_->Check(request.sparse(), /*distinct=*/false);
  if (!sparse.ok()) return sparse;
  if (request.slices().empty()) {
    for (size_t i = 0; i < slices_.size(); ++i) {
      ranges->push_back({static_cast<int>(i), slices_[i]->placement.row_begin,
                         slices_[i]->placement.row_count});
    }
    return absl::OkStatus();
  }
  // A pull reads each row once at most: its ranges hold no more than the shard, so a small
  // request cannot ask for an answer of many times the shard's size.
  int64_t elements = 0;
  for (const SliceRef& ref : request.slices()) {
    bool found = false;
    for (size_t i = 0; i < slices_.size() && !found; ++i) {
      const SlicePlacement& p = slices_[i]->placement;
      // row_begin + row_count, from the request, could overflow: compared the other way.
      if (p.variable == ref.variable() && ref.row_begin() >= p.row_begin && ref.row_count() > 0 &&
          ref.row_count() <= p.row_count &&
          ref.row_begin() <= p.row_begin + p.row_count - ref.row_count()) {
        elements += ref.row_count() * p.row_size;
        if (elements > num_elements_) {
          return absl::InvalidArgumentError(absl::StrCat(
              prefix, "the pull's ", request.slices_size(), " slices ask for more than the ",
              num_elements_, " floats ps:", ps_index_,
              " holds of the job; ask for each row once at most"));
        }
        ranges->push_back({static_cast<int>(i), ref.row_begin(), ref.row_count()});
        found = true;
      }
    }
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "rows ", RangeText(ref.row_begin(), ref.row_count()), " of variable \"",
          ref.variable(), "\" are not inside one slice on ps:", ps_index_,
          "; compute the placement with the same spec and number of ps tasks"));
    }
  }
  return absl::OkStatus();
}

int64_t ShardJob::Pull(const PullRequest& request, PullCallback done) {
  std::vector<PullRange> ranges;
  absl::Status status = ValidatePull(request, &ranges);
  if (!status.ok()) {
    done(status);
    return 0;
  }
  int64_t replayed_id = 0;  // A replay: parked for its turn in the log.
  {
    absl::MutexLock lock(&mu_);
    const bool observer = request.incarnation() == OBSERVER_INCARNATION;
    if (!observer) {
      status = AdoptIncarnationLocked(request.worker(), request.incarnation(), request.clock());
    }
    if (status.ok()) {
      if (!observer) HeardLocked(request.worker());
      const bool replayed = replaying_ && !observer;
      if (replayed || !rule_->PullReady(request)) {
        if (!closed_.ok()) {
          status = closed_;  // Nothing would wake it here.
        } else {
          const int64_t id = next_waiter_id_++;
          waiters_.emplace(id, Waiter{request, std::move(done), clock_->Now()});
          if (!replayed) return id;
          replayed_id = id;
        }
      }
    }
  }
  if (replayed_id != 0) {
    AdvanceReplay();  // Served here if its turn has come.
    return replayed_id;
  }
  if (!status.ok()) {
    done(status);
    return 0;
  }
  done(Snapshot(request));
  return 0;
}

ShardJob::PullSnapshot ShardJob::Snapshot(const PullRequest& request) const {
  if (!recording() || request.incarnation() == OBSERVER_INCARNATION) {
    return ReadSnapshot(request);
  }
  absl::MutexLock order(&order_mu_);
  PullSnapshot snapshot = ReadSnapshot(request);
  ApplyLogEntry entry;
  entry.set_kind(ApplyLogEntry::PULL);
  entry.set_worker(request.worker());
  entry.set_version(snapshot.header.version());
  log_.push_back(entry);
  return snapshot;
}

ShardJob::PullSnapshot ShardJob::ReadSnapshot(const PullRequest& request) const {
  std::vector<PullRange> ranges;
  ValidatePull(request, &ranges).IgnoreError();  // Validated before.
  PullSnapshot snapshot;
  snapshot.header.set_encoding(request.encoding());
  int64_t version;
  {
    absl::MutexLock lock(&mu_);
    version = version_;
    snapshot.header.set_step(rule_->step());
  }
  // DELAYED: how many updates old the values served are (fewer while fewer were applied).
  int64_t served_delay = 0;
  // References to the values, not copies: see Values.
  auto readers = std::make_shared<std::vector<std::unique_ptr<ValuesReader>>>();
  for (const PullRange& range : ranges) {
    const Slice& slice = *slices_[range.slice];
    int64_t begin = (range.row_begin - slice.placement.row_begin) * slice.placement.row_size;
    int64_t count = range.row_count * slice.placement.row_size;
    {
      absl::MutexLock lock(&slice.mu);
      served_delay = std::min<int64_t>(served_delay_, slice.history.size());
      readers->push_back(std::make_unique<ValuesReader>(
          served_delay == 0 ? slice.values : slice.history[served_delay - 1]->values()));
    }
    SliceRef* ref = snapshot.header.add_slices();
    ref->set_variable(slice.placement.variable);
    ref->set_row_begin(range.row_begin);
    ref->set_row_count(range.row_count);
    snapshot.pieces.emplace_back(readers->back()->buffer().data() + begin, count);
  }
  snapshot.header.set_version(version - served_delay);
  if (!request.sparse().empty()) {
    // Rows are read into a buffer of the answer's own (a table's rows change in place).
    auto rows = std::make_shared<std::vector<float>>(sparse_->Floats(request.sparse()));
    sparse_->Read(request.sparse(), absl::MakeSpan(*rows));
    *snapshot.header.mutable_sparse() = request.sparse();
    snapshot.pieces.emplace_back(*rows);
    snapshot.keep_alive = std::make_shared<std::pair<decltype(readers), decltype(rows)>>(
        std::move(readers), std::move(rows));
    return snapshot;
  }
  snapshot.keep_alive = std::move(readers);
  return snapshot;
}

std::vector<ShardJob::Waiter> ShardJob::TakeReadyWaitersLocked() {
  std::vector<Waiter> ready;
  if (replaying_) return ready;  // Replayed pulls wait for their turn (AdvanceReplay).
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (rule_->PullReady(it->second.request)) {
      ready.push_back(std::move(it->second));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  return ready;
}

const std::vector<double>& ShardJob::ParkSecondsBounds() {
  static const std::vector<double>* const bounds = new std::vector<double>{
      0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100};
  return *bounds;
}

absl::Duration ShardJob::EndPark(const Waiter& waiter) {
  const absl::Duration parked = clock_->Now() - waiter.parked_at;
  park_seconds_.Observe(absl::ToDoubleSeconds(parked));
  return parked;
}

void ShardJob::Complete(std::vector<Waiter> waiters) {
  for (Waiter& waiter : waiters) {
    const absl::Duration parked = EndPark(waiter);
    PullSnapshot snapshot = Snapshot(waiter.request);
    snapshot.header.set_parked_us(absl::ToInt64Microseconds(parked));
    waiter.done(std::move(snapshot));
  }
}

void ShardJob::ExpireWaiter(int64_t id) {
  Waiter waiter;
  std::string reason;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return;
    waiter = std::move(it->second);
    waiters_.erase(it);
    reason = replaying_ ? ReplayWaitReasonLocked(waiter.request)
                        : rule_->WaitReason(waiter.request);
  }
  EndPark(waiter);
  waiter.done(absl::DeadlineExceededError(JobPrefix(spec().job_id()) + reason));
}

bool ShardJob::CancelWaiter(int64_t id, const absl::Status& status) {
  Waiter waiter;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return false;
    waiter = std::move(it->second);
    waiters_.erase(it);
  }
  EndPark(waiter);
  waiter.done(status);
  return true;
}

void ShardJob::CancelAllWaiters(const absl::Status& status) {
  std::map<int64_t, Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    closed_ = status.ok() ? absl::CancelledError("the shard stopped") : status;
    waiters.swap(waiters_);
  }
  for (auto& [id, waiter] : waiters) {
    EndPark(waiter);
    waiter.done(status);
  }
}

void ShardJob::Reopen() {
  absl::MutexLock lock(&mu_);
  closed_ = absl::OkStatus();
}

bool ShardJob::AllWorkersLeft() const {
  absl::MutexLock lock(&mu_);
  return AllWorkersLeftLocked();
}

bool ShardJob::AllWorkersLeftLocked() const {
  for (int w = 0; w < rule_->num_workers(); ++w) {
    if (!rule_->left(w) && !leases_.lost(w)) return false;
  }
  return true;
}

bool ShardJob::OrphanedAggregateLocked() const {
  return aggregates_ && !ModeTraitsOf(spec().consistency().mode()).barrier &&
         !rule_->open_aggregate().empty() && AllWorkersLeftLocked();
}

std::vector<int> ShardJob::ExpireLeases(absl::Time now) {
  std::vector<int> lost = TakeExpiredLeases(now);
  LoseWorkers(lost);
  return lost;
}

std::vector<int> ShardJob::TakeExpiredLeases(absl::Time now) {
  if (!leases_.enabled()) return {};
  absl::MutexLock lock(&mu_);
  // A worker whose pull is parked here (at a barrier, a staleness bound), or whose push waits for
  // the byte budget, is waiting, not gone.
  std::vector<bool> parked(spec().num_workers(), false);
  for (size_t w = 0; w < parked_pushes_.size(); ++w) parked[w] = parked_pushes_[w] > 0;
  for (const auto& [id, waiter] : waiters_) {
    const int w = waiter.request.worker();
    if (w >= 0 && w < spec().num_workers() &&
        waiter.request.incarnation() != OBSERVER_INCARNATION) {
      parked[w] = true;
    }
  }
  // A worker out of the job is not judged, unless it holds batches (it took them before its
  // first pull: NextBatches).
  return leases_.Expire(now, [this, &parked](int w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    // Under mu_, held by the caller of Expire.
    return parked[w] || (rule_->left(w) && (handout_ == nullptr || !handout_->Holds(w)));
  });
}

void ShardJob::LoseWorkers(const std::vector<int>& workers) {
  if (workers.empty()) return;
  for (int worker : workers) DropAssembly(worker);
  // A lost worker leaves the clocks only where the mode says so (SSP), or the job is elastic
  // (lost_workers_leave): a barrier with backup workers needs none in particular, and one
  // without them waits for the lost one until its pulls time out; the other modes wait for no
  // one.
  const bool leaves = spec().lost_workers_leave() ||
                      ModeTraitsOf(spec().consistency().mode()).lost_worker ==
                          LostWorkerPolicy::kLeavesAfterLease;
  absl::MutexLock aggregate_lock(&aggregate_mu_);
  std::vector<Waiter> ready;
  bool apply = false;  // A SYNC step waited only for workers now gone, or no one is left to
                       // fill an open aggregate.
  float learning_rate = 0;
  {
    absl::MutexLock lock(&mu_);
    for (int w : workers) {
      if (w < 0 || w >= spec().num_workers()) continue;
      leases_.MarkLost(w);
      if (leaves && rule_->Leave(w)) apply = true;
      if (handout_ != nullptr) handout_->Lost(w);
    }
    apply = apply || OrphanedAggregateLocked();
    ready = TakeReadyWaitersLocked();
    if (apply) learning_rate = NextAggregateLearningRateLocked();
  }
  Complete(std::move(ready));
  if (apply) ApplyAggregate(learning_rate, nullptr);
}

absl::StatusOr<NextBatchesResponse> ShardJob::NextBatches(const NextBatchesRequest& request) {
  const std::string prefix = JobPrefix(spec().job_id());
  absl::Status run = CheckRun(request.run_id(), "NextBatches request");
  if (!run.ok()) return run;
  const int worker = request.worker();
  if (worker < 0 || worker >= spec().num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "worker ", worker,
                                                   " is out of range: the job has ",
                                                   spec().num_workers(), " workers"));
  }
  absl::MutexLock lock(&mu_);
  if (handout_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, spec().has_data_handout()
                    ? "its batches are handed out by its first shard (ps 0), not this one"
                    : "its data is not handed out (data.sharding BY_WORKER): each worker reads "
                      "its own shard"));
  }
  // Checked, not adopted: the worker rejoins with its first pull, which says its clock.
  absl::Status incarnation = CheckIncarnationLocked(worker, request.incarnation());
  if (!incarnation.ok()) return incarnation;
  HeardLocked(worker);
  absl::StatusOr<std::vector<int64_t>> batches =
      handout_->Take(worker, request.incarnation(), request.request_id(), request.count());
  if (!batches.ok()) {
    return absl::Status(batches.status().code(), prefix + std::string(batches.status().message()));
  }
  // A new process of a worker out of the job (lost, or one the job grew by) takes its batches
  // before its first pull joins it: its lease runs from now, so that the batches go back
  // (DataHandout::Lost) should it die before it joins.
  if (request.incarnation() > incarnation_[worker] && leases_.lost(worker)) {
    leases_.Rejoined(worker);
  }
  NextBatchesResponse response;
  response.mutable_batches()->Add(batches->begin(), batches->end());
  response.set_batches_per_epoch(handout_->batches_per_epoch());
  response.set_epochs_completed(handout_->epochs_completed());
  return response;
}

absl::Status ShardJob::Leave(int worker, const std::string& run_id,
                             std::optional<int> incarnation) {
  absl::Status run = CheckRun(run_id, "leave request");
  if (!run.ok()) return run;
  if (worker < 0 || worker >= spec().num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat(JobPrefix(spec().job_id()), "worker ", worker,
                                                   " is out of range: the job has ",
                                                   spec().num_workers(), " workers"));
  }
  DropAssembly(worker, incarnation);
  absl::MutexLock aggregate_lock(&aggregate_mu_);
  std::vector<Waiter> ready;
  bool apply = false;
  float learning_rate = 0;
  {
    absl::MutexLock lock(&mu_);
    // An older process's leave, held up in transit: its new incarnation is in the job. (No
    // process is a negative incarnation.)
    if (incarnation.has_value() && (*incarnation < 0 || *incarnation < incarnation_[worker])) {
      return absl::OkStatus();
    }
    apply = rule_->Leave(worker) || OrphanedAggregateLocked();
    if (handout_ != nullptr) handout_->GiveBackAll(worker);
    ready = TakeReadyWaitersLocked();
    if (apply) learning_rate = NextAggregateLearningRateLocked();
  }
  Complete(std::move(ready));
  if (apply) ApplyAggregate(learning_rate, nullptr);
  return absl::OkStatus();
}

}  // namespace ps
