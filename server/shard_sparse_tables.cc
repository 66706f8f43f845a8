#include "server/shard_sparse_tables.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/shard_checkpoint.h"
#include "common/job/job_schema.h"
#include "common/job/partitioner.h"
#include "common/tensor/finite.h"

namespace ps {

absl::StatusOr<std::unique_ptr<ShardSparseTables>> ShardSparseTables::Create(
    const ParameterSpec& spec, int num_ps, int ps_index) {
  std::unique_ptr<ShardSparseTables> tables(
      new ShardSparseTables(JobPrefix(spec.job_id()), num_ps, ps_index));
  for (const SparseTableDef& def : spec.sparse_tables()) {
    SparseTable::Options options;
    options.name = def.name();
    options.width = def.width();
    options.initializer = def.initializer();
    options.seed = spec.seed();
    options.optimizer = spec.optimizer();
    absl::StatusOr<std::unique_ptr<SparseTable>> table = SparseTable::Create(options);
    if (!table.ok()) return table.status();
    tables->tables_.emplace(def.name(), *std::move(table));
  }
  return tables;
}

int64_t ShardSparseTables::Floats(const Entries& entries) const {
  int64_t floats = 0;
  for (const SparseRows& entry : entries) {
    auto table = tables_.find(entry.table());
    if (table != tables_.end()) floats += entry.keys_size() * table->second->width();
  }
  return floats;
}

absl::Status ShardSparseTables::Check(const Entries& entries, bool distinct) const {
  for (const SparseRows& entry : entries) {
    if (tables_.count(entry.table()) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          job_prefix_, "no sparse table \"", entry.table(), "\" in the job (", tables_.size(),
          " tables); name one of the job's sparse_tables"));
    }
    absl::flat_hash_set<uint64_t> seen;
    for (uint64_t key : entry.keys()) {
      if (SparseShardOf(key, num_ps_) != ps_index_) {
        return absl::InvalidArgumentError(absl::StrCat(
            job_prefix_, "key ", key, " of table \"", entry.table(), "\" is on ps:",
            SparseShardOf(key, num_ps_), ", not ps:", ps_index_,
            "; send each key to SparseShardOf(key, number of ps)"));
      }
      if (distinct && !seen.insert(key).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(job_prefix_, "key ", key, " of table \"", entry.table(),
                         "\" appears twice in one push: sum its gradients first"));
      }
    }
  }
  return absl::OkStatus();
}

std::string ShardSparseTables::FindNonFinite(const Entries& entries,
                                             absl::Span<const float> rows) const {
  size_t at = 0;
  for (const SparseRows& entry : entries) {
    const int64_t width = At(entry.table()).width();
    const size_t floats = entry.keys_size() * static_cast<size_t>(width);
    const int64_t bad = FirstNonFinite(rows.subspan(at, floats));
    if (bad >= 0) {
      return absl::StrCat(std::isnan(rows[at + bad]) ? "NaN" : "Inf", " in sparse table \"",
                          entry.table(), "\" at key ", entry.keys(bad / width), ", column ",
                          bad % width);
    }
    at += floats;
  }
  return "";
}

void ShardSparseTables::Read(const Entries& entries, absl::Span<float> out) const {
  size_t at = 0;
  for (const SparseRows& entry : entries) {
    SparseTable& table = At(entry.table());
    const size_t floats = entry.keys_size() * static_cast<size_t>(table.width());
    // Fails only past the table's row limit (2^40 rows): the rows then read as zeros.
    if (!table.Read(entry.keys(), out.subspan(at, floats)).ok()) {
      std::fill(out.begin() + at, out.begin() + at + floats, 0.0f);
    }
    at += floats;
  }
}

void ShardSparseTables::Apply(float learning_rate, const Entries& entries,
                              absl::Span<const float> rows) {
  size_t at = 0;
  for (const SparseRows& entry : entries) {
    SparseTable& table = At(entry.table());
    const size_t floats = entry.keys_size() * static_cast<size_t>(table.width());
    // Checked before (Check, the shape and finiteness): the update cannot be refused.
    table.Update(learning_rate, entry.keys(), rows.subspan(at, floats), /*allow_non_finite=*/true)
        .IgnoreError();
    at += floats;
  }
}

void ShardSparseTables::Accumulate(const Entries& entries, absl::Span<const float> rows,
                                   bool first) {
  absl::MutexLock lock(&sums_mu_);
  if (first) sums_.clear();
  size_t at = 0;
  for (const SparseRows& entry : entries) {
    const int64_t width = At(entry.table()).width();
    auto& sums = sums_[entry.table()];
    for (uint64_t key : entry.keys()) {
      std::vector<float>& sum = sums[key];
      if (sum.empty()) sum.assign(width, 0.0f);
      for (int64_t j = 0; j < width; ++j) sum[j] += rows[at++];
    }
  }
}

void ShardSparseTables::ApplySums(float learning_rate, float scale) {
  absl::MutexLock lock(&sums_mu_);
  for (auto& [name, sums] : sums_) {
    SparseTable& table = At(name);
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
  sums_.clear();
}

std::map<std::string, int64_t> ShardSparseTables::RowCounts() const {
  std::map<std::string, int64_t> rows;
  for (const auto& [name, table] : tables_) rows[name] = table->rows();
  return rows;
}

std::vector<std::string> ShardSparseTables::SaveRows() const {
  std::vector<std::string> rows;
  for (const auto& [name, table] : tables_) rows.push_back(table->SaveRows());
  return rows;
}

std::vector<std::string> ShardSparseTables::SaveSums() const {
  absl::MutexLock lock(&sums_mu_);
  std::vector<std::string> blocks;
  for (const auto& [name, table] : tables_) {
    std::string& bytes = blocks.emplace_back();
    auto open = sums_.find(name);
    if (open == sums_.end()) continue;
    std::vector<uint64_t> keys;
    keys.reserve(open->second.size());
    for (const auto& [key, sum] : open->second) keys.push_back(key);
    std::sort(keys.begin(), keys.end());
    for (uint64_t key : keys) {
      bytes.append(reinterpret_cast<const char*>(&key), sizeof(key));
      bytes.append(reinterpret_cast<const char*>(open->second.at(key).data()),
                   static_cast<size_t>(table->width()) * sizeof(float));
    }
  }
  return blocks;
}

absl::Status ShardSparseTables::LoadRows(absl::Span<const CheckpointBlock> blocks) {
  size_t at = 0;
  for (const auto& [name, table] : tables_) {
    const CheckpointBlock& rows = blocks[at++];
    absl::Status loaded = rows.tag == kSparseRowsBlock
                              ? table->LoadRows(rows.bytes())
                              : absl::DataLossError("the block is not a table's rows");
    if (!loaded.ok()) {
      return absl::Status(loaded.code(),
                          absl::StrCat(job_prefix_, "the checkpoint's rows of sparse table \"",
                                       name, "\": ", loaded.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ShardSparseTables::LoadSums(absl::Span<const CheckpointBlock> blocks, bool open) {
  absl::MutexLock lock(&sums_mu_);
  size_t at = 0;
  for (const auto& [name, table] : tables_) {
    const CheckpointBlock& block = blocks[at++];
    const absl::string_view bytes = block.bytes();
    if (bytes.empty()) continue;
    const size_t width = static_cast<size_t>(table->width());
    const size_t record = sizeof(uint64_t) + width * sizeof(float);
    if (block.tag != kSparseSumBlock || !open || bytes.size() % record != 0) {
      return absl::DataLossError(absl::StrCat(
          job_prefix_, "the checkpoint's open aggregate of sparse table \"", name,
          "\" is not its rows"));
    }
    auto& sums = sums_[name];
    for (size_t offset = 0; offset < bytes.size(); offset += record) {
      uint64_t key;
      std::memcpy(&key, bytes.data() + offset, sizeof(key));
      std::vector<float>& sum = sums[key];
      sum.resize(width);
      std::memcpy(sum.data(), bytes.data() + offset + sizeof(key), width * sizeof(float));
    }
  }
  return absl::OkStatus();
}

}  // namespace ps
