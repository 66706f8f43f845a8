// One job's state on one ps shard (shard_job.cc: creation and pushes; shard_job_pull.cc: pulls
// and waiting; shard_job_chunks.cc: chunked pushes; shard_job_checkpoint.cc: checkpoints and
// restores; shard_job_replay.cc: the apply log and its replay; its sparse tables' rows are a
// ShardSparseTables, its workers' leases a WorkerLeases, each of their own): the slices placed
// here (values and optimizer slots), parked pulls and statistics. What the job's consistency mode decides (apply,
// aggregate or drop a push; the learning rate; when a pull may proceed; the step and clocks) is
// its ConsistencyRule's (server/consistency/), which ShardJob asks under mu_, and its row's in
// common/job/consistency_modes.h (whether a lost worker leaves the clocks); a new mode changes
// nothing here.
//
// Versions: every applied update bumps version(). A pull reads the version; a push carries it
// back; staleness = version when the gradient is applied - version read. An update is applied
// slice by slice under each slice's lock, so pushes to one shard pipeline across slices, and a
// pull that overlaps an update may see it on some slices only (as in Downpour); the version is
// bumped once the update is on every slice.
//
// Waiting: a pull that must wait (SYNC: the step is not applied yet; SSP: the worker is too far
// ahead) is parked, never blocking the calling thread; its callback runs later, exactly once,
// when the condition holds, or from ExpireWaiter / CancelWaiter / CancelAllWaiters.
#ifndef PS_SERVER_SHARD_JOB_H_
#define PS_SERVER_SHARD_JOB_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <variant>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/job/job_schema.h"  // JobPrefix, for every message about a job.
#include "common/job/partitioner.h"
#include "proto/ps_service.pb.h"
#include "server/buffer_pool.h"
#include "server/byte_budget.h"
#include "common/checkpoint/checkpoint_file.h"
#include "common/clock.h"
#include "common/trace/trace_recorder.h"
#include "common/metrics/metrics.h"
#include "server/consistency/consistency_rule.h"
#include "server/data_handout.h"
#include "server/seen_batches.h"
#include "server/job_traffic.h"
#include "server/shard_checkpoints.h"
#include "server/shard_sparse_tables.h"
#include "common/job/optimizer.h"
#include "server/staleness_histogram.h"
#include "server/worker_leases.h"

namespace ps {

class ShardJob {
 public:
  // Values read by a pull: `header`, and one piece per header.slices() entry. The pieces
  // point into the slices' values themselves, not a copy: `keep_alive` holds those buffers,
  // which stay unchanged for as long as it lives (a push then writes to a fresh copy).
  struct PullSnapshot {
    PullResponseHeader header;
    std::shared_ptr<const void> keep_alive;
    std::vector<absl::Span<const float>> pieces;
  };
  using PullCallback = std::function<void(absl::StatusOr<PullSnapshot>)>;

  // Validates `spec` (see ValidateParameterSpec), places it on `num_ps` tasks, and creates and
  // initializes the slices of task `ps_index`.
  // `clock`: whose time leases and parked pulls run on; it must outlive the job.
  static absl::StatusOr<std::unique_ptr<ShardJob>> Create(const ParameterSpec& spec, int num_ps,
                                                          int ps_index,
                                                          Clock* clock = Clock::Real());
  ShardJob(const ShardJob&) = delete;
  ShardJob& operator=(const ShardJob&) = delete;
  // REQUIRES: no parked pulls (CancelAllWaiters first).
  ~ShardJob();

  // The job's spec now. A job that grows (Grow) gets a new one; a reference this gave stays
  // valid for the job's life, holding the spec as it was then.
  const ParameterSpec& spec() const { return *spec_now_.load(std::memory_order_acquire); }
  int num_ps() const { return num_ps_; }
  int ps_index() const { return ps_index_; }
  // A replay (CreateJobRequest.replaying): its pushes are applied in the recorded order.
  bool replaying() const { return replaying_; }
  // The slices held here, in placement order.
  std::vector<SliceRef> SliceRefs() const;
  int64_t num_parameters() const;
  // The bytes a job of `spec` holds on shard `ps_index` of `num_ps`: its values and each
  // optimizer slot, twice (an update writes a fresh copy while pulls read the last one), and
  // its per-worker state. INVALID_ARGUMENT as Create for a spec it refuses. Allocates nothing of
  // that size: a limit is checked against it first.
  static absl::StatusOr<int64_t> MemoryBytes(const ParameterSpec& spec, int num_ps,
                                             int ps_index);

  // Answers `request` at once (calling `done` before returning, and returning 0) or parks it
  // and returns its waiter id. Invalid requests are answered at once with INVALID_ARGUMENT.
  int64_t Pull(const PullRequest& request, PullCallback done) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends parked pull `id` with DEADLINE_EXCEEDED, saying what it waits for (the workers a SYNC
  // step lacks, or the SSP workers too far behind). No-op if `id` is no longer parked.
  void ExpireWaiter(int64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends parked pull `id` with `status`; returns false if it was no longer parked.
  bool CancelWaiter(int64_t id, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends every parked pull with `status` (job deleted, server stopping, this copy no longer
  // serving the shard), and answers with it every later pull that would park (one that found the
  // copy serving just before would otherwise wait for a change that never comes here), until
  // Reopen (the copy serves again).
  void CancelAllWaiters(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  void Reopen() ABSL_LOCKS_EXCLUDED(mu_);

  // Checks a push header's slices (and sparse rows) against the placement and returns a buffer
  // for its gradient, with `destinations` pointing into it slice by slice, then the sparse rows
  // (for DecodeTensorMessage).
  absl::StatusOr<std::shared_ptr<std::vector<float>>> PushBuffer(
      const PushRequestHeader& header, std::vector<absl::Span<float>>* destinations);

  // Applies or aggregates a gradient laid out as PushBuffer returned it. Bad input (worker out
  // of range, NaN/Inf, a future step or version, a repeated step or clock) is rejected with
  // its code, counted, and changes nothing. `known_finite`: the caller has checked that no
  // value is Inf or NaN (the decoder does as it copies), so Push need not. May apply an update
  // and complete parked pulls on the calling thread.
  absl::StatusOr<PushResponse> Push(const PushRequestHeader& header,
                                    absl::Span<const float> gradient, bool known_finite = false)
      ABSL_LOCKS_EXCLUDED(mu_, aggregate_mu_);

  // Chunked pushes (PushRequestHeader.total_chunks >= 2): the service decodes each chunk into
  // the destination PushChunkBuffer gives, then calls PushChunkDone, or AbandonChunk if the
  // chunk could not be decoded. The chunk that completes a push applies it, as Push does, and
  // returns its response; the others return outcome RECEIVED. Each worker has at most one
  // push being assembled: a chunk of a newer push abandons an incomplete older one.
  // Whether a push request is one chunk of a chunked push (the rule in ps_service.proto).
  static bool IsChunk(const PushRequestHeader& header) { return header.total_chunks() >= 2; }
  // "[begin, begin + count)", for messages about a range a request names, whatever its values
  // (no overflow).
  static std::string RangeText(int64_t begin, int64_t count);
  struct ChunkTarget {
    // If set, the chunk needs no decoding and this is its answer (DUPLICATE: the push was
    // applied already; RECEIVED: this chunk is already in, a retry).
    std::optional<PushResponse> answer;
    std::shared_ptr<std::vector<float>> buffer;  // Keeps `destination` alive.
    absl::Span<float> destination;               // chunk_size floats.
  };
  // INVALID_ARGUMENT for a chunk outside the gradient, overlapping another chunk, or whose
  // header differs from its push's other chunks; ABORTED for a chunk of an abandoned push.
  absl::StatusOr<ChunkTarget> PushChunkBuffer(const PushRequestHeader& header)
      ABSL_LOCKS_EXCLUDED(chunks_mu_, mu_);
  absl::StatusOr<PushResponse> PushChunkDone(const PushRequestHeader& header, bool finite)
      ABSL_LOCKS_EXCLUDED(chunks_mu_, mu_, aggregate_mu_);
  // `malformed`: counted as rejected (else its values could not come: a bulk stream broke).
  void AbandonChunk(const PushRequestHeader& header, bool malformed = true)
      ABSL_LOCKS_EXCLUDED(chunks_mu_, mu_);

  // The ps's byte budget (server/byte_budget.h): every push buffer this job takes from now on is
  // charged to it while held. Null: none (the default).
  void UseByteBudget(std::shared_ptr<ByteBudget> budget) ABSL_LOCKS_EXCLUDED(budget_mu_);
  // The bytes of the push buffer a push request with `header` would start on this shard: the
  // shard's gradient for a whole push or the first chunk of a push to come in; 0 for a later
  // chunk of the push being assembled. The service reserves them before decoding.
  int64_t NewPushBufferBytes(const PushRequestHeader& header) ABSL_LOCKS_EXCLUDED(chunks_mu_);
  // What every call of the push `header` is one of has in common, for the byte budget
  // (ByteBudget's groups): its chunks, or a whole push and its retries; "" for a whole push
  // without a push id, which nothing tells apart from the worker's next.
  static std::string PushGroup(const PushRequestHeader& header);
  // Notes that a push of `worker` waits for the byte budget on `job` until the token is dropped:
  // its lease does not run out meanwhile (as for a parked pull). Null for a worker out of range.
  static std::shared_ptr<void> ParkPush(std::shared_ptr<ShardJob> job, int worker)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Marks `worker` of run `run_id` as done with the job: SSP pulls no longer wait for its clock,
  // and SYNC steps no longer wait for its gradient (see SyncRule::AggregateSize; an open step
  // that now has enough is applied at once); parked pulls that could only wait for it are
  // answered.
  // INVALID_ARGUMENT for a worker out of range; FAILED_PRECONDITION for another run. The leave
  // of an `incarnation` older than the worker's newest changes nothing (OK); none: the newest.
  absl::Status Leave(int worker, const std::string& run_id,
                     std::optional<int> incarnation = std::nullopt)
      ABSL_LOCKS_EXCLUDED(mu_, aggregate_mu_);

  // The next training batches for a worker of a job whose data is handed out (the job's first
  // shard; DataHandout::Take): FAILED_PRECONDITION for another run, an older incarnation, or a
  // shard that hands out nothing; INVALID_ARGUMENT for a worker out of range or a bad count.
  absl::StatusOr<NextBatchesResponse> NextBatches(const NextBatchesRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Grows the job of run `run_id` to the workers at `worker_addresses` (worker i at index i;
  // GrowJobRequest): the spec gets them (num_workers and worker_addresses), and each new worker
  // is out of the job, as one lost, until it joins with its first request (an incarnation of 1
  // or later: Rejoin). Only an elastic job (lost_workers_leave) whose data is handed out may
  // grow: FAILED_PRECONDITION, saying why, for the others, another run, fewer workers than it
  // has, or addresses that move a worker it grew by before. As many as it has: OK, no change.
  absl::Status Grow(const std::string& run_id, const std::vector<std::string>& worker_addresses)
      ABSL_LOCKS_EXCLUDED(chunks_mu_, mu_);

  // Leases (ParameterSpec.worker_lease_ms; none when 0): a worker this shard has not heard
  // from (no pull, no admitted push) for longer than the lease, as of `now`, and that has no
  // pull parked here (waiting at a barrier is not being gone), is lost: shown in
  // its WorkerStats, and under SSP, or in an elastic job (lost_workers_leave), it leaves the
  // job (its clock no longer holds the others back, a SYNC step that waited only for it is
  // applied, parked pulls that waited only for it are answered). Returns the workers lost by
  // this call.
  std::vector<int> ExpireLeases(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_, aggregate_mu_);
  // ExpireLeases in two halves, for a replicated shard whose primary decides and whose backup
  // follows (server/shard_replicator.h): the workers whose lease ran out at `now`, marked lost
  // in the lease table only; then what losing them means for the mode.
  std::vector<int> TakeExpiredLeases(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  void LoseWorkers(const std::vector<int>& workers) ABSL_LOCKS_EXCLUDED(mu_, aggregate_mu_);
  // WorkerLeases::HeardAll: this copy serves the shard again after another copy did.
  void RenewLeases() { leases_.HeardAll(); }
  // WorkerLeases::Forgive: this ps did not run for `pause`.
  void ForgiveLeases(absl::Duration pause) { leases_.Forgive(pause); }

  // Replication (server/shard_replicator.h; shard_job_replica.cc). Every input that changes the
  // shard's state goes through these on both copies, in one order: a whole push (Push), a leave
  // (Leave), lost workers (LoseWorkers), a rejoin first seen in a pull (Rejoin) and batches
  // handed out (NextBatches).
  // A push decoded whole and checked against the placement, not yet applied.
  struct ReadyPush {
    PushRequestHeader header;  // Without chunk fields.
    std::shared_ptr<std::vector<float>> buffer;  // Laid out as PushBuffer lays it out.
    bool known_finite = false;
  };
  // PushChunkDone without the apply: the chunk's answer (RECEIVED), or the whole push once
  // this chunk completes it.
  absl::StatusOr<std::variant<PushResponse, ReadyPush>> ChunkDone(const PushRequestHeader& header,
                                                                  bool finite)
      ABSL_LOCKS_EXCLUDED(chunks_mu_, mu_);
  // Whether a request of `worker`'s `incarnation` would make it rejoin (newer than the last
  // seen). False for a worker out of range.
  bool IsNewIncarnation(int worker, int incarnation) const ABSL_LOCKS_EXCLUDED(mu_);
  // Takes `incarnation` as `worker`'s, as its first request does (a pull's `clock`).
  absl::Status Rejoin(int worker, int incarnation, int64_t clock) ABSL_LOCKS_EXCLUDED(mu_);
  // The shard as a backup starts from (a checkpoint of it and the per-worker state a checkpoint
  // leaves out), taken between updates as Checkpoint is.
  ReplicaInstall ReplicaSnapshot() ABSL_LOCKS_EXCLUDED(aggregate_mu_, mu_);
  // A backup made from `install`: the primary's state when it took it. DATA_LOSS or
  // FAILED_PRECONDITION as Restore for an install that is not a whole snapshot.
  static absl::StatusOr<std::unique_ptr<ShardJob>> FromReplicaSnapshot(
      const ReplicaInstall& install, Clock* clock = Clock::Real());

  // A consistent copy of everything the shard holds for the job, as the blocks of a checkpoint
  // file (shard_job_checkpoint.cc lists them): values, optimizer slots and update counts,
  // version, schedule position, the rule's state (step, clocks, workers that left, the open
  // aggregate and its sum), push ids and statistics. Taken between updates: a push being
  // applied finishes first, and new ones wait while the optimizer slots are copied and the
  // values taken (by reference: they are copied after the updates resume, which write to
  // fresh buffers meanwhile); pulls go on throughout. The write to disk is the caller's.
  std::vector<CheckpointBlock> Checkpoint() ABSL_LOCKS_EXCLUDED(aggregate_mu_, mu_);
  // The job as Checkpoint's `blocks` hold it, on task `ps_index` of `num_ps` (as it was taken).
  // DATA_LOSS for blocks that are not a whole checkpoint of the job's placement;
  // FAILED_PRECONDITION for one taken on another task or number of tasks.
  static absl::StatusOr<std::unique_ptr<ShardJob>> Restore(
      const std::vector<CheckpointBlock>& blocks, int num_ps, int ps_index,
      Clock* clock = Clock::Real());

  // Periodic checkpoints (docs/checkpoints.md; a TakenCheckpoint and its sink are
  // server/shard_checkpoints.h's).
  using TakenCheckpoint = ::ps::TakenCheckpoint;
  using CheckpointSink = ::ps::CheckpointSink;
  // Arms checkpoint `seq` of run `run_id`: it is taken when the shard's clock (the rule's
  // checkpoint_clock: SYNC step, SSP slowest clock, else version) reaches `at_clock`, right
  // after the update that gets it there and before the next one, or at once when `at_clock` is
  // -1 or the clock is there already; `sink` gets it on the thread that took it and must not
  // block (queue the write). FAILED_PRECONDITION for another run, or (SYNC, SSP) a clock
  // already passed: the shards could not all take it at that point.
  absl::Status ArmCheckpoint(const std::string& run_id, int64_t seq, int64_t at_clock,
                             CheckpointSink sink) ABSL_LOCKS_EXCLUDED(aggregate_mu_, mu_);
  // Records how writing a checkpoint ended (entry.error set when it failed), for Stats.
  void CheckpointWritten(const ShardCheckpoint& entry) ABSL_LOCKS_EXCLUDED(mu_);
  // Where a resumed run starts (CheckpointManifest's resume_step and worker_resume_steps).
  struct ResumePoint {
    std::string checkpoint;  // Its name, for Stats.
    int64_t step = 0;        // SYNC's step, SSP's clocks.
    // Per worker, the steps it has pushed (ASYNC, SOFTSYNC); empty: every worker at `step`.
    std::vector<int64_t> worker_steps;
  };
  // OK when `spec`, a new run of the job, may resume from a checkpoint of `saved`: the same
  // but for its run_id, number of workers, owner and replicas; FAILED_PRECONDITION saying so otherwise.
  static absl::Status CheckResumable(const ParameterSpec& saved, const ParameterSpec& spec);
  // A new run of the job from a checkpoint's blocks (as ArmCheckpoint took them): `spec` is the
  // new run's (its run_id and number of workers; the rest must be the checkpoint's, else
  // FAILED_PRECONDITION saying what differs). Values, optimizer state, version, schedule
  // position and statistics are the checkpoint's; every worker starts afresh at `at`, with no
  // push seen yet. INVALID_ARGUMENT when `at.worker_steps` is not one step per worker.
  static absl::StatusOr<std::unique_ptr<ShardJob>> Resume(
      const std::vector<CheckpointBlock>& blocks, const ParameterSpec& spec, int num_ps,
      int ps_index, const ResumePoint& at, Clock* clock = Clock::Real());

  // The apply log (ParameterSpec.record_apply_log, ASYNC; shard_job_replay.cc): the shard
  // records each worker pull it serves (the version) and each push it applies (the version read,
  // the learning rate) or drops, in the order it does them. While it records, a pull and an
  // update do not overlap (a pull sees an update whole), so that the log says all that decided
  // the values.
  ApplyLog GetApplyLog() const ABSL_LOCKS_EXCLUDED(order_mu_);
  // The shard's trace so far (ParameterSpec.trace, proto/trace.proto): each gradient applied,
  // added to its step's aggregate or dropped, with its staleness, and each aggregate applied, as
  // `request` asks (TraceRecorder::Snapshot). Empty when the job records none.
  Trace GetTrace(const TraceRequest& request = TraceRequest()) const;
  // Sets this shard's values to the chief's (CreateJobRequest.initial_values,
  // ParameterSpec.chief_initializes): every slice held here exactly once, with its row_count
  // rows of values, all finite. INVALID_ARGUMENT, naming the slice, otherwise, and nothing is
  // set. REQUIRES: a fresh job, before any pull or push (and before it is shared).
  absl::Status SetInitialValues(const google::protobuf::RepeatedPtrField<SliceValues>& values)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Makes this job replay `log` (CreateJobRequest.replay): from then on every worker pull and
  // push waits for its turn in the log (pulls park, pushes are held and answered QUEUED), and
  // is served or applied then, with the recorded learning rate, so that the run ends with the
  // recorded run's values bit for bit. A pull that is not served the version the log says ends
  // with DATA_LOSS (the run differs from the recorded one: another job, data or program).
  // REQUIRES: a fresh job, before any pull or push.
  void StartReplay(ApplyLog log) ABSL_LOCKS_EXCLUDED(order_mu_, mu_);

  // Whether every worker has left the job (Leave) or is lost (ExpireLeases): it is finished on
  // this shard.
  bool AllWorkersLeft() const ABSL_LOCKS_EXCLUDED(mu_);

  // Counts a push rejected before it reached Push (for example malformed bytes).
  void CountRejected(const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);

  JobStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);

  // The calls that named this job, counted by ParameterService (bytes_received and bytes_sent
  // of Stats).
  JobTraffic& traffic() { return traffic_; }
  // How long each parked pull waited before it ended (answered, timed out or cancelled), in
  // seconds; pulls answered at once are not in it.
  const Histogram& park_seconds() const { return park_seconds_; }
  // How long writing each of its checkpoint files took (written ones), in seconds.
  const Histogram& checkpoint_write_seconds() const { return checkpoints_.write_seconds(); }
  // The park histogram's upper bounds.
  static const std::vector<double>& ParkSecondsBounds();

 private:
  // A slice's values (or one of its optimizer slots), shared copy-on-write: pulls hand gRPC
  // the values' buffer itself, and a checkpoint holds the values and slots while it writes
  // them (each counted in `readers` meanwhile); an update writes in place only while nothing
  // reads the buffer, else to a fresh copy that replaces it (WritableLocked).
  struct Values {
    std::shared_ptr<std::vector<float>> buffer;  // From value_buffers_.
    // Pulls still sending `buffer`: incremented under the slice's lock, decremented (release)
    // when gRPC is done with it; read (acquire) under the lock before writing in place.
    std::atomic<int> readers{0};
  };
  // What a pull's answer holds while gRPC sends a slice's values.
  class ValuesReader {
   public:
    explicit ValuesReader(std::shared_ptr<Values> values);
    ValuesReader(const ValuesReader&) = delete;
    ValuesReader& operator=(const ValuesReader&) = delete;
    ~ValuesReader();
    const std::vector<float>& buffer() const { return *values_->buffer; }
    const std::shared_ptr<Values>& values() const { return values_; }

   private:
    const std::shared_ptr<Values> values_;
  };
  struct Slice {
    SlicePlacement placement;
    int64_t offset = 0;  // Of this slice in a push's gradient buffer, in floats.
    mutable absl::Mutex mu;
    std::shared_ptr<Values> values ABSL_GUARDED_BY(mu);
    std::vector<std::shared_ptr<Values>> slots ABSL_GUARDED_BY(mu);  // The optimizer's.
    int64_t update_count ABSL_GUARDED_BY(mu) = 0;
    // DELAYED: the values before each of the last served_delay() updates, newest first, held
    // as readers so that an update writes to a fresh copy and leaves them as they were.
    std::deque<std::unique_ptr<ValuesReader>> history ABSL_GUARDED_BY(mu);
  };
  struct Waiter {
    PullRequest request;
    PullCallback done;
    absl::Time parked_at;
  };
  // A pull row range: rows [row_begin, row_begin + row_count) of slices_[slice].
  struct PullRange {
    int slice = 0;
    int64_t row_begin = 0;
    int64_t row_count = 0;
  };
  // A chunked push being assembled.
  struct Assembly {
    PushRequestHeader header;  // Its first chunk's, without the chunk fields.
    std::shared_ptr<std::vector<float>> buffer;
    std::map<int64_t, int64_t> chunks;  // chunk_offset -> chunk_size, decoding or in.
    std::set<int64_t> on_streams;       // Offsets of the chunks whose frames are awaited.
    int64_t floats_in = 0;              // Of the chunks decoded.
    int chunks_in = 0;
    bool all_finite = true;  // Of the chunks decoded.
  };

  ShardJob(const ParameterSpec& spec, int num_ps, int ps_index, Clock* clock,
           std::unique_ptr<Optimizer> optimizer, std::unique_ptr<ConsistencyRule> rule);

  // INVALID_ARGUMENT (counted) unless the push's slices are this shard's, in order.
  absl::Status CheckPushSlices(const PushRequestHeader& header) ABSL_LOCKS_EXCLUDED(mu_);
  // FAILED_PRECONDITION unless `run_id` is this job's run: a request of another run of the same
  // job id (an earlier submission's worker still running) must not touch this one's state.
  absl::Status CheckRun(const std::string& run_id, absl::string_view what) const;
  // OK for a request of `worker`'s current or a newer `incarnation` (PullRequest.incarnation);
  // an older one is FAILED_PRECONDITION, counted. Changes nothing else: a push refused later
  // (a bad push id, NaN) must not fence off the worker's real process.
  absl::Status CheckIncarnationLocked(int worker, int incarnation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The last push id of `worker` as a request of `incarnation` sees it: 0 for a newer one.
  int64_t LastPushIdLocked(int worker, int incarnation) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return incarnation > incarnation_[worker] ? 0 : last_push_id_[worker];
  }
  // CheckIncarnationLocked, then, for the request being served or admitted, takes a newer
  // incarnation as the worker's: it rejoins the job (its earlier push ids forgotten, no longer
  // lost, the rule's Rejoin at `clock`).
  absl::Status AdoptIncarnationLocked(int worker, int incarnation, int64_t clock)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Notes a sign of `worker`'s life for its lease (WorkerLeases::Heard).
  void HeardLocked(int worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { leases_.Heard(worker); }
  // The checks of a push's run, worker and push_id; counted.
  absl::Status CheckPushSender(const PushRequestHeader& header) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ValidatePull(const PullRequest& request, std::vector<PullRange>* ranges) const;
  std::vector<Waiter> TakeReadyWaitersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllWorkersLeftLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether an open aggregate of a rule that takes any worker's gradients (SOFTSYNC's c) can no
  // longer fill up: every worker has left or is lost. It is then applied as it stands (the mean
  // of what it holds), so that no gradient answered ACCUMULATED, and no batch trained for it, is
  // dropped. A barrier's (SYNC's) open step is its rule's to decide (SyncRule::Leave).
  bool OrphanedAggregateLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A push held for its turn in a replay.
  struct QueuedPush {
    PushRequestHeader header;
    std::vector<float> gradient;
  };
  bool recording() const { return spec().record_apply_log(); }
  // Records, where the job is traced, an event from `began` to now (a DROP: at `began`) of the
  // gradient `header` pushed (worker -1, step: a SYNC aggregate's); `version`: the shard's after.
  void TraceUpdate(TraceEvent::Kind kind, absl::Time began, int64_t step, int worker,
                   int64_t staleness, int64_t version) const;
  // When an update that may be traced began: now where the job is traced, else never read.
  absl::Time TraceStart() const { return trace_ != nullptr ? clock_->Now() : absl::Time(); }
  // The log's entry of an update from `header` (the version it read), for recording.
  static ApplyLogEntry UpdateEntry(const PushRequestHeader& header, ApplyLogEntry::Kind kind,
                                  float learning_rate, const std::string& drop_reason);
  // Replay: holds a checked push for its turn (QUEUED), then advances.
  absl::StatusOr<PushResponse> QueueForReplay(const PushRequestHeader& header,
                                              absl::Span<const float> gradient)
      ABSL_LOCKS_EXCLUDED(order_mu_, mu_);
  // Replay: serves and applies what the log says next while it is there (parked pulls, held
  // pushes), on the calling thread.
  void AdvanceReplay() ABSL_LOCKS_EXCLUDED(order_mu_, mu_);
  // Whether the log's next event can happen now (its pull parked, or its push held).
  bool NextReplayEventHereLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a parked replay pull waits for (for its DEADLINE_EXCEEDED).
  std::string ReplayWaitReasonLocked(const PullRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers pulls whose condition holds. REQUIRES: mu_ not held.
  void Complete(std::vector<Waiter> waiters);
  // A pull's values now; a worker's pull is logged while recording.
  PullSnapshot Snapshot(const PullRequest& request) const ABSL_LOCKS_EXCLUDED(order_mu_, mu_);
  // The values and version, without the log. REQUIRES: mu_ not held.
  PullSnapshot ReadSnapshot(const PullRequest& request) const ABSL_LOCKS_EXCLUDED(mu_);
  // Counts a parked pull's wait as it ends (park_seconds_); returns it.
  absl::Duration EndPark(const Waiter& waiter);

  // The answer to a push whose push_id was already seen, counted (`count`: false for the
  // chunks of a push after its first, so that a push counts once).
  PushResponse DuplicateLocked(bool count = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Admits a push whose push_id is new: checks its read version and asks the rule. Returns the
  // rule's action, with the push_id recorded and `response` holding the staleness, version and
  // step; for kDrop `response` is the whole answer (DROPPED, counted). A rejection is returned
  // as its status, counted.
  absl::StatusOr<PushDecision::Action> AdmitLocked(const PushRequestHeader& header,
                                                   PushResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RejectLocked(const std::string& reason, absl::Status status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<PushResponse> ApplyNow(const PushRequestHeader& header,
                                        absl::Span<const float> gradient) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<PushResponse> Aggregate(const PushRequestHeader& header,
                                         absl::Span<const float> gradient)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(aggregate_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // The learning rate of the aggregate about to be applied; advances the schedule.
  float NextAggregateLearningRateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies the mean of the rule's open aggregate (sum_ over its contributions that are not
  // repeats; nothing when all are), bumps the version (the rule its step), answers the pulls
  // that waited for it, and fills `response` if non-null.
  void ApplyAggregate(float learning_rate, PushResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(aggregate_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // Checkpoint waits for these: no update between its admission and its version bump, and no
  // checkpoint being taken.
  bool NothingApplyingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return applying_ == 0; }
  bool NotCheckpointingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !checkpointing_;
  }
  struct CapturedState;
  // Waits for updates in flight, holds new ones back while it reads the state and each slice
  // (values held, slots copied), and lets them go on. REQUIRES: for aggregating rules,
  // aggregate_mu_ held.
  CapturedState CaptureBetweenUpdates() ABSL_LOCKS_EXCLUDED(mu_);
  // The armed checkpoints whose clock the shard has reached (ShardCheckpoints::TakeDue under
  // mu_, so that none is armed for a clock an update reaches meanwhile).
  std::vector<ArmedCheckpoint> TakeDueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!checkpoints_.any_armed()) return {};  // An update pays nothing when none is armed.
    return checkpoints_.TakeDue(rule_->checkpoint_clock(version_));
  }
  // Takes checkpoint `seq` for `armed` (between updates: new ones wait while the optimizer
  // slots are copied) and hands it to its sink. REQUIRES: for aggregating rules, aggregate_mu_
  // held (no aggregate summed or applied meanwhile).
  void TakeCheckpoint(ArmedCheckpoint armed) ABSL_LOCKS_EXCLUDED(mu_);
  // The fewest steps pushed by a worker that is in the job's count (CapturedState's).
  int64_t MinStepsPushedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies the values and slots of checkpoint `blocks` into the slices; DATA_LOSS when they do
  // not fit. REQUIRES: a fresh job.
  absl::Status RestoreSlices(const std::vector<CheckpointBlock>& blocks,
                             const ShardCheckpointState& state);
  // Writes the counters and the rule's state into a checkpoint's state (not the slices').
  void SaveStateLocked(ShardCheckpointState* state) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the data handout from a checkpoint's state (nothing for a job without one); DATA_LOSS
  // when it lacks one or does not fit. REQUIRES: a fresh job.
  absl::Status RestoreHandoutLocked(const ShardCheckpointState& state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the counters and the rule from a checkpoint's state. REQUIRES: a fresh job.
  absl::Status RestoreStateLocked(const ShardCheckpointState& state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A slice's values or slot, ready to be written: the buffer itself when nothing else reads
  // it, else a fresh copy that replaces it (the readers keep the old one).
  // REQUIRES: the slice's mu held.
  absl::Span<float> WritableLocked(std::shared_ptr<Values>& values);
  // The slice's values, about to be updated: kept in its history (DELAYED), and writable.
  // REQUIRES: the slice's mu held.
  absl::Span<float> ValuesToUpdateLocked(Slice& slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // A push's effect on the statistics once applied: the version bumped, the gradient counted
  // with its staleness.
  void CountAppliedLocked(int worker, int64_t staleness) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies a push's gradient, laid out as PushBuffer returns it (the slices' values, then the
  // sparse rows header.sparse() names), at `learning_rate`. REQUIRES: mu_ not held.
  void ApplyUpdate(float learning_rate, const PushRequestHeader& header,
                   absl::Span<const float> gradient);
  // Applies `gradient` to every slice with `learning_rate`. REQUIRES: mu_ not held.
  void ApplyToSlices(float learning_rate, absl::Span<const float> gradient);
  // Replaces the values with `values` (a published model, laid out as a gradient), leaving the
  // optimizer's slots as they are. REQUIRES: mu_ not held.
  void AssignToSlices(absl::Span<const float> values);
  // The first non-finite element, described, or "" when all are finite.
  std::string FindNonFinite(absl::Span<const float> gradient) const;

  // spec(): the last of specs_, every spec the job has had (each growth adds one).
  std::atomic<const ParameterSpec*> spec_now_;
  std::vector<std::unique_ptr<const ParameterSpec>> specs_ ABSL_GUARDED_BY(mu_);
  const int num_ps_;
  const int ps_index_;
  Clock* const clock_;
  const std::unique_ptr<TraceRecorder> trace_;  // ParameterSpec.trace; null: none.
  const std::unique_ptr<Optimizer> optimizer_;
  const bool aggregates_;                       // rule_->aggregates(), fixed.
  const int served_delay_;                      // rule_->served_delay(), fixed.
  std::vector<std::unique_ptr<Slice>> slices_;  // Fixed after construction.
  int64_t num_elements_ = 0;                    // Over slices_.
  // Push buffers (the shard's size) and the slices' values (copied on write) come from
  // separate pools, so that neither allocates and faults in fresh pages on every push.
  std::shared_ptr<BufferPool> push_buffers_ = BufferPool::Create();
  // A push buffer from push_buffers_ of `floats`, charged to the byte budget while held.
  std::shared_ptr<std::vector<float>> AcquirePushBuffer(size_t floats, const std::string& group)
      ABSL_LOCKS_EXCLUDED(budget_mu_);
  // `buffer`, charged to the byte budget while held (as is where there is none).
  std::shared_ptr<std::vector<float>> Charged(std::shared_ptr<std::vector<float>> buffer,
                                              const std::string& group)
      ABSL_LOCKS_EXCLUDED(budget_mu_);
  // Drops the push `worker` is assembling, which it will never finish (it left or was lost), and
  // so frees its buffer; with `incarnation`, only one of that incarnation or an older one.
  void DropAssembly(int worker, std::optional<int> incarnation = std::nullopt)
      ABSL_LOCKS_EXCLUDED(chunks_mu_);
  std::vector<int> parked_pushes_ ABSL_GUARDED_BY(mu_);  // Per worker: ParkPush tokens held.
  absl::Mutex budget_mu_;
  std::shared_ptr<ByteBudget> byte_budget_ ABSL_GUARDED_BY(budget_mu_);
  std::shared_ptr<BufferPool> value_buffers_;  // Keeps one spare buffer per slice.

  // Chunked pushes being assembled, by worker (null: none).
  absl::Mutex chunks_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::vector<std::unique_ptr<Assembly>> assemblies_ ABSL_GUARDED_BY(chunks_mu_);

  // Serializes aggregation (rules that aggregate: SYNC, SOFTSYNC): the sum buffer, and the
  // rule's open aggregate from a push's admission to its apply.
  absl::Mutex aggregate_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::vector<float> sum_ ABSL_GUARDED_BY(aggregate_mu_);
  // The sparse tables' rows on this shard and the open aggregate's sums of them (their own
  // lock; Accumulate and ApplySums under aggregate_mu_). Set by Create.
  std::unique_ptr<ShardSparseTables> sparse_;

  // The apply log: held, while recording or replaying, by each update from its admission to
  // its version bump and by each worker pull's snapshot, so that they happen one at a time in
  // the log's order.
  mutable absl::Mutex order_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable std::vector<ApplyLogEntry> log_ ABSL_GUARDED_BY(order_mu_);
  // Replay (StartReplay): the recorded log, the next entry's index, and the pushes held.
  bool replaying_ = false;  // Set once, before any request: replaying().
  std::vector<ApplyLogEntry> replay_;
  size_t cursor_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::pair<int, int64_t>, QueuedPush> queued_ ABSL_GUARDED_BY(mu_);  // (worker, id).

  mutable absl::Mutex mu_;
  const std::unique_ptr<ConsistencyRule> rule_ ABSL_PT_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t updates_started_ ABSL_GUARDED_BY(mu_) = 0;  // Learning-rate schedule position.
  std::vector<int64_t> last_push_id_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> applied_by_worker_ ABSL_GUARDED_BY(mu_);
  std::vector<StalenessHistogram> staleness_by_worker_ ABSL_GUARDED_BY(mu_);
  StalenessHistogram staleness_ ABSL_GUARDED_BY(mu_);
  int64_t applied_gradients_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t duplicate_pushes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t applying_ ABSL_GUARDED_BY(mu_) = 0;  // Updates admitted, not yet applied (ApplyNow).
  bool checkpointing_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, int64_t> dropped_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> rejected_ ABSL_GUARDED_BY(mu_);
  // Each worker's lease (its own lock, taken after mu_ where both are).
  WorkerLeases leases_;
  // Per worker: the newest incarnation seen; kNotJoined for a worker the job grew by (Grow)
  // until its first pull joins it, at any incarnation.
  std::vector<int> incarnation_ ABSL_GUARDED_BY(mu_);
  static constexpr int kNotJoined = -1;
  // The training batches, when the job hands its data out and this is its first shard; else
  // null. Set by the constructor.
  std::unique_ptr<DataHandout> handout_ ABSL_GUARDED_BY(mu_);
  // Every shard of a job whose data is handed out: whose batches' gradients it admitted.
  SeenBatches seen_batches_ ABSL_GUARDED_BY(mu_);
  // Per worker: the steps it has pushed (its furthest admitted push's clock + 1; a resumed
  // run's workers start at its resume step).
  std::vector<int64_t> steps_pushed_ ABSL_GUARDED_BY(mu_);
  // Armed and written checkpoints, and where a resumed run started (their own lock, taken
  // after mu_ where both are).
  ShardCheckpoints checkpoints_;
  int64_t next_waiter_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  absl::Status closed_ ABSL_GUARDED_BY(mu_);  // CancelAllWaiters' status, until Reopen.
  Histogram park_seconds_{ParkSecondsBounds()};
  JobTraffic traffic_;
};

}  // namespace ps

#endif  // PS_SERVER_SHARD_JOB_H_
