// ShardJob's sparse tables (shard_job.h; ParameterSpec.sparse_tables): the rows a pull or push
// names after its dense values, checked, read, applied and summed for an aggregate. The rows
// themselves are server/sparse_table.h's.
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/job/partitioner.h"
#include "server/shard_job.h"

namespace ps {

int64_t ShardJob::SparseFloats(
    const google::protobuf::RepeatedPtrField<SparseRows>& entries) const {
  int64_t floats = 0;
  for (const SparseRows& entry : entries) {
    auto table = tables_.find(entry.table());
    if (table != tables_.end()) floats += entry.keys_size() * table->second->width();
  }
  return floats;
}

absl::Status ShardJob::CheckSparse(const google::protobuf::RepeatedPtrField<SparseRows>& entries,
                                   bool distinct) const {
  const std::string prefix = JobPrefix(spec_.job_id());
  for (const SparseRows& entry : entries) {
    if (tables_.count(entry.table()) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "no sparse table \"", entry.table(), "\" in the job (",
          spec_.sparse_tables_size(), " tables); name one of the job's sparse_tables"));
    }
    absl::flat_hash_set<uint64_t> seen;
    for (uint64_t key : entry.keys()) {
      if (SparseShardOf(key, num_ps_) != ps_index_) {
        return absl::InvalidArgumentError(absl::StrCat(
            prefix, "key ", key, " of table \"", entry.table(), "\" is on ps:",
            SparseShardOf(key, num_ps_), ", not ps:", ps_index_,
            "; send each key to SparseShardOf(key, number of ps)"));
      }
      if (distinct && !seen.insert(key).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(prefix, "key ", key, " of table \"", entry.table(),
                         "\" appears twice in one push: sum its gradients first"));
      }
    }
  }
  return absl::OkStatus();
}

std::string ShardJob::FindNonFiniteSparse(
    const google::protobuf::RepeatedPtrField<SparseRows>& entries,
    absl::Span<const float> rows) const {
  size_t at = 0;
  for (const SparseRows& entry : entries) {
    const int64_t width = tables_.at(entry.table())->width();
    for (uint64_t key : entry.keys()) {
      for (int64_t j = 0; j < width; ++j, ++at) {
        if (!std::isfinite(rows[at])) {
          return absl::StrCat(std::isnan(rows[at]) ? "NaN" : "Inf", " in sparse table \"",
                              entry.table(), "\" at key ", key, ", column ", j);
        }
      }
    }
  }
  return "";
}

void ShardJob::ApplySparse(float learning_rate,
                           const google::protobuf::RepeatedPtrField<SparseRows>& entries,
                           absl::Span<const float> rows) {
  size_t at = 0;
  for (const SparseRows& entry : entries) {
    SparseTable& table = *tables_.at(entry.table());
    const size_t floats = entry.keys_size() * static_cast<size_t>(table.width());
    // Checked before (CheckSparse, the shape and finiteness): the update cannot be refused.
    table.Update(learning_rate, entry.keys(), rows.subspan(at, floats), /*allow_non_finite=*/true)
        .IgnoreError();
    at += floats;
  }
}

void ShardJob::AccumulateSparse(const google::protobuf::RepeatedPtrField<SparseRows>& entries,
                                absl::Span<const float> rows, bool first) {
  if (first) sparse_sums_.clear();
  size_t at = 0;
  for (const SparseRows& entry : entries) {
    const int64_t width = tables_.at(entry.table())->width();
    auto& sums = sparse_sums_[entry.table()];
    for (uint64_t key : entry.keys()) {
      std::vector<float>& sum = sums[key];
      if (sum.empty()) sum.assign(width, 0.0f);
      for (int64_t j = 0; j < width; ++j) sum[j] += rows[at++];
    }
  }
}

void ShardJob::ApplySparseSums(float learning_rate, float scale) {
  for (auto& [name, sums] : sparse_sums_) {
    SparseTable& table = *tables_.at(name);
    std::vector<uint64_t> keys;
    std::vector<float> rows;
    keys.reserve(sums.size());
    rows.reserve(sums.size() * table.width());
    for (auto& [key, sum] : sums) {
      keys.push_back(key);
      for (float value : sum) rows.push_back(value * scale);
    }
    table.Update(learning_rate, keys, rows, /*allow_non_finite=*/true).IgnoreError();
  }
  sparse_sums_.clear();
}

void ShardJob::ReadSparse(const google::protobuf::RepeatedPtrField<SparseRows>& entries,
                          absl::Span<float> out) const {
  size_t at = 0;
  for (const SparseRows& entry : entries) {
    SparseTable& table = *tables_.at(entry.table());
    const size_t floats = entry.keys_size() * static_cast<size_t>(table.width());
    // Fails only past the table's row limit (2^40 rows): the rows then read as zeros.
    if (!table.Read(entry.keys(), out.subspan(at, floats)).ok()) {
      std::fill(out.begin() + at, out.begin() + at + floats, 0.0f);
    }
    at += floats;
  }
}

}  // namespace ps
