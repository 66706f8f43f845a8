// One shard's part of a sparse row table (issue 20): float rows of a fixed width addressed by
// 64-bit keys, as an embedding table or the weights of hashed features are, where the key space
// (2^40 hashed features, say) is far too large to hold densely. A row exists once a read or an
// update first touches it, with the values the table's initializer gives it from (seed, table
// name, key) alone (server/initializer.h, the key as the row index): every shard, run and
// restore agrees on a row whatever order its keys are touched in. Updates run the job's
// optimizer on the touched rows only (common/job/optimizer.h): AdaGrad's accumulator and Adam's
// moments are per row element, and each row counts its own updates (Adam's bias correction
// uses the row's count: lazy Adam, the moments of untouched rows neither decay nor count).
//
// Storage: the rows are split into stripes by a hash of the key, each with its own lock, a
// flat hash set of 12-byte (key, row number) entries and arenas of rows (values, then each
// optimizer slot, each in blocks of kRowsPerBlock rows). Reads and updates of different stripes
// run in parallel; one of a row waits for another of the same stripe. The memory a row costs
// beyond its values and slots is its entry in the set (at the set's load) and, under Adam, its
// update count (OverheadBytes counts them).
//
#ifndef PS_SERVER_SPARSE_TABLE_H_
#define PS_SERVER_SPARSE_TABLE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/job/optimizer.h"
#include "proto/parameter.pb.h"

namespace ps {

class SparseTable {
 public:
  struct Options {
    std::string name;  // The table's, part of every row's initial values.
    int64_t width = 0;  // Floats a row, >= 1.
    // ZEROS, UNIFORM, NORMAL, CONSTANT as for dense variables; GLOROT_UNIFORM with fan_in 1 and
    // fan_out `width`.
    InitializerConfig initializer;
    uint64_t seed = 0;                    // The job's.
    OptimizerConfig optimizer;            // Run on the rows an update touches.
    int64_t max_rows = int64_t{1} << 40;  // RESOURCE_EXHAUSTED past it (the ps's memory).
  };
  // INVALID_ARGUMENT for a width < 1, an initializer the dense ones refuse, or an optimizer
  // Optimizer::Create refuses.
  static absl::StatusOr<std::unique_ptr<SparseTable>> Create(const Options& options);

  SparseTable(const SparseTable&) = delete;
  SparseTable& operator=(const SparseTable&) = delete;

  int64_t width() const { return width_; }

  // Copies the rows of `keys` into `out` (keys.size() * width floats, in key order), creating
  // the rows that do not exist. Keys may repeat. RESOURCE_EXHAUSTED, creating no row, when the
  // new rows would pass max_rows. Thread-safe.
  absl::Status Read(absl::Span<const uint64_t> keys, absl::Span<float> out);

  // Applies one optimizer update at `learning_rate` to the rows of `keys` with their gradient
  // rows (keys.size() * width floats, in key order), creating rows that do not exist.
  // INVALID_ARGUMENT, changing nothing, when a key repeats (a push sums a key's gradients
  // first), the gradient is not keys.size() * width floats, or holds NaN or Inf (unless
  // `allow_non_finite`); RESOURCE_EXHAUSTED as Read. Thread-safe.
  absl::Status Update(float learning_rate, absl::Span<const uint64_t> keys,
                      absl::Span<const float> gradient, bool allow_non_finite = false);

  // Every row, for a checkpoint: per row its key (8 bytes), its update count (4 bytes; 0 where
  // the optimizer does not count) and its values then each optimizer slot (width floats each),
  // little-endian, rows in key order (the same bytes for the same rows). Thread-safe: a row
  // updated meanwhile is in it before or after the update (a checkpoint takes it between
  // updates).
  std::string SaveRows() const;
  // Makes the rows SaveRows wrote, into a table that has none (a restore). DATA_LOSS, leaving
  // the table empty, when the bytes are not whole rows of this width and optimizer or a key
  // repeats; RESOURCE_EXHAUSTED past max_rows; FAILED_PRECONDITION for a table with rows.
  absl::Status LoadRows(absl::string_view bytes);
  // The bytes of one row in SaveRows' format.
  int64_t SavedRowBytes() const { return SavedRowBytes(width_, arrays_ - 1); }
  // The same for a table of rows of `width` under an optimizer of `slots` slots.
  static int64_t SavedRowBytes(int64_t width, int slots) {
    return static_cast<int64_t>(sizeof(uint64_t) + sizeof(uint32_t)) +
           (1 + slots) * width * static_cast<int64_t>(sizeof(float));
  }

  int64_t rows() const;
  // Bytes the table holds beyond its rows' values and optimizer slots: the hash maps' slots and
  // control bytes (at their capacity, not their size), the update counts, the blocks' unused
  // tail and the stripes themselves.
  int64_t OverheadBytes() const;
  // Bytes of the rows' values and slots: rows() * width * (1 + the optimizer's slots) floats.
  int64_t RowBytes() const;

  static constexpr int kStripes = 64;
  static constexpr int64_t kRowsPerBlock = 4096;

 private:
  // A key and its row number in its stripe, packed: 12 bytes in the set, not a pair's 16.
  struct __attribute__((packed)) RowEntry {
    uint64_t key;
    uint32_t row;
  };
  // Hash and equality by key, also of a bare key (lookups without an entry).
  struct RowEntryHash {
    using is_transparent = void;
    size_t operator()(uint64_t key) const { return absl::Hash<uint64_t>()(key); }
    size_t operator()(const RowEntry& entry) const { return (*this)(uint64_t{entry.key}); }
  };
  struct RowEntryEq {
    using is_transparent = void;
    static uint64_t Key(uint64_t key) { return key; }
    static uint64_t Key(const RowEntry& entry) { return entry.key; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return Key(a) == Key(b);
    }
  };
  static_assert(sizeof(RowEntry) == 12, "a row's entry is packed");
  struct Stripe {
    mutable absl::Mutex mu;
    absl::flat_hash_set<RowEntry, RowEntryHash, RowEntryEq> index ABSL_GUARDED_BY(mu);
    int64_t rows ABSL_GUARDED_BY(mu) = 0;
    // Per array (values, then each slot): blocks of kRowsPerBlock rows of width floats.
    std::vector<std::vector<std::unique_ptr<float[]>>> blocks ABSL_GUARDED_BY(mu);
    // Per row: its updates, for Adam's bias correction (empty under the other optimizers,
    // which do not count).
    std::vector<uint32_t> update_counts ABSL_GUARDED_BY(mu);
  };

  SparseTable(const Options& options, std::unique_ptr<Optimizer> optimizer);
  static int StripeOf(uint64_t key);
  // Removes every row (a failed LoadRows).
  void Clear();
  // The number of `key`'s row in `stripe`, created (initialized) when missing.
  // REQUIRES: stripe.mu held.
  int64_t FindOrCreateLocked(Stripe& stripe, uint64_t key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  // Array `array` (0: values, 1...: slots) of row `row`. REQUIRES: stripe.mu held.
  float* RowLocked(Stripe& stripe, int array, int64_t row) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);
  // For each stripe, the positions in `keys` of the keys that fall in it.
  static std::array<std::vector<int32_t>, kStripes> ByStripe(absl::Span<const uint64_t> keys);
  // Calls per_row(stripe, i, row) for every keys[i] with its stripe's lock held, stripe by
  // stripe, creating missing rows; RESOURCE_EXHAUSTED first, making none, past max_rows.
  // (per_row asserts the lock, stripe.mu.AssertHeld(): the analysis does not follow it into a
  // lambda.)
  template <typename PerRow>
  absl::Status ForEachRow(absl::Span<const uint64_t> keys, PerRow per_row);
  // OK unless creating the missing keys among `keys` would pass max_rows (each stripe counted
  // under its lock in turn: rows made meanwhile by other calls may pass it slightly).
  absl::Status CheckRoom(absl::Span<const uint64_t> keys,
                         const std::array<std::vector<int32_t>, kStripes>& by_stripe) const;

  const std::string name_;
  const int64_t width_;
  const InitializerConfig initializer_;
  // The table as a variable of one row of `width` (the initializer's view), set once.
  VariableDef variable_;
  const uint64_t seed_;
  const int64_t max_rows_;
  const std::unique_ptr<Optimizer> optimizer_;
  const int arrays_;  // 1 + the optimizer's slots.
  const bool counts_updates_;  // Adam.
  const std::unique_ptr<Stripe[]> stripes_;
  std::atomic<int64_t> rows_{0};
};

}  // namespace ps

#endif  // PS_SERVER_SPARSE_TABLE_H_
