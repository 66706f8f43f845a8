#include "server/data_handout.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace ps {

DataHandout::DataHandout(const DataHandoutSpec& spec, int num_workers)
    : batches_per_epoch_(spec.batches_per_epoch()),
      epochs_(spec.epochs()),
      total_(spec.epochs() > 0 ? spec.batches_per_epoch() * spec.epochs()
                               : std::numeric_limits<int64_t>::max()),
      held_(num_workers),
      lost_(num_workers, false),
      incarnation_(num_workers, 0),
      last_request_(num_workers, 0),
      last_answer_(num_workers) {}

absl::StatusOr<std::vector<int64_t>> DataHandout::Take(int worker, int incarnation,
                                                       int64_t request_id, int count) {
  if (count < 1 || count > kMaxHeld) {
    return absl::InvalidArgumentError(
        absl::StrCat("count is ", count, ": ask for 1 to ", kMaxHeld, " batches"));
  }
  if (incarnation < incarnation_[worker]) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker, "'s incarnation ", incarnation, " was replaced by ",
                     incarnation_[worker], ": stop the older process"));
  }
  if (incarnation > incarnation_[worker]) {  // Restarted: what it held goes back.
    GiveBackAll(worker);
    lost_[worker] = false;
    incarnation_[worker] = incarnation;
    last_request_[worker] = 0;
    last_answer_[worker].clear();
  }
  if (request_id == last_request_[worker] && request_id > 0) return last_answer_[worker];
  if (request_id < last_request_[worker]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "request ", request_id, " of worker ", worker, " comes after its request ",
        last_request_[worker], ": a worker numbers its requests 1, 2, 3, ... from each start"));
  }
  if (request_id != last_request_[worker] + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", request_id, " of worker ", worker, " is not ", last_request_[worker] + 1,
        ": a worker numbers its requests 1, 2, 3, ... from each start"));
  }
  std::set<int64_t>& held = held_[worker];
  if (static_cast<int>(held.size()) >= kMaxHeld) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", worker, " holds ", held.size(), " batches it has not pushed, the most a "
        "worker may hold: push their gradients first"));
  }
  count = std::min(count, kMaxHeld - static_cast<int>(held.size()));
  std::vector<int64_t> batches;
  while (static_cast<int>(batches.size()) < count) {
    int64_t batch;
    const std::optional<std::pair<int64_t, int>> reclaimable = LowestReclaimable();
    if (!waiting_.empty()) {
      batch = *waiting_.begin();
      waiting_.erase(waiting_.begin());
    } else if (reclaimable.has_value() &&
               (next_ >= total_ ||
                reclaimable->first / batches_per_epoch_ < next_ / batches_per_epoch_)) {
      // A lost worker's batch of an earlier epoch, before this one begins (or at the end).
      batch = reclaimable->first;
      held_[reclaimable->second].erase(batch);
      ++given_back_;
    } else if (next_ < total_) {
      batch = next_++;
    } else {
      break;
    }
    held.insert(batch);
    batches.push_back(batch);
  }
  last_request_[worker] = request_id;
  last_answer_[worker] = batches;
  return batches;
}

absl::Status DataHandout::CheckHeld(int worker, absl::Span<const int64_t> batches) const {
  const std::set<int64_t>& held = held_[worker];
  for (size_t i = 0; i < batches.size(); ++i) {
    const int64_t batch = batches[i];
    if (std::find(batches.begin(), batches.begin() + i, batch) != batches.begin() + i) {
      return absl::InvalidArgumentError(
          absl::StrCat("the push names batch ", batch, " twice; a batch is trained on once"));
    }
    if (held.count(batch) > 0) continue;
    std::string why;
    if (batch < 0 || batch >= next_) {
      why = "it was never handed out";
    } else if (waiting_.count(batch) > 0) {
      why = "it was given back (the worker left or restarted) and waits to be handed out again";
    } else {
      why = "it has been pushed already, or it went to another worker (this one left, "
            "restarted, or was lost for longer than its lease and the batch's epoch ran out of "
            "new batches)";
      for (size_t other = 0; other < held_.size(); ++other) {
        if (held_[other].count(batch) > 0) {
          why = absl::StrCat("worker ", other, " holds it now (this worker left, restarted, or "
                             "was lost for longer than its lease)");
        }
      }
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "batch ", batch, " is not worker ", worker, "'s: ", why,
        "; nothing was applied (a worker pushes only the batches NextBatches gave it)"));
  }
  return absl::OkStatus();
}

void DataHandout::Trained(int worker, absl::Span<const int64_t> batches) {
  for (int64_t batch : batches) held_[worker].erase(batch);
  lost_[worker] = false;
}

void DataHandout::Lost(int worker) { lost_[worker] = true; }

std::optional<std::pair<int64_t, int>> DataHandout::LowestReclaimable() const {
  std::optional<std::pair<int64_t, int>> lowest;
  for (size_t w = 0; w < held_.size(); ++w) {
    if (!lost_[w] || held_[w].empty()) continue;
    const int64_t batch = *held_[w].begin();
    if (!lowest.has_value() || batch < lowest->first) lowest.emplace(batch, static_cast<int>(w));
  }
  return lowest;
}

void DataHandout::GiveBackAll(int worker) {
  given_back_ += static_cast<int64_t>(held_[worker].size());
  waiting_.insert(held_[worker].begin(), held_[worker].end());
  held_[worker].clear();
}

int64_t DataHandout::FirstUntrained() const {
  int64_t first = next_;
  if (!waiting_.empty()) first = std::min(first, *waiting_.begin());
  for (const std::set<int64_t>& held : held_) {
    if (!held.empty()) first = std::min(first, *held.begin());
  }
  return first;
}

int64_t DataHandout::epochs_completed() const {
  const int64_t first = FirstUntrained();
  if (first >= total_) return epochs_;
  return first / batches_per_epoch_;
}

void DataHandout::AddWorkers(int num_workers) {
  held_.resize(num_workers);
  lost_.resize(num_workers, false);
  incarnation_.resize(num_workers, 0);
  last_request_.resize(num_workers, 0);
  last_answer_.resize(num_workers);
}

DataHandoutStats DataHandout::Stats() const {
  DataHandoutStats stats;
  stats.set_batches_per_epoch(batches_per_epoch_);
  stats.set_epochs(epochs_);
  stats.set_epochs_completed(epochs_completed());
  int64_t held = 0;
  for (const std::set<int64_t>& batches : held_) held += static_cast<int64_t>(batches.size());
  stats.set_batches_held(held);
  stats.set_batches_waiting(static_cast<int64_t>(waiting_.size()));
  stats.set_batches_trained(next_ - held - static_cast<int64_t>(waiting_.size()));
  stats.set_batches_given_back(given_back_);
  return stats;
}

void DataHandout::Save(DataHandoutState* state) const {
  state->Clear();
  state->set_next_batch(next_);
  std::set<int64_t> untrained = waiting_;
  for (const std::set<int64_t>& held : held_) untrained.insert(held.begin(), held.end());
  for (int64_t batch : untrained) state->add_waiting(batch);
  state->set_given_back(given_back_);
}

absl::Status DataHandout::Restore(const DataHandoutState& state) {
  if (state.next_batch() < 0 || state.next_batch() > total_) {
    return absl::DataLossError(absl::StrCat("the data handout's next batch, ", state.next_batch(),
                                            ", is not one of the job's batches"));
  }
  std::set<int64_t> waiting;
  int64_t previous = -1;
  for (int64_t batch : state.waiting()) {
    if (batch <= previous || batch >= state.next_batch()) {
      return absl::DataLossError(absl::StrCat(
          "the data handout's batches given back are not distinct, increasing and before its "
          "next batch (", state.next_batch(), "): ", batch, " after ", previous));
    }
    previous = batch;
    waiting.insert(batch);
  }
  next_ = state.next_batch();
  waiting_ = std::move(waiting);
  for (std::set<int64_t>& held : held_) held.clear();
  std::fill(lost_.begin(), lost_.end(), false);
  std::fill(incarnation_.begin(), incarnation_.end(), 0);
  std::fill(last_request_.begin(), last_request_.end(), 0);
  for (std::vector<int64_t>& answer : last_answer_) answer.clear();
  given_back_ = state.given_back();
  return absl::OkStatus();
}

void DataHandout::CopyTo(DataHandoutCopy* copy) const {
  copy->Clear();
  copy->set_next_batch(next_);
  copy->mutable_waiting()->Add(waiting_.begin(), waiting_.end());
  copy->set_given_back(given_back_);
  for (size_t w = 0; w < held_.size(); ++w) {
    DataHandoutWorker* worker = copy->add_workers();
    worker->mutable_held()->Add(held_[w].begin(), held_[w].end());
    worker->set_incarnation(incarnation_[w]);
    worker->set_lost(lost_[w]);
    worker->set_last_request(last_request_[w]);
    worker->mutable_last_answer()->Add(last_answer_[w].begin(), last_answer_[w].end());
  }
}

absl::Status DataHandout::CopyFrom(const DataHandoutCopy& copy) {
  if (copy.workers_size() != static_cast<int>(held_.size())) {
    return absl::DataLossError(absl::StrCat("the data handout's copy has ", copy.workers_size(),
                                            " workers; the job has ", held_.size()));
  }
  // The waiting and held batches together, as a checkpoint keeps them, are checked by Restore.
  DataHandoutState state;
  state.set_next_batch(copy.next_batch());
  state.set_given_back(copy.given_back());
  std::set<int64_t> untrained(copy.waiting().begin(), copy.waiting().end());
  size_t listed = static_cast<size_t>(copy.waiting_size());
  for (const DataHandoutWorker& worker : copy.workers()) {
    untrained.insert(worker.held().begin(), worker.held().end());
    listed += static_cast<size_t>(worker.held_size());
  }
  if (untrained.size() != listed) {
    return absl::DataLossError("the data handout's copy lists a batch twice");
  }
  state.mutable_waiting()->Add(untrained.begin(), untrained.end());
  absl::Status restored = Restore(state);
  if (!restored.ok()) return restored;
  waiting_ = std::set<int64_t>(copy.waiting().begin(), copy.waiting().end());
  for (size_t w = 0; w < held_.size(); ++w) {
    const DataHandoutWorker& worker = copy.workers(static_cast<int>(w));
    held_[w] = std::set<int64_t>(worker.held().begin(), worker.held().end());
    incarnation_[w] = worker.incarnation();
    lost_[w] = worker.lost();
    last_request_[w] = worker.last_request();
    last_answer_[w].assign(worker.last_answer().begin(), worker.last_answer().end());
  }
  return absl::OkStatus();
}

}  // namespace ps
