// ShardJob's checkpoints: what a shard's checkpoint holds, as the blocks
// common/checkpoint/shard_checkpoint.h lists, and the job restored or resumed from them.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/shard_checkpoint.h"
#include "common/job/job_schema.h"
#include "server/shard_job.h"

namespace ps {
namespace {

std::string FloatBytes(const float* data, size_t count) {
  return std::string(reinterpret_cast<const char*>(data), count * sizeof(float));
}

// Copies `bytes` into `out`; false unless they are exactly out.size() floats.
bool CopyFloats(absl::string_view bytes, absl::Span<float> out) {
  if (bytes.size() != out.size() * sizeof(float)) return false;
  // An empty block's data() may be null, which memcpy must not get even for 0 bytes (found by
  // server/checkpoint_fuzz under UBSan).
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return true;
}

}  // namespace

// What a checkpoint takes between updates: the state, and each slice's values and slots, held
// (not copied: an update meanwhile writes to a fresh copy).
struct ShardJob::CapturedState {
  ShardCheckpointState state;
  std::vector<int64_t> steps_pushed;  // Per worker.
  // The fewest of steps_pushed among the workers in the job's count: all but those it grew by
  // that have not joined yet (they have pushed nothing; a resumed run starts them at its resume
  // step: CheckpointCoordinator).
  int64_t min_steps_pushed = 0;
  int64_t clock = 0;                  // The rule's checkpoint_clock at the state above.
  std::vector<std::shared_ptr<ValuesReader>> values;  // Per slice.
  std::vector<std::shared_ptr<ValuesReader>> slots;   // Per slice, per slot.
  // Per sparse table (by name): its rows, copied (a table changes in place).
  std::vector<std::string> table_rows;

  // The blocks of the file (common/checkpoint/shard_checkpoint.h), the tensors held (`copy`: false)
  // or copied, with the open aggregate's rows of each table (`sparse_sums`: none, or one per table)
  // and `sum` last.
  std::vector<CheckpointBlock> Blocks(bool copy, std::vector<std::string> sparse_sums,
                                      std::string sum) const {
    std::vector<CheckpointBlock> blocks;
    blocks.emplace_back(kStateBlock, state.SerializeAsString());
    auto add = [&blocks, copy](uint32_t tag, const std::shared_ptr<ValuesReader>& reader) {
      const absl::string_view bytes(reinterpret_cast<const char*>(reader->buffer().data()),
                                    reader->buffer().size() * sizeof(float));
      blocks.push_back(copy ? CheckpointBlock(tag, std::string(bytes))
                            : CheckpointBlock::External(tag, bytes, reader));
    };
    for (const std::shared_ptr<ValuesReader>& reader : values) add(kValuesBlock, reader);
    for (const std::shared_ptr<ValuesReader>& reader : slots) add(kSlotsBlock, reader);
    for (const std::string& rows : table_rows) blocks.emplace_back(kSparseRowsBlock, rows);
    sparse_sums.resize(table_rows.size());
    for (std::string& rows : sparse_sums) blocks.emplace_back(kSparseSumBlock, std::move(rows));
    blocks.emplace_back(kSumBlock, std::move(sum));
    return blocks;
  }
};

ShardJob::CapturedState ShardJob::CaptureBetweenUpdates() {
  CapturedState captured;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &ShardJob::NotCheckpointingLocked));
    checkpointing_ = true;  // New updates wait at admission...
    mu_.Await(absl::Condition(this, &ShardJob::NothingApplyingLocked));  // ...these finish.
    SaveStateLocked(&captured.state);
    captured.steps_pushed = steps_pushed_;
    captured.min_steps_pushed = MinStepsPushedLocked();
    captured.clock = rule_->checkpoint_clock(version_);
  }
  // No update starts or is in flight until checkpointing_ is cleared, so the slices hold the
  // state above; pulls go on meanwhile.
  for (const auto& slice : slices_) {
    absl::MutexLock slice_lock(&slice->mu);
    captured.state.add_slice_update_counts(slice->update_count);
    captured.values.push_back(std::make_shared<ValuesReader>(slice->values));
    for (const std::shared_ptr<Values>& slot : slice->slots) {
      captured.slots.push_back(std::make_shared<ValuesReader>(slot));
    }
  }
  captured.table_rows = sparse_->SaveRows();
  absl::MutexLock lock(&mu_);
  checkpointing_ = false;
  return captured;
}

std::vector<CheckpointBlock> ShardJob::Checkpoint() {
  CapturedState captured;
  std::string sum;
  std::vector<std::string> sparse_sums;
  {
    absl::MutexLock aggregate_lock(&aggregate_mu_);  // No aggregate being summed or applied.
    captured = CaptureBetweenUpdates();
    if (captured.state.open_aggregate_size() > 0) {
      sum = FloatBytes(sum_.data(), sum_.size());
      sparse_sums = sparse_->SaveSums();
    }
  }
  // Updates go on; the tensors held stay as they were read.
  return captured.Blocks(/*copy=*/true, std::move(sparse_sums), std::move(sum));
}

absl::Status ShardJob::ArmCheckpoint(const std::string& run_id, int64_t seq, int64_t at_clock,
                                     CheckpointSink sink) {
  absl::Status status = CheckRun(run_id, "checkpoint");
  if (!status.ok()) return status;
  ArmedCheckpoint armed{seq, at_clock, std::move(sink)};
  {
    absl::MutexLock lock(&mu_);
    const int64_t clock = rule_->checkpoint_clock(version_);
    if (rule_->agreed_checkpoint_clock() && at_clock >= 0 && clock > at_clock) {
      return absl::FailedPreconditionError(absl::StrCat(
          JobPrefix(spec().job_id()), "checkpoint ", seq, " was armed for clock ", at_clock,
          " but ps:", ps_index_, " is at ", clock, " already; arm it further ahead"));
    }
    if (at_clock >= 0 && clock < at_clock) {
      checkpoints_.Arm(std::move(armed));
      return absl::OkStatus();
    }
  }
  // Due now. SYNC's values change only when a step is applied, under aggregate_mu_.
  if (aggregates_) {
    absl::MutexLock aggregate_lock(&aggregate_mu_);
    TakeCheckpoint(std::move(armed));
  } else {
    TakeCheckpoint(std::move(armed));
  }
  return absl::OkStatus();
}

void ShardJob::TakeCheckpoint(ArmedCheckpoint armed) {
  CapturedState captured = CaptureBetweenUpdates();
  ShardCheckpointState& state = captured.state;
  state.clear_open_aggregate();  // A resume point: the workers push that step again.
  TakenCheckpoint taken;
  taken.entry.set_seq(armed.seq);
  taken.entry.set_ps_index(ps_index_);
  taken.entry.set_version(state.version());
  taken.entry.set_clock(captured.clock);
  taken.entry.set_min_steps_pushed(captured.min_steps_pushed);
  for (int64_t steps : captured.steps_pushed) taken.entry.add_steps_pushed(steps);
  taken.blocks = captured.Blocks(/*copy=*/false, {}, "");
  armed.sink(std::move(taken));
}

int64_t ShardJob::MinStepsPushedLocked() const {
  int64_t fewest = INT64_MAX;
  for (size_t w = 0; w < steps_pushed_.size(); ++w) {
    if (incarnation_[w] != kNotJoined) fewest = std::min(fewest, steps_pushed_[w]);
  }
  return fewest == INT64_MAX ? 0 : fewest;
}

void ShardJob::CheckpointWritten(const ShardCheckpoint& entry) { checkpoints_.Written(entry); }

void ShardJob::SaveStateLocked(ShardCheckpointState* state) const {
  *state->mutable_spec() = spec();
  state->set_num_ps(num_ps_);
  state->set_ps_index(ps_index_);
  state->set_version(version_);
  state->set_updates_started(updates_started_);
  rule_->SaveState(state);
  for (int w = 0; w < spec().num_workers(); ++w) {
    state->add_last_push_id(last_push_id_[w]);
    state->add_applied_by_worker(applied_by_worker_[w]);
    staleness_by_worker_[w].ToProto(state->add_staleness_by_worker());
  }
  staleness_.ToProto(state->mutable_staleness());
  state->set_applied_gradients(applied_gradients_);
  for (const auto& [reason, count] : dropped_) (*state->mutable_dropped())[reason] = count;
  for (const auto& [reason, count] : rejected_) (*state->mutable_rejected())[reason] = count;
  state->set_duplicate_pushes(duplicate_pushes_);
  if (handout_ != nullptr) handout_->Save(state->mutable_handout());
  if (spec().has_data_handout()) seen_batches_.Save(state);
}

namespace {

// The shard state at the head of checkpoint `blocks`, taken on task `ps_index` of `num_ps`.
absl::StatusOr<ShardCheckpointState> ReadShardState(const std::vector<CheckpointBlock>& blocks,
                                                    int num_ps, int ps_index) {
  absl::StatusOr<ShardCheckpointState> read = ReadShardCheckpointState(blocks);
  if (!read.ok()) return read.status();
  const ShardCheckpointState& state = *read;
  if (state.num_ps() != num_ps || state.ps_index() != ps_index) {
    return absl::FailedPreconditionError(absl::StrCat(
        JobPrefix(state.spec().job_id()), "the checkpoint was taken on ps:", state.ps_index(),
        " of ", state.num_ps(), " tasks; this is ps:", ps_index, " of ", num_ps,
        ": restore each shard's checkpoint on its own task of a cluster of as many ps"));
  }
  return state;
}

}  // namespace

absl::Status ShardJob::RestoreSlices(const std::vector<CheckpointBlock>& blocks,
                                     const ShardCheckpointState& state) {
  const std::string prefix = JobPrefix(spec().job_id());
  const size_t num_slices = slices_.size();
  const size_t num_slots = static_cast<size_t>(optimizer_->num_slots());
  const ShardBlockLayout layout{num_slices, num_slots, sparse_->size()};
  const size_t expected = layout.size();
  if (blocks.size() != expected ||
      state.slice_update_counts_size() != static_cast<int>(num_slices)) {
    return absl::DataLossError(absl::StrCat(prefix, "the checkpoint has ", blocks.size(),
                                            " blocks; this shard's ", num_slices, " slices and ",
                                            sparse_->size(),
                                            " sparse tables under its optimizer "
                                            "take ",
                                            expected));
  }
  for (size_t i = 0; i < num_slices; ++i) {
    Slice& slice = *slices_[i];
    absl::MutexLock lock(&slice.mu);
    const CheckpointBlock& values = blocks[layout.values(i)];
    bool fits = values.tag == kValuesBlock &&
                CopyFloats(values.bytes(), absl::MakeSpan(*slice.values->buffer));
    for (size_t s = 0; fits && s < num_slots; ++s) {
      const CheckpointBlock& slot = blocks[layout.slot(i, s)];
      fits = slot.tag == kSlotsBlock &&
             CopyFloats(slot.bytes(), absl::MakeSpan(*slice.slots[s]->buffer));
    }
    if (!fits) {
      return absl::DataLossError(absl::StrCat(prefix, "the checkpoint's values or slots of ",
                                              slice.placement.variable, " are not its size"));
    }
    slice.update_count = state.slice_update_counts(static_cast<int>(i));
  }
  return sparse_->LoadRows(
      absl::MakeConstSpan(blocks).subspan(layout.rows(0), sparse_->size()));
}

absl::StatusOr<std::unique_ptr<ShardJob>> ShardJob::Restore(
    const std::vector<CheckpointBlock>& blocks, int num_ps, int ps_index, Clock* clock) {
  absl::StatusOr<ShardCheckpointState> state = ReadShardState(blocks, num_ps, ps_index);
  if (!state.ok()) return state.status();
  absl::StatusOr<std::unique_ptr<ShardJob>> job = Create(state->spec(), num_ps, ps_index, clock);
  if (!job.ok()) return job.status();
  absl::Status status = (*job)->RestoreSlices(blocks, *state);
  if (!status.ok()) return status;
  const std::string prefix = JobPrefix(state->spec().job_id());
  absl::MutexLock aggregate_lock(&(*job)->aggregate_mu_);
  absl::MutexLock lock(&(*job)->mu_);
  absl::Status restored = (*job)->RestoreStateLocked(*state);
  if (!restored.ok()) {
    return absl::Status(restored.code(), prefix + std::string(restored.message()));
  }
  const bool open = !(*job)->rule_->open_aggregate().empty();
  (*job)->sum_.assign(open ? (*job)->num_elements_ : 0, 0.0f);
  if (blocks.back().tag != kSumBlock ||
      !CopyFloats(blocks.back().bytes(), absl::MakeSpan((*job)->sum_))) {
    return absl::DataLossError(prefix + "the checkpoint's open aggregate is not the shard's size");
  }
  // The open aggregate's rows of each table, after the tables' own rows.
  ShardSparseTables& sparse = *(*job)->sparse_;
  status = sparse.LoadSums(
      absl::MakeConstSpan(blocks).subspan(blocks.size() - 1 - sparse.size(), sparse.size()), open);
  if (!status.ok()) return status;
  return job;
}

absl::Status ShardJob::CheckResumable(const ParameterSpec& saved, const ParameterSpec& spec) {
  ParameterSpec same = WithoutMembership(saved);  // A job that grew, or not.
  same.set_run_id(spec.run_id());
  same.set_owner(spec.owner());  // Whoever resumes it owns the new run.
  same.set_replicas(spec.replicas());  // Where its copies live, not what it computes.
  if (!google::protobuf::util::MessageDifferencer::Equivalent(same, WithoutMembership(spec))) {
    return absl::FailedPreconditionError(absl::StrCat(
        JobPrefix(spec.job_id()),
        "the job differs from the one the checkpoint was taken of (its variables, optimizer, "
        "learning rate, consistency or seed); resume it as it was submitted"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ShardJob>> ShardJob::Resume(
    const std::vector<CheckpointBlock>& blocks, const ParameterSpec& spec, int num_ps,
    int ps_index, const ResumePoint& at, Clock* clock) {
  std::vector<int64_t> worker_steps = at.worker_steps;
  if (worker_steps.empty()) worker_steps.assign(spec.num_workers(), at.step);
  if (static_cast<int>(worker_steps.size()) != spec.num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat(
        JobPrefix(spec.job_id()), "the resume point has steps for ", worker_steps.size(),
        " workers, the run has ", spec.num_workers()));
  }
  absl::StatusOr<ShardCheckpointState> state = ReadShardState(blocks, num_ps, ps_index);
  if (!state.ok()) return state.status();
  absl::Status same = CheckResumable(state->spec(), spec);
  if (!same.ok()) return same;
  absl::StatusOr<std::unique_ptr<ShardJob>> job = Create(spec, num_ps, ps_index, clock);
  if (!job.ok()) return job.status();
  absl::Status status = (*job)->RestoreSlices(blocks, *state);
  if (!status.ok()) return status;
  ShardJob& resumed = **job;
  absl::MutexLock lock(&resumed.mu_);
  resumed.steps_pushed_ = worker_steps;
  resumed.version_ = state->version();
  resumed.checkpoints_.Resumed(at.checkpoint, state->version(), at.step);
  resumed.updates_started_ = state->updates_started();
  absl::StatusOr<StalenessHistogram> histogram = StalenessHistogram::FromProto(state->staleness());
  if (!histogram.ok()) return histogram.status();
  resumed.staleness_ = *std::move(histogram);
  resumed.applied_gradients_ = state->applied_gradients();
  resumed.dropped_ = {state->dropped().begin(), state->dropped().end()};
  resumed.rejected_ = {state->rejected().begin(), state->rejected().end()};
  status = resumed.RestoreHandoutLocked(*state);
  if (!status.ok()) return status;
  // Every worker of the new run at its resume step, none gone, nothing open.
  ShardCheckpointState fresh;
  fresh.set_step(at.step);
  for (int w = 0; w < spec.num_workers(); ++w) {
    fresh.add_clocks(worker_steps[w]);
    fresh.add_left(false);
  }
  status = resumed.rule_->RestoreState(fresh);
  if (!status.ok()) return status;
  return job;
}

absl::Status ShardJob::RestoreStateLocked(const ShardCheckpointState& state) {
  const int workers = spec().num_workers();
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
  absl::Status handout = RestoreHandoutLocked(state);
  if (!handout.ok()) return handout;
  return rule_->RestoreState(state);
}

absl::Status ShardJob::RestoreHandoutLocked(const ShardCheckpointState& state) {
  if (spec().has_data_handout()) {
    absl::Status seen = seen_batches_.Restore(state);
    if (!seen.ok()) return seen;
  }
  if (handout_ == nullptr) return absl::OkStatus();
  if (!state.has_handout()) {
    return absl::DataLossError(
        "the checkpoint keeps no data handout, but the job hands its data out");
  }
  return handout_->Restore(state.handout());
}

}  // namespace ps
