// One worker's pulls and pushes for one job, to every ps shard in parallel: the data path of
// the service. Large tensors go in chunks; gradients are sent and values received without
// copies (see tensor_coding.h). Calls go through PsConnections (deadlines, retries, errors
// naming the shard). The job's CompressionSpec applies to every push and pull: 16-bit values
// on the wire, and top-k pushes with a residual per shard kept here (topk_compression.h).
#ifndef PS_COMMON_CLIENT_WORKER_SESSION_H_
#define PS_COMMON_CLIENT_WORKER_SESSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/job/partitioner.h"
#include "common/client/ps_client.h"
#include "common/client/bulk_links.h"
#include "common/client/ps_connections.h"
#include "common/client/shared_memory_links.h"
#include "common/tensor/topk_compression.h"
#include "common/job/variables.h"
#include "proto/ps_service.pb.h"

namespace ps {

// One worker's pulls and pushes for one job. Not thread-safe.
class WorkerSession {
 public:
  // INVALID_ARGUMENT if the spec does not place or `worker` is out of range. `client` must
  // outlive the session.
  // `incarnation`: which start of the worker in the run (StartJobRequest.incarnation), carried
  // by every request; OBSERVER_INCARNATION for a session that only reads, for someone who is
  // not the worker (psctl reading the results).
  static absl::StatusOr<std::unique_ptr<WorkerSession>> Create(PsClient* client,
                                                               const ParameterSpec& spec,
                                                               int worker, int incarnation = 0);

  const Placement& placement() const { return placement_; }
  // Whether the job keeps a backup of each shard (ParameterSpec.replicas 2): its calls go to the
  // shard's other copy when its ps is gone (PsConnections::Failover).
  bool replicated() const { return spec_.replicas() > 1; }
  // Names shard `ps` in a data call's request (PullRequest.shard and .unreplicated, or the
  // header's): a replicated shard's other copy, or a ps the shard moved to (MoveShard), serves
  // it there.
  template <typename Request>
  void NameShard(int ps, Request* request) const {
    request->set_shard(ps);
    request->set_unreplicated(!replicated());
  }

  struct PullOptions {
    int64_t step = 0;   // SYNC: the step to pull for (waits until it begins).
    int64_t clock = 0;  // SSP: this worker's clock.
  };
  // Rows of a sparse table (ParameterSpec.sparse_tables) by key, as the caller holds them:
  // `rows` holds keys.size() rows of the table's width, in key order. The session sends each
  // key to its shard (SparseShardOf) and puts the rows back in the caller's order.
  struct SparsePull {
    std::string table;
    absl::Span<const uint64_t> keys;  // May repeat.
    absl::Span<float> rows;
  };
  struct SparsePush {
    std::string table;
    absl::Span<const uint64_t> keys;  // Distinct: a key's gradients summed first.
    absl::Span<const float> rows;
  };

  struct PullResult {
    std::vector<int64_t> versions;  // Per shard.
    int64_t step = 0;               // SYNC: the step the values begin (the smallest over shards).
    // The longest any shard kept the pull waiting (a SYNC barrier, an SSP bound) before it read
    // the values (PullResponseHeader.parked_us).
    absl::Duration parked;
  };
  // Fills every variable of the job in `out` from all shards in parallel, and the rows `sparse`
  // names (made on their shards when missing); remembers the versions for the next Push.
  // INVALID_ARGUMENT if a variable is missing or of the wrong size, or a table is unknown or
  // its rows are not keys.size() x its width.
  absl::StatusOr<PullResult> Pull(const PullOptions& options, const MutableVariables& out,
                                  const std::vector<SparsePull>& sparse = {});
  // Pull without the last copy where the values come through shared memory
  // (shared_memory_links.h): `*views` gets every dense variable of the job, by name, where its
  // values are: in a shard's pull region when the variable came whole through one link, in
  // one piece (nothing is copied into `out`); else in `out`, filled as Pull fills it. A view
  // into a region is valid until the next call on this session, which may overwrite it.
  // INVALID_ARGUMENT as Pull's.
  absl::StatusOr<PullResult> PullInPlace(const PullOptions& options, const MutableVariables& out,
                                         ConstVariables* views);
  // Where to compute gradients so that Push sends them without a copy: for each dense variable
  // that goes whole to one shard's shared-memory link, its place in that link's push region
  // (opened now where it was not). A Push whose gradient of such a variable is this span sends
  // it from there. Ask again before each step: a failed call may replace a link, whose old
  // region then stays mapped (and a gradient computed there is copied) until this is called
  // again. Empty where nothing goes through shared memory (and for jobs with sparse tables or
  // top-k pushes, which go in the requests).
  MutableVariables PushRegions();

  struct PushOptions {
    int64_t step = 0;   // SYNC: the step the gradient is for.
    int64_t clock = 0;  // SSP: the clock this push completes.
    // Per shard, the versions of the values the gradient was computed from; empty: those of
    // the last Pull (a worker that pulls again before pushing gives the earlier ones here).
    std::vector<int64_t> read_versions;
    // A job whose data is handed out: the batches the gradient is from, sent to the first shard
    // (PushRequestHeader.batches).
    std::vector<int64_t> batches;
  };
  // Sends `gradients` (every variable of the job) to all shards in parallel, tagged with the
  // read versions (above). The gradients' memory is sent without copying: it must stay
  // unchanged until Push returns. Returns each shard's response, in ps order.
  // With `sparse`, the gradient rows of sparse tables go with the dense gradient to their
  // shards (copied; INVALID_ARGUMENT as Pull's, and where a shard's dense gradient needs
  // chunks: sparse rows go in one message).
  // With top-k compression each shard's dense gradient joins its residual and only the top k
  // values go (one message, no chunks); INVALID_ARGUMENT, that residual unchanged, for a
  // gradient TopKCompressor refuses. A push that fails after compressing loses what it sent.
  absl::StatusOr<std::vector<PushResponse>> Push(const PushOptions& options,
                                                 const ConstVariables& gradients,
                                                 const std::vector<SparsePush>& sparse = {});

  // INVALID_ARGUMENT naming the variable (or table) and element of the first Inf or NaN in
  // `gradients`, unless the job allows them (allow_non_finite). Push does not call it: the
  // shards check what they get (a shard refuses its part, while the others may apply theirs).
  // A caller that must change no shard unless all accept (the Python binding) calls it first.
  absl::Status CheckFinite(const ConstVariables& gradients,
                           const std::vector<SparsePush>& sparse = {}) const;

  struct PushPullResult {
    std::vector<PushResponse> pushed;  // As Push returns them.
    PullResult pulled;                 // As Pull returns it.
  };
  // Push(push_options, gradients), then Pull(pull_options, out), in one round trip per shard
  // (the PushPull call) where every shard's gradient fits in one chunk; else the two calls.
  // `gradients` and `out` may not share memory.
  absl::StatusOr<PushPullResult> PushPull(const PushOptions& push_options,
                                          const ConstVariables& gradients,
                                          const PullOptions& pull_options,
                                          const MutableVariables& out,
                                          const std::vector<SparsePush>& push_sparse = {},
                                          const std::vector<SparsePull>& pull_sparse = {});

  // Bytes of the messages this session has sent and received so far (every attempt's;
  // serialized requests and responses, without gRPC's framing), with the tensors that went
  // through shared memory instead, as if they had been in the messages. Thread-safe.
  int64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }
  int64_t bytes_received() const { return bytes_received_.load(std::memory_order_relaxed); }
  // The part of both that went through shared memory (shared_memory_links.h). Thread-safe.
  int64_t shared_memory_bytes() const {
    return shared_memory_bytes_.load(std::memory_order_relaxed);
  }

 private:
  // What the parallel pull responses of one Pull or PushPull gather. Thread-safe.
  struct PullState {
    explicit PullState(int num_ps);
    void Record(int ps, const PullResponseHeader& header) ABSL_LOCKS_EXCLUDED(mu);
    // Shard `ps` answered into `link`'s pull region, which a pull in place leaves there.
    void LeftInMemory(int ps, const SharedMemoryLinks::Link* link) ABSL_LOCKS_EXCLUDED(mu);
    // The result once every response is in: shards that sent none count as version 0.
    PullResult Finish();
    absl::Mutex mu;
    PullResult result;
    // Per shard: the link whose pull region holds its values (a pull in place); else null.
    std::vector<const SharedMemoryLinks::Link*> left_in_memory;
  };
  // The outcome of a push on each shard. Thread-safe.
  struct PushState {
    explicit PushState(int num_ps) : responses(num_ps), sent(num_ps, false) {}
    // Keeps the push's outcome (ignores RECEIVED chunks).
    void Record(int ps, PushResponse response) ABSL_LOCKS_EXCLUDED(mu);
    // Every shard's outcome, INTERNAL if one is missing.
    absl::StatusOr<std::vector<PushResponse>> Finish(int64_t push_id);
    absl::Mutex mu;
    std::vector<std::optional<PushResponse>> responses;
    std::vector<bool> sent;  // Per shard: something was pushed there (set before the calls).
  };
  // One shard's push: its header (no chunk fields) and its slices' gradients, then its sparse
  // rows (copied into `sparse_rows`, kept alive with the push).
  struct ShardPush {
    PushRequestHeader header;
    std::vector<absl::Span<const float>> tensors;
    std::shared_ptr<std::vector<float>> sparse_rows;
    std::shared_ptr<std::vector<float>> topk_values;  // A top-k push's, in place of the slices'.
  };
  // One shard's part of a pull's sparse rows: the entries to ask for and, per entry, where
  // each key's row goes among the caller's (its index in the caller's keys).
  struct ShardSparse {
    std::vector<SparseRows> entries;
    std::vector<std::vector<size_t>> positions;
    int64_t floats = 0;
  };
  // Splits `tables`' keys (SparsePull or SparsePush) by shard; INVALID_ARGUMENT for an unknown
  // table or rows of the wrong size.
  template <typename Sparse>
  absl::StatusOr<std::vector<ShardSparse>> SplitSparse(const std::vector<Sparse>& tables) const;
  // Copies the rows of a pull's `staging` (a shard's answer, in its entries' order) into the
  // caller's rows.
  static void ScatterRows(const ShardSparse& shard, absl::Span<const float> staging,
                          const std::vector<SparsePull>& sparse,
                          const absl::flat_hash_map<std::string, int64_t>& widths);

  absl::Status CheckVariables(const MutableVariables& out) const;
  // A pull of shard `ps`, which it names (NameShard).
  PullRequest MakePullRequest(int ps, const PullOptions& options) const;
  // Whether every push goes to shard `ps`: it holds slices of the job, or the job has sparse
  // tables (any shard may hold rows, and a SYNC step or an SSP clock needs every worker's push
  // on every shard, rows or none).
  bool TakesPushes(int ps) const;
  // The slices on shard `ps`, in placement order, and their number of floats.
  std::vector<SliceRef> ShardSlices(int ps) const;
  int64_t ShardFloats(int ps) const;
  // Floats per push chunk (chunk_bytes), and how many chunks shard `ps`'s push takes (1: one
  // message, no chunk fields).
  int64_t ChunkFloats() const;
  int64_t PushChunks(int ps) const;
  // Decodes a PullResponse for the row ranges `expected` into `out`, and its sparse rows (if
  // any) into `sparse_staging`; values the answer left in shared memory are read from `link`'s
  // pull region.
  // `in_place`: values in the pull region are left there (PullInPlace). `bulk_frame`: the
  // frame on a bulk stream the pull named (0: none), where an answer that says so left its
  // values (the caller awaits them).
  absl::Status DecodeValues(const grpc::ByteBuffer& bytes, const std::vector<SliceRef>& expected,
                            const MutableVariables& out, PullResponseHeader* header,
                            absl::Span<float> sparse_staging = {},
                            const SharedMemoryLinks::Link* link = nullptr,
                            bool in_place = false, uint64_t bulk_frame = 0) const;
  // Where `slices`' values go in `out`, in order.
  absl::StatusOr<std::vector<absl::Span<float>>> Destinations(
      const MutableVariables& out, const std::vector<SliceRef>& slices) const;
  // Pulls of every slice on shard `ps` whose values come on its bulk streams, the rows split
  // over them (each pull's first attempt's; in the answer when made again). FAILED_PRECONDITION
  // where the shard has none: its values come in the answers. worker_session_bulk.cc.
  absl::Status AddBulkPullCalls(int ps, const PullOptions& options, const MutableVariables& out,
                                PullState* state, std::vector<PsConnections::Call>* calls);
  // A pull's `bytes` of values, answered as `header` says, whose request named `frame` on
  // `link`: awaited there when the answer left them on the stream (UNAVAILABLE when they did
  // not come: the pull is made again, in the answer), the frame forgotten when the answer
  // holds them.
  absl::Status TakeBulkValues(BulkLink* link, uint64_t frame, const PullResponseHeader& header,
                              int64_t bytes);
  // Shard `ps`'s push `push` (dense only, float32) on its bulk streams: a chunk on each open
  // stream (the whole push where one is), each chunk's gradient a frame, made again in the
  // request when its frame could not be taken. False where the shard has no stream open: the
  // caller pushes in the requests. worker_session_bulk.cc.
  bool AddBulkPushCalls(int ps, const ShardPush& push, PushState* state,
                        std::vector<PsConnections::Call>* calls);
  // The floats [offset, offset + size) of `spans` concatenated, as pieces of those spans.
  static std::vector<absl::Span<const float>> Subspans(
      const std::vector<absl::Span<const float>>& spans, int64_t offset, int64_t size);
  // Shard `ps`'s shared memory link, or null where its tensors go in the requests.
  // Shard `ps`'s link or stream to its ps; none once the shard moved to another ps (MoveShard):
  // its links were opened with the ps it left, and its values then go in the messages.
  SharedMemoryLinks::Link* LinkFor(int ps) {
    return links_ && AtOwnPs(ps) ? links_->For(ps) : nullptr;
  }
  BulkLink* BulkFor(int ps, int k) {
    return bulk_ != nullptr && AtOwnPs(ps) ? bulk_->For(ps, k) : nullptr;
  }
  bool AtOwnPs(int ps) const {
    return replicated() || connections_->MovedRoute(spec_.job_id(), ps) == ps;
  }
  // Puts a shard's dense gradient into `link`'s push region and names the segment in the
  // header; the tensors stay, for a retry in the requests.
  void PushThrough(SharedMemoryLinks::Link* link, ShardPush* push);
  // Counts shard `ps`'s values, answered through shared memory, as received.
  void CountPulledThroughMemory(int ps);
  // `in_place`: a shard's values answered through shared memory stay in its pull region (the
  // state says which: PullInPlace).
  void AddPullCalls(const PullOptions& options, const MutableVariables& out,
                    const std::vector<SparsePull>& sparse,
                    const std::vector<ShardSparse>& shard_sparse, PullState* state,
                    std::vector<PsConnections::Call>* calls, bool in_place = false);
  // A variable's rows from `row_begin` on, in a shard's shared-memory region.
  struct RegionPiece {
    int64_t row_begin;
    absl::Span<float> values;
  };
  // Each dense variable's pieces in the push (or pull) regions of `links` (per shard; null:
  // none), in row order.
  absl::flat_hash_map<std::string, std::vector<RegionPiece>> PiecesIn(
      const std::vector<const SharedMemoryLinks::Link*>& links, bool push) const;
  // The whole of `variable` where `parts` hold it in one piece, one after another; else empty.
  absl::Span<float> OnePiece(const std::string& variable,
                             const std::vector<RegionPiece>& parts) const;
  // PullInPlace's views once its calls are done: each variable in one piece of a region left in
  // memory is viewed there; the pieces of the others are copied into `out`.
  absl::Status ViewsAfterPull(const PullState& state, const MutableVariables& out,
                              ConstVariables* views) const;
  // Compresses (top-k) when the job says so, which moves that shard's residual.
  absl::StatusOr<ShardPush> MakeShardPush(int ps, const PushOptions& options,
                                          const ConstVariables& gradients, int64_t push_id,
                                          const std::vector<SparsePush>& sparse,
                                          const ShardSparse& shard_sparse);
  // Runs `calls`, counting their bytes into bytes_sent_ and bytes_received_. A failure drops
  // the shared memory links (opened again at their next use).
  absl::Status RunCounted(std::vector<PsConnections::Call> calls);
  absl::Status AddPushCalls(const PushOptions& options, const ConstVariables& gradients,
                            int64_t push_id, const std::vector<SparsePush>& sparse,
                            PushState* state, std::vector<PsConnections::Call>* calls);
  WorkerSession(PsConnections* connections, const ParameterSpec& spec, int worker,
                Placement placement);
  // The span of `slice`'s rows in a whole-variable span.
  template <typename T>
  absl::StatusOr<absl::Span<T>> SliceOf(
      const absl::flat_hash_map<std::string, absl::Span<T>>& variables,
      const std::string& variable, int64_t row_begin, int64_t row_count) const;

  PsConnections* const connections_;
  const ParameterSpec spec_;
  const int worker_;
  int incarnation_ = 0;  // Set once, by Create.
  const Placement placement_;
  absl::flat_hash_map<std::string, int64_t> variable_elements_;
  absl::flat_hash_map<std::string, int64_t> variable_row_size_;
  absl::flat_hash_map<std::string, int64_t> table_width_;  // Sparse tables' row widths.
  std::vector<int64_t> read_versions_;
  int64_t next_push_id_ = 1;
  // Per shard, with CompressionSpec.topk_fraction: the pushes' compressor and residual.
  std::vector<std::unique_ptr<TopKCompressor>> topk_;
  // Where the job's tensors may go through shared memory (WhyNoSharedMemory, and the client's
  // options say so): the links to the ps tasks on this host. Null otherwise.
  std::unique_ptr<SharedMemoryLinks> links_;
  // Where a shard's large pulls may come on a bulk stream (the client's options say so; not for
  // replicated jobs, whose pulls move between copies, nor 16-bit values): the streams. Null
  // otherwise.
  std::unique_ptr<BulkLinks> bulk_;
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};
  std::atomic<int64_t> shared_memory_bytes_{0};
};

// The values the shards of the job of `spec` hold now, into `values` (every dense variable):
// read as an observer (OBSERVER_INCARNATION), waiting for nothing and changing no worker's
// state; once every worker has left, the job's final model, which psctl saves in params/.
absl::Status PullCurrentValues(PsClient* client, const ParameterSpec& spec,
                               const MutableVariables& values);

}  // namespace ps

#endif  // PS_COMMON_CLIENT_WORKER_SESSION_H_
