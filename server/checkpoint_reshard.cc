#include "server/checkpoint_reshard.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "common/checkpoint/shard_checkpoint.h"
#include "common/job/job_schema.h"
#include "common/job/optimizer.h"
#include "common/job/partitioner.h"
#include "proto/checkpoint.pb.h"
#include "server/sparse_table.h"

namespace ps {
namespace {

// One old shard's file, checked against its placement.
struct OldShard {
  int index = 0;
  ShardCheckpointState state;
  std::vector<CheckpointBlock> blocks;
  std::map<int, int> slice_at;  // Old placement index -> position among this shard's slices.
};

class Resharder {
 public:
  Resharder(const CheckpointManifest& manifest, int num_ps, int ps_index)
      : manifest_(manifest), spec_(manifest.parameters()), num_ps_(num_ps),
        ps_index_(ps_index) {}

  absl::Status Prepare();
  // Takes what this shard holds of `old`.
  absl::Status Take(const OldShard& old);
  std::vector<CheckpointBlock> Blocks();

  // Checks old shard `index`'s blocks against the old placement.
  absl::StatusOr<OldShard> Check(int index, std::vector<CheckpointBlock> blocks) const;

 private:
  absl::Status TakeDense(const OldShard& old);
  absl::Status TakeSparse(const OldShard& old);
  absl::Status TakeStatistics(const OldShard& old);
  absl::Status Corrupt(int index, const std::string& what) const {
    return absl::DataLossError(absl::StrCat("checkpoint ", manifest_.name(), ": shard ", index,
                                            " of ", manifest_.num_ps(), ": ", what));
  }

  const CheckpointManifest& manifest_;
  const ParameterSpec& spec_;
  const int num_ps_;
  const int ps_index_;
  Placement old_placement_, new_placement_;
  int num_slots_ = 0;
  std::vector<const SparseTableDef*> tables_;  // In name order, as the blocks hold them.

  // What this shard resumes from, filled as the old shards come.
  ShardCheckpointState state_;
  std::vector<int> mine_;  // New placement indices of this shard's slices.
  std::vector<std::string> values_;                 // Per slice of mine_.
  std::vector<std::string> slots_;                  // Per slice of mine_, per slot.
  std::vector<int64_t> update_counts_;              // Per slice of mine_.
  std::vector<std::vector<std::pair<uint64_t, std::string>>> rows_;  // Per table: key, record.
};

absl::Status Resharder::Prepare() {
  if (num_ps_ < 1 || ps_index_ < 0 || ps_index_ >= num_ps_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps:", ps_index_, " is not a task of a cluster of ", num_ps_, " ps"));
  }
  absl::StatusOr<Placement> old_placement = PlaceVariables(spec_, manifest_.num_ps());
  if (!old_placement.ok()) return old_placement.status();
  old_placement_ = *std::move(old_placement);
  absl::StatusOr<Placement> new_placement = PlaceVariables(spec_, num_ps_);
  if (!new_placement.ok()) return new_placement.status();
  new_placement_ = *std::move(new_placement);
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = Optimizer::Create(spec_.optimizer());
  if (!optimizer.ok()) return optimizer.status();
  num_slots_ = (*optimizer)->num_slots();
  for (const SparseTableDef& table : spec_.sparse_tables()) tables_.push_back(&table);
  std::sort(tables_.begin(), tables_.end(),
            [](const SparseTableDef* a, const SparseTableDef* b) { return a->name() < b->name(); });
  rows_.resize(tables_.size());
  mine_ = new_placement_.SlicesOn(ps_index_);
  for (int index : mine_) {
    const std::string zeros(static_cast<size_t>(new_placement_.slices[index].num_bytes()), '\0');
    values_.push_back(zeros);
    for (int s = 0; s < num_slots_; ++s) slots_.push_back(zeros);
    update_counts_.push_back(0);
  }
  return absl::OkStatus();
}

absl::StatusOr<OldShard> Resharder::Check(int index, std::vector<CheckpointBlock> blocks) const {
  OldShard shard;
  shard.index = index;
  absl::StatusOr<ShardCheckpointState> state = ReadShardCheckpointState(blocks);
  if (!state.ok()) return Corrupt(index, std::string(state.status().message()));
  shard.state = *std::move(state);
  if (shard.state.num_ps() != manifest_.num_ps() || shard.state.ps_index() != index) {
    return Corrupt(index, absl::StrCat("its file is ps:", shard.state.ps_index(), "'s of ",
                                       shard.state.num_ps(), ", not this shard's"));
  }
  // Who is in the job may differ between its files: a growth reaches each shard in turn.
  if (!google::protobuf::util::MessageDifferencer::Equivalent(
          WithoutMembership(shard.state.spec()), WithoutMembership(spec_))) {
    return Corrupt(index, "its file is of another job than the manifest's");
  }
  const std::vector<int> slices = old_placement_.SlicesOn(index);
  const size_t expected =
      ShardBlockLayout{slices.size(), static_cast<size_t>(num_slots_), tables_.size()}.size();
  if (blocks.size() != expected ||
      shard.state.slice_update_counts_size() != static_cast<int>(slices.size())) {
    return Corrupt(index, absl::StrCat("its file holds ", blocks.size(), " blocks and ",
                                       shard.state.slice_update_counts_size(),
                                       " slice update counts; the manifest's job places ",
                                       slices.size(), " slices there, ", expected, " blocks"));
  }
  for (size_t i = 0; i < slices.size(); ++i) shard.slice_at[slices[i]] = static_cast<int>(i);
  shard.blocks = std::move(blocks);
  return shard;
}

absl::Status Resharder::Take(const OldShard& old) {
  absl::Status status = TakeDense(old);
  if (status.ok()) status = TakeSparse(old);
  if (status.ok()) status = TakeStatistics(old);
  return status;
}

absl::Status Resharder::TakeDense(const OldShard& old) {
  const ShardBlockLayout layout{old.slice_at.size(), static_cast<size_t>(num_slots_),
                                tables_.size()};
  for (const auto& [o, at] : old.slice_at) {
    const SlicePlacement& from_slice = old_placement_.slices[o];
    for (size_t m = 0; m < mine_.size(); ++m) {
      const SlicePlacement& slice = new_placement_.slices[mine_[m]];
      const int64_t begin = std::max(from_slice.row_begin, slice.row_begin);
      const int64_t end = std::min(from_slice.row_begin + from_slice.row_count,
                                   slice.row_begin + slice.row_count);
      if (from_slice.variable_index != slice.variable_index || begin >= end) continue;
      const size_t row_bytes = static_cast<size_t>(slice.row_size) * sizeof(float);
      const size_t from = static_cast<size_t>(begin - from_slice.row_begin) * row_bytes;
      const size_t to = static_cast<size_t>(begin - slice.row_begin) * row_bytes;
      const size_t length = static_cast<size_t>(end - begin) * row_bytes;
      auto copy = [&](const CheckpointBlock& block, uint32_t tag, std::string* into) {
        if (block.tag != tag ||
            block.bytes().size() != static_cast<size_t>(from_slice.num_bytes())) {
          return Corrupt(old.index, absl::StrCat("its values or slots of ", from_slice.variable,
                                                 " are not the slice's size"));
        }
        std::memcpy(into->data() + to, block.bytes().data() + from, length);
        return absl::OkStatus();
      };
      absl::Status status = copy(old.blocks[layout.values(at)], kValuesBlock, &values_[m]);
      for (int s = 0; status.ok() && s < num_slots_; ++s) {
        status = copy(old.blocks[layout.slot(at, s)], kSlotsBlock, &slots_[m * num_slots_ + s]);
      }
      if (!status.ok()) return status;
      update_counts_[m] = std::max(update_counts_[m], old.state.slice_update_counts(at));
    }
  }
  return absl::OkStatus();
}

absl::Status Resharder::TakeSparse(const OldShard& old) {
  const ShardBlockLayout layout{old.slice_at.size(), static_cast<size_t>(num_slots_),
                                tables_.size()};
  for (size_t t = 0; t < tables_.size(); ++t) {
    // SparseTable::SaveRows' record: the key, the update count, the values and each slot.
    const auto record =
        static_cast<size_t>(SparseTable::SavedRowBytes(tables_[t]->width(), num_slots_));
    const CheckpointBlock& block = old.blocks[layout.rows(t)];
    const absl::string_view bytes = block.bytes();
    if (block.tag != kSparseRowsBlock || bytes.size() % record != 0) {
      return Corrupt(old.index, absl::StrCat("its rows of sparse table \"", tables_[t]->name(),
                                             "\" are not whole rows of width ",
                                             tables_[t]->width()));
    }
    for (size_t at = 0; at < bytes.size(); at += record) {
      uint64_t key = 0;
      std::memcpy(&key, bytes.data() + at, sizeof(key));
      // Each key on the one shard that owns it: no key comes twice.
      if (SparseShardOf(key, manifest_.num_ps()) != old.index) {
        return Corrupt(old.index, absl::StrCat("it holds key ", key, " of sparse table \"",
                                               tables_[t]->name(), "\", which ps:",
                                               SparseShardOf(key, manifest_.num_ps()),
                                               " owns"));
      }
      if (SparseShardOf(key, num_ps_) == ps_index_) {
        rows_[t].emplace_back(key, std::string(bytes.substr(at, record)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Resharder::TakeStatistics(const OldShard& old) {
  state_.set_version(std::max(state_.version(), old.state.version()));
  state_.set_updates_started(std::max(state_.updates_started(), old.state.updates_started()));
  // The data handout lives on the first shard, before and after.
  if (old.index == 0 && ps_index_ == 0 && old.state.has_handout()) {
    *state_.mutable_handout() = old.state.handout();
  }
  if (old.index != ps_index_ % manifest_.num_ps()) return absl::OkStatus();
  // Every shard sees every dense gradient: a shard's counts are the job's as one shard saw
  // them, and the new shard goes on from those of the old one it takes the place of (ShardJob::
  // Resume checks them).
  *state_.mutable_staleness() = old.state.staleness();
  state_.set_applied_gradients(old.state.applied_gradients());
  *state_.mutable_dropped() = old.state.dropped();
  *state_.mutable_rejected() = old.state.rejected();
  state_.set_duplicate_pushes(old.state.duplicate_pushes());
  return absl::OkStatus();
}

std::vector<CheckpointBlock> Resharder::Blocks() {
  *state_.mutable_spec() = spec_;
  state_.set_num_ps(num_ps_);
  state_.set_ps_index(ps_index_);
  for (int64_t count : update_counts_) state_.add_slice_update_counts(count);
  std::vector<CheckpointBlock> blocks;
  blocks.emplace_back(kStateBlock, state_.SerializeAsString());
  for (std::string& bytes : values_) blocks.emplace_back(kValuesBlock, std::move(bytes));
  for (std::string& bytes : slots_) blocks.emplace_back(kSlotsBlock, std::move(bytes));
  for (auto& rows : rows_) {
    std::sort(rows.begin(), rows.end());
    std::string merged;
    for (auto& [key, record] : rows) merged += record;
    blocks.emplace_back(kSparseRowsBlock, std::move(merged));
  }
  for (size_t t = 0; t < tables_.size(); ++t) blocks.emplace_back(kSparseSumBlock, "");
  blocks.emplace_back(kSumBlock, "");
  return blocks;
}

}  // namespace

absl::StatusOr<std::vector<CheckpointBlock>> ReshardCheckpoint(const CheckpointManifest& manifest,
                                                               int num_ps, int ps_index,
                                                               const ShardBlocksReader& read_shard) {
  Resharder resharder(manifest, num_ps, ps_index);
  absl::Status status = resharder.Prepare();
  if (!status.ok()) return status;
  for (int index = 0; index < manifest.num_ps(); ++index) {
    absl::StatusOr<std::vector<CheckpointBlock>> blocks = read_shard(index);
    if (!blocks.ok()) return blocks.status();
    absl::StatusOr<OldShard> old = resharder.Check(index, *std::move(blocks));
    if (!old.ok()) return old.status();
    status = resharder.Take(*old);
    if (!status.ok()) return status;
  }
  return resharder.Blocks();
}

}  // namespace ps
