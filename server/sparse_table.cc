#include "server/sparse_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/tensor/finite.h"
#include "common/job/partitioner.h"
#include "common/random.h"
#include "server/initializer.h"

namespace ps {

absl::StatusOr<std::unique_ptr<SparseTable>> SparseTable::Create(const Options& options) {
  if (options.width < 1) {
    return absl::InvalidArgumentError(absl::StrCat("sparse table \"", options.name,
                                                   "\": width is ", options.width,
                                                   "; a row holds at least one float"));
  }
  if (options.max_rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse table \"", options.name, "\": max_rows is negative"));
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = Optimizer::Create(options.optimizer);
  if (!optimizer.ok()) return optimizer.status();
  return std::unique_ptr<SparseTable>(new SparseTable(options, *std::move(optimizer)));
}

SparseTable::SparseTable(const Options& options, std::unique_ptr<Optimizer> optimizer)
    : name_(options.name),
      width_(options.width),
      initializer_(options.initializer),
      seed_(options.seed),
      max_rows_(options.max_rows),
      optimizer_(std::move(optimizer)),
      arrays_(1 + optimizer_->num_slots()),
      counts_updates_(options.optimizer.kind() == OptimizerConfig::ADAM),
      stripes_(new Stripe[kStripes]) {
  variable_.set_name(name_);
  variable_.add_shape(1);
  variable_.add_shape(width_);
  *variable_.mutable_initializer() = initializer_;
  for (int s = 0; s < kStripes; ++s) {
    Stripe& stripe = stripes_[s];
    absl::MutexLock lock(&stripe.mu);
    stripe.blocks.resize(arrays_);
  }
}

int SparseTable::StripeOf(uint64_t key) { return static_cast<int>(Mix64(key) % kStripes); }

float* SparseTable::RowLocked(Stripe& stripe, int array, int64_t row) const {
  return stripe.blocks[array][row / kRowsPerBlock].get() + (row % kRowsPerBlock) * width_;
}

int64_t SparseTable::FindOrCreateLocked(Stripe& stripe, uint64_t key) {
  auto found = stripe.index.find(key);
  if (found != stripe.index.end()) return found->row;
  const int64_t row = stripe.rows++;
  stripe.index.insert(RowEntry{key, static_cast<uint32_t>(row)});
  if (counts_updates_) stripe.update_counts.push_back(0);
  if (row % kRowsPerBlock == 0) {
    for (int array = 0; array < arrays_; ++array) {
      stripe.blocks[array].emplace_back(new float[kRowsPerBlock * width_]);
    }
  }
  // The values: the initializer's row `key` (as a dense variable's row of that index).
  SlicePlacement placement;
  placement.variable = name_;
  placement.row_begin = static_cast<int64_t>(key);
  placement.row_count = 1;
  placement.row_size = width_;
  InitializeSlice(variable_, placement, seed_,
                  absl::MakeSpan(RowLocked(stripe, 0, row), static_cast<size_t>(width_)));
  std::vector<absl::Span<float>> slots;
  for (int array = 1; array < arrays_; ++array) {
    slots.emplace_back(RowLocked(stripe, array, row), static_cast<size_t>(width_));
  }
  optimizer_->InitializeSlots(slots);
  rows_.fetch_add(1, std::memory_order_relaxed);
  return row;
}

std::array<std::vector<int32_t>, SparseTable::kStripes> SparseTable::ByStripe(
    absl::Span<const uint64_t> keys) {
  std::array<std::vector<int32_t>, kStripes> by_stripe;
  for (size_t i = 0; i < keys.size(); ++i) {
    by_stripe[StripeOf(keys[i])].push_back(static_cast<int32_t>(i));
  }
  return by_stripe;
}

absl::Status SparseTable::CheckRoom(
    absl::Span<const uint64_t> keys,
    const std::array<std::vector<int32_t>, kStripes>& by_stripe) const {
  if (rows_.load(std::memory_order_relaxed) + static_cast<int64_t>(keys.size()) <= max_rows_) {
    return absl::OkStatus();  // Room even if every key were new.
  }
  int64_t missing = 0;
  for (int s = 0; s < kStripes; ++s) {
    if (by_stripe[s].empty()) continue;
    const Stripe& stripe = stripes_[s];
    absl::MutexLock lock(&stripe.mu);
    absl::flat_hash_set<uint64_t> counted;
    for (int32_t i : by_stripe[s]) {
      if (!stripe.index.contains(keys[i]) && counted.insert(keys[i]).second) ++missing;
    }
  }
  const int64_t rows = rows_.load(std::memory_order_relaxed);
  if (rows + missing <= max_rows_) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "sparse table \"", name_, "\" holds ", rows, " rows; ", missing,
      " more would pass its limit of ", max_rows_,
      " (the ps's memory): give the ps more memory or use fewer keys"));
}

template <typename PerRow>
absl::Status SparseTable::ForEachRow(absl::Span<const uint64_t> keys, PerRow per_row) {
  const std::array<std::vector<int32_t>, kStripes> by_stripe = ByStripe(keys);
  absl::Status room = CheckRoom(keys, by_stripe);
  if (!room.ok()) return room;
  for (int s = 0; s < kStripes; ++s) {
    if (by_stripe[s].empty()) continue;
    Stripe& stripe = stripes_[s];
    absl::MutexLock lock(&stripe.mu);
    for (int32_t i : by_stripe[s]) {
      per_row(stripe, static_cast<size_t>(i), FindOrCreateLocked(stripe, keys[i]));
    }
  }
  return absl::OkStatus();
}

absl::Status SparseTable::Read(absl::Span<const uint64_t> keys, absl::Span<float> out) {
  if (out.size() != keys.size() * static_cast<size_t>(width_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse table \"", name_, "\": ", keys.size(), " keys of width ", width_, " need ",
        keys.size() * width_, " floats, not ", out.size()));
  }
  return ForEachRow(keys, [&](Stripe& stripe, size_t i, int64_t row) {
    stripe.mu.AssertHeld();
    std::memcpy(out.data() + i * width_, RowLocked(stripe, 0, row), width_ * sizeof(float));
  });
}

absl::Status SparseTable::Update(float learning_rate, absl::Span<const uint64_t> keys,
                                 absl::Span<const float> gradient, bool allow_non_finite) {
  const std::string prefix = absl::StrCat("sparse table \"", name_, "\": ");
  if (gradient.size() != keys.size() * static_cast<size_t>(width_)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "the gradient has ", gradient.size(),
                                                   " floats; ", keys.size(), " rows of width ",
                                                   width_, " are ", keys.size() * width_));
  }
  absl::flat_hash_set<uint64_t> seen;
  seen.reserve(keys.size());
  for (uint64_t key : keys) {
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "key ", key, " appears twice in one update: sum its gradients"));
    }
  }
  if (!allow_non_finite && !AllFinite(gradient)) {
    for (size_t i = 0; i < gradient.size(); ++i) {
      if (!std::isfinite(gradient[i])) {
        return absl::InvalidArgumentError(absl::StrCat(
            prefix, std::isnan(gradient[i]) ? "NaN" : "Inf", " in the gradient of key ",
            keys[i / width_], " at column ", i % width_, "; nothing was applied"));
      }
    }
  }
  std::vector<absl::Span<float>> slots(arrays_ - 1);
  return ForEachRow(keys, [&](Stripe& stripe, size_t i, int64_t row) {
    stripe.mu.AssertHeld();
    for (int array = 1; array < arrays_; ++array) {
      slots[array - 1] = absl::MakeSpan(RowLocked(stripe, array, row), width_);
    }
    optimizer_->Apply(learning_rate, gradient.subspan(i * width_, width_),
                      absl::MakeSpan(RowLocked(stripe, 0, row), width_), slots,
                      counts_updates_ ? stripe.update_counts[row]++ : 0);
  });
}

std::string SparseTable::SaveRows() const {
  // Each stripe's rows appended as they lie, then put in key order by their offsets.
  const auto record = static_cast<size_t>(SavedRowBytes());
  const size_t row_bytes = static_cast<size_t>(width_) * sizeof(float);
  std::string unsorted;
  std::vector<std::pair<uint64_t, size_t>> order;  // Key, offset in `unsorted`.
  for (int s = 0; s < kStripes; ++s) {
    Stripe& stripe = stripes_[s];
    absl::MutexLock lock(&stripe.mu);
    unsorted.reserve(unsorted.size() + stripe.index.size() * record);
    for (const RowEntry& entry : stripe.index) {
      const uint64_t key = entry.key;
      const uint32_t updates = counts_updates_ ? stripe.update_counts[entry.row] : 0;
      order.emplace_back(key, unsorted.size());
      unsorted.append(reinterpret_cast<const char*>(&key), sizeof(key));
      unsorted.append(reinterpret_cast<const char*>(&updates), sizeof(updates));
      for (int array = 0; array < arrays_; ++array) {
        unsorted.append(reinterpret_cast<const char*>(RowLocked(stripe, array, entry.row)),
                        row_bytes);
      }
    }
  }
  std::sort(order.begin(), order.end());
  std::string bytes;
  bytes.reserve(unsorted.size());
  for (const auto& [key, at] : order) bytes.append(unsorted, at, record);
  return bytes;
}

absl::Status SparseTable::LoadRows(absl::string_view bytes) {
  const std::string prefix = absl::StrCat("sparse table \"", name_, "\": ");
  if (rows() > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(prefix, "holds ", rows(), " rows already; rows load into an empty table"));
  }
  const auto record = static_cast<size_t>(SavedRowBytes());
  if (bytes.size() % record != 0) {
    return absl::DataLossError(absl::StrCat(prefix, "the saved rows are ", bytes.size(),
                                            " bytes, not whole rows of ", record, " bytes (width ",
                                            width_, ", ", arrays_ - 1, " optimizer slots)"));
  }
  const size_t count = bytes.size() / record;
  if (static_cast<int64_t>(count) > max_rows_) {
    return absl::ResourceExhaustedError(absl::StrCat(prefix, "the checkpoint holds ", count,
                                                     " rows, past the limit of ", max_rows_,
                                                     " (the ps's memory)"));
  }
  const size_t row_floats = static_cast<size_t>(width_);
  absl::Status status;
  for (size_t i = 0; i < count && status.ok(); ++i) {
    const char* in = bytes.data() + i * record;
    uint64_t key;
    uint32_t updates;
    std::memcpy(&key, in, sizeof(key));
    std::memcpy(&updates, in + sizeof(key), sizeof(updates));
    in += sizeof(key) + sizeof(updates);
    Stripe& stripe = stripes_[StripeOf(key)];
    absl::MutexLock lock(&stripe.mu);
    if (stripe.index.contains(key)) {
      status = absl::DataLossError(absl::StrCat(prefix, "the saved rows hold key ", key, " twice"));
      break;
    }
    const int64_t row = FindOrCreateLocked(stripe, key);
    if (counts_updates_) stripe.update_counts[row] = updates;
    for (int array = 0; array < arrays_; ++array) {
      std::memcpy(RowLocked(stripe, array, row), in, row_floats * sizeof(float));
      in += row_floats * sizeof(float);
    }
  }
  if (!status.ok()) Clear();
  return status;
}

void SparseTable::Clear() {
  for (int s = 0; s < kStripes; ++s) {
    Stripe& stripe = stripes_[s];
    absl::MutexLock lock(&stripe.mu);
    stripe.index.clear();
    stripe.rows = 0;
    for (auto& blocks : stripe.blocks) blocks.clear();
    stripe.update_counts.clear();
  }
  rows_.store(0, std::memory_order_relaxed);
}

int64_t SparseTable::rows() const { return rows_.load(std::memory_order_relaxed); }

int64_t SparseTable::OverheadBytes() const {
  int64_t bytes = static_cast<int64_t>(sizeof(*this)) + kStripes * sizeof(Stripe);
  for (int s = 0; s < kStripes; ++s) {
    const Stripe& stripe = stripes_[s];
    absl::MutexLock lock(&stripe.mu);
    // A flat_hash_set holds capacity() slots and capacity() + 16 control bytes (Abseil's
    // SwissTable layout).
    const int64_t capacity = static_cast<int64_t>(stripe.index.capacity());
    bytes += capacity * static_cast<int64_t>(sizeof(RowEntry)) + (capacity > 0 ? capacity + 16 : 0);
    bytes += static_cast<int64_t>(stripe.update_counts.capacity() * sizeof(uint32_t));
    const int64_t rows = stripe.rows;
    const int64_t blocks = static_cast<int64_t>(stripe.blocks[0].size());
    // The blocks' rows not yet used, and the vectors of block pointers.
    bytes += (blocks * kRowsPerBlock - rows) * width_ * arrays_ *
             static_cast<int64_t>(sizeof(float));
    bytes += arrays_ * static_cast<int64_t>(stripe.blocks[0].capacity() * sizeof(void*));
  }
  return bytes;
}

int64_t SparseTable::RowBytes() const {
  return rows() * width_ * arrays_ * static_cast<int64_t>(sizeof(float));
}

}  // namespace ps
