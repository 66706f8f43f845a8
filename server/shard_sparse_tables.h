// The sparse tables (ParameterSpec.sparse_tables) of one job on one ps shard: each table's rows
// whose keys SparseShardOf places here (server/sparse_table.h holds them), and the open
// aggregate's row sums (SYNC, SOFTSYNC). A pull's or push's rows come after its dense values in
// its data, table entry by table entry (SparseRows), and every call here takes them laid out so.
//
// Thread-safe: the tables lock their own rows; the sums have their own lock. What orders an
// aggregate's Accumulate and ApplySums against each other is the caller's (ShardJob's
// aggregate lock), as is checking entries (Check) before reading or applying them.
#ifndef PS_SERVER_SHARD_SPARSE_TABLES_H_
#define PS_SERVER_SHARD_SPARSE_TABLES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/checkpoint/checkpoint_file.h"
#include "proto/ps_service.pb.h"
#include "server/sparse_table.h"

namespace ps {

class ShardSparseTables {
 public:
  using Entries = google::protobuf::RepeatedPtrField<SparseRows>;

  // The tables of `spec` on task `ps_index` of `num_ps` (none when it names no sparse_tables),
  // empty: a row is made when first touched.
  static absl::StatusOr<std::unique_ptr<ShardSparseTables>> Create(const ParameterSpec& spec,
                                                                   int num_ps, int ps_index);
  ShardSparseTables(const ShardSparseTables&) = delete;
  ShardSparseTables& operator=(const ShardSparseTables&) = delete;

  // How many tables; a checkpoint holds two blocks per table (SaveRows, SaveSums).
  size_t size() const { return tables_.size(); }
  // Floats of the rows `entries` name (unknown tables count none).
  int64_t Floats(const Entries& entries) const;
  // INVALID_ARGUMENT, saying which and how to mend it, for an unknown table, a key another
  // shard holds, or (`distinct`: a push's) a key twice in one table's entry.
  absl::Status Check(const Entries& entries, bool distinct) const;
  // The first Inf or NaN of `rows`, described ("NaN in sparse table "t" at key 7, column 2"),
  // or "" when all are finite. REQUIRES: Check(entries) ok, rows Floats(entries) floats.
  std::string FindNonFinite(const Entries& entries, absl::Span<const float> rows) const;

  // Copies the rows into `out`, making the missing ones (a row past a table's row limit reads
  // as zeros). REQUIRES: Check(entries) ok, out Floats(entries) floats.
  void Read(const Entries& entries, absl::Span<float> out) const;
  // Runs the job's optimizer at `learning_rate` on the rows `entries` name, with `rows` as their
  // gradient. REQUIRES: Check(entries, distinct) ok, rows finite and Floats(entries) floats.
  void Apply(float learning_rate, const Entries& entries, absl::Span<const float> rows);

  // The open aggregate: adds a push's rows to the sums by key (`first`: the aggregate's first
  // push, which clears the sums first); ApplySums applies each sum times `scale` at
  // `learning_rate` and clears them. REQUIRES as Apply.
  void Accumulate(const Entries& entries, absl::Span<const float> rows, bool first)
      ABSL_LOCKS_EXCLUDED(sums_mu_);
  void ApplySums(float learning_rate, float scale) ABSL_LOCKS_EXCLUDED(sums_mu_);

  // Rows per table, by name, for JobStats.
  std::map<std::string, int64_t> RowCounts() const;

  // Checkpoints: per table, in name order, its rows (SparseTable::SaveRows) and the open
  // aggregate's sums (per key in key order, the key then its row; "" when none).
  std::vector<std::string> SaveRows() const;
  std::vector<std::string> SaveSums() const ABSL_LOCKS_EXCLUDED(sums_mu_);
  // Loads what SaveRows / SaveSums wrote, one block per table in name order, into fresh tables
  // (a restore). DATA_LOSS naming the table when a block is not its rows or sums, or holds sums
  // while no aggregate is `open`.
  absl::Status LoadRows(absl::Span<const CheckpointBlock> blocks);
  absl::Status LoadSums(absl::Span<const CheckpointBlock> blocks, bool open)
      ABSL_LOCKS_EXCLUDED(sums_mu_);

 private:
  ShardSparseTables(std::string job_prefix, int num_ps, int ps_index)
      : job_prefix_(std::move(job_prefix)), num_ps_(num_ps), ps_index_(ps_index) {}
  // A table `Check` found. REQUIRES: it exists.
  SparseTable& At(const std::string& name) const { return *tables_.at(name); }

  const std::string job_prefix_;  // JobPrefix, for every message.
  const int num_ps_;
  const int ps_index_;
  std::map<std::string, std::unique_ptr<SparseTable>> tables_;  // By name; fixed after Create.
  mutable absl::Mutex sums_mu_;
  // Per table, per key, the open aggregate's sum of its rows.
  std::map<std::string, absl::flat_hash_map<uint64_t, std::vector<float>>> sums_
      ABSL_GUARDED_BY(sums_mu_);
};

}  // namespace ps

#endif  // PS_SERVER_SHARD_SPARSE_TABLES_H_
