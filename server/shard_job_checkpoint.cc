// ShardJob's checkpoints: what a shard's checkpoint holds, as blocks of a checkpoint file
// (server/checkpoint_file.h), and the job restored from them. The blocks, in order:
//   kStateBlock    ShardCheckpointState (proto/checkpoint.proto), serialized: the spec, the
//                  task, version, schedule position, the rule's state, push ids, statistics,
//                  and each slice's update count;
//   kValuesBlock   one per slice, in placement order: its values, float32 in host order
//                  (little-endian on every platform this builds for);
//   kSlotsBlock    one per slice: its optimizer slots one after another (momentum, AdaGrad's
//                  accumulator, Adam's two moments), float32;
//   kSumBlock      the open aggregate's sum (SYNC, SOFTSYNC), empty when none is open.
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/shard_job.h"

namespace ps {
namespace {

enum BlockTag : uint32_t {
  kStateBlock = 1,
  kValuesBlock = 2,
  kSlotsBlock = 3,
  kSumBlock = 4,
};

std::string FloatBytes(const float* data, size_t count) {
  return std::string(reinterpret_cast<const char*>(data), count * sizeof(float));
}

// Copies `bytes` into `out`; false unless they are exactly out.size() floats.
bool CopyFloats(const std::string& bytes, absl::Span<float> out) {
  if (bytes.size() != out.size() * sizeof(float)) return false;
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return true;
}

}  // namespace

std::vector<CheckpointBlock> ShardJob::Checkpoint() {
  ShardCheckpointState state;
  std::vector<std::unique_ptr<ValuesReader>> values;  // Held, not copied, while updates wait.
  std::vector<CheckpointBlock> slots;
  std::string sum;
  {
    absl::MutexLock aggregate_lock(&aggregate_mu_);  // No aggregate being summed or applied.
    bool open_aggregate;
    {
      absl::MutexLock lock(&mu_);
      checkpointing_ = true;  // New updates wait at admission...
      mu_.Await(absl::Condition(this, &ShardJob::NothingApplyingLocked));  // ...these finish.
      SaveStateLocked(&state);
      open_aggregate = !rule_->open_aggregate().empty();
    }
    // No update starts or is in flight until checkpointing_ is cleared, so the slices hold the
    // state above; pulls go on meanwhile.
    for (const auto& slice : slices_) {
      absl::MutexLock slice_lock(&slice->mu);
      state.add_slice_update_counts(slice->update_count);
      values.push_back(std::make_unique<ValuesReader>(slice->values));
      CheckpointBlock slot_block{kSlotsBlock, ""};
      slot_block.payload.reserve(slice->slots.size() * slice->placement.num_elements() *
                                 sizeof(float));
      for (const std::vector<float>& slot : slice->slots) {
        slot_block.payload.append(reinterpret_cast<const char*>(slot.data()),
                                  slot.size() * sizeof(float));
      }
      slots.push_back(std::move(slot_block));
    }
    if (open_aggregate) sum = FloatBytes(sum_.data(), sum_.size());
    absl::MutexLock lock(&mu_);
    checkpointing_ = false;
  }
  // Updates go on; the values held stay as they were read (a push writes to a fresh copy).
  std::vector<CheckpointBlock> blocks;
  blocks.push_back({kStateBlock, state.SerializeAsString()});
  for (const std::unique_ptr<ValuesReader>& reader : values) {
    blocks.push_back({kValuesBlock, FloatBytes(reader->buffer().data(), reader->buffer().size())});
  }
  for (CheckpointBlock& block : slots) blocks.push_back(std::move(block));
  blocks.push_back({kSumBlock, std::move(sum)});
  return blocks;
}

void ShardJob::SaveStateLocked(ShardCheckpointState* state) const {
  *state->mutable_spec() = spec_;
  state->set_num_ps(num_ps_);
  state->set_ps_index(ps_index_);
  state->set_version(version_);
  state->set_updates_started(updates_started_);
  rule_->SaveState(state);
  for (int w = 0; w < spec_.num_workers(); ++w) {
    state->add_last_push_id(last_push_id_[w]);
    state->add_applied_by_worker(applied_by_worker_[w]);
    staleness_by_worker_[w].ToProto(state->add_staleness_by_worker());
  }
  staleness_.ToProto(state->mutable_staleness());
  state->set_applied_gradients(applied_gradients_);
  for (const auto& [reason, count] : dropped_) (*state->mutable_dropped())[reason] = count;
  for (const auto& [reason, count] : rejected_) (*state->mutable_rejected())[reason] = count;
  state->set_duplicate_pushes(duplicate_pushes_);
}

absl::StatusOr<std::unique_ptr<ShardJob>> ShardJob::Restore(
    const std::vector<CheckpointBlock>& blocks, int num_ps, int ps_index) {
  ShardCheckpointState state;
  if (blocks.empty() || blocks[0].tag != kStateBlock ||
      !state.ParseFromString(blocks[0].payload)) {
    return absl::DataLossError("the checkpoint does not begin with a shard's state");
  }
  const std::string prefix = JobPrefix(state.spec().job_id());
  if (state.num_ps() != num_ps || state.ps_index() != ps_index) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "the checkpoint was taken on ps:", state.ps_index(), " of ", state.num_ps(),
        " tasks; this is ps:", ps_index, " of ", num_ps,
        ": restore each shard's checkpoint on its own task of a cluster of as many ps"));
  }
  absl::StatusOr<std::unique_ptr<ShardJob>> job = Create(state.spec(), num_ps, ps_index);
  if (!job.ok()) return job.status();
  const size_t num_slices = (*job)->slices_.size();
  if (blocks.size() != 2 + 2 * num_slices ||
      state.slice_update_counts_size() != static_cast<int>(num_slices)) {
    return absl::DataLossError(absl::StrCat(prefix, "the checkpoint has ", blocks.size(),
                                            " blocks; this shard's ", num_slices,
                                            " slices take ", 2 + 2 * num_slices));
  }
  for (size_t i = 0; i < num_slices; ++i) {
    Slice& slice = *(*job)->slices_[i];
    const CheckpointBlock& values = blocks[1 + i];
    const CheckpointBlock& slots = blocks[1 + num_slices + i];
    absl::MutexLock lock(&slice.mu);
    const size_t elements = slice.values->buffer->size();
    bool fits = values.tag == kValuesBlock && slots.tag == kSlotsBlock &&
                CopyFloats(values.payload, absl::MakeSpan(*slice.values->buffer)) &&
                slots.payload.size() == slice.slots.size() * elements * sizeof(float);
    for (size_t s = 0; fits && s < slice.slots.size(); ++s) {
      std::memcpy(slice.slots[s].data(), slots.payload.data() + s * elements * sizeof(float),
                  elements * sizeof(float));
    }
    if (!fits) {
      return absl::DataLossError(absl::StrCat(prefix, "the checkpoint's values or slots of ",
                                              slice.placement.variable, " are not its size"));
    }
    slice.update_count = state.slice_update_counts(static_cast<int>(i));
  }
  const CheckpointBlock& sum = blocks.back();
  absl::MutexLock aggregate_lock(&(*job)->aggregate_mu_);
  absl::MutexLock lock(&(*job)->mu_);
  absl::Status restored = (*job)->RestoreStateLocked(state);
  if (!restored.ok()) {
    return absl::Status(restored.code(), prefix + std::string(restored.message()));
  }
  const bool open = !(*job)->rule_->open_aggregate().empty();
  (*job)->sum_.assign(open ? (*job)->num_elements_ : 0, 0.0f);
  if (sum.tag != kSumBlock || !CopyFloats(sum.payload, absl::MakeSpan((*job)->sum_))) {
    return absl::DataLossError(prefix + "the checkpoint's open aggregate is not the shard's size");
  }
  return job;
}

absl::Status ShardJob::RestoreStateLocked(const ShardCheckpointState& state) {
  const int workers = spec_.num_workers();
  if (state.last_push_id_size() != workers || state.applied_by_worker_size() != workers ||
      state.staleness_by_worker_size() != workers || state.version() < 0 ||
      state.updates_started() < 0) {
    return absl::DataLossError("the checkpoint's per-worker state is not the job's");
  }
  version_ = state.version();
  updates_started_ = state.updates_started();
  for (int w = 0; w < workers; ++w) {
    last_push_id_[w] = state.last_push_id(w);
    applied_by_worker_[w] = state.applied_by_worker(w);
    absl::StatusOr<StalenessHistogram> histogram =
        StalenessHistogram::FromProto(state.staleness_by_worker(w));
    if (!histogram.ok()) return histogram.status();
    staleness_by_worker_[w] = *std::move(histogram);
  }
  absl::StatusOr<StalenessHistogram> histogram = StalenessHistogram::FromProto(state.staleness());
  if (!histogram.ok()) return histogram.status();
  staleness_ = *std::move(histogram);
  applied_gradients_ = state.applied_gradients();
  dropped_ = {state.dropped().begin(), state.dropped().end()};
  rejected_ = {state.rejected().begin(), state.rejected().end()};
  duplicate_pushes_ = state.duplicate_pushes();
  return rule_->RestoreState(state);
}

}  // namespace ps
