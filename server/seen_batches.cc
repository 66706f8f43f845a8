#include "server/seen_batches.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {

bool SeenBatches::AllSeen(absl::Span<const int64_t> batches) const {
  if (batches.empty()) return false;
  for (int64_t batch : batches) {
    if (batch >= below_ && above_.count(batch) == 0) return false;
  }
  return true;
}

void SeenBatches::Add(absl::Span<const int64_t> batches) {
  for (int64_t batch : batches) {
    if (batch < below_) continue;
    if (batch > below_) {
      above_.insert(batch);
      continue;
    }
    ++below_;
    while (!above_.empty() && *above_.begin() == below_) {
      above_.erase(above_.begin());
      ++below_;
    }
  }
}

void SeenBatches::Save(ShardCheckpointState* state) const {
  state->set_batches_seen_below(below_);
  for (int64_t batch : above_) state->add_batches_seen(batch);
}

absl::Status SeenBatches::Restore(const ShardCheckpointState& state) {
  std::set<int64_t> above;
  int64_t last = state.batches_seen_below();
  if (last < 0) {
    return absl::DataLossError(
        absl::StrCat("the checkpoint's batches_seen_below is ", last, ", under 0"));
  }
  for (int64_t batch : state.batches_seen()) {
    if (batch <= last) {
      return absl::DataLossError(absl::StrCat(
          "the checkpoint's batches_seen are not increasing after batches_seen_below (", batch,
          " after ", last, ")"));
    }
    above.insert(batch);
    last = batch;
  }
  below_ = state.batches_seen_below();
  above_ = std::move(above);
  return absl::OkStatus();
}

}  // namespace ps
