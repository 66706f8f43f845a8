// The primary's side of a replicated shard (ParameterSpec.replicas 2; docs/replication.md).
//
// Every input that changes the shard's state (a whole push, a leave, lost workers, a rejoin,
// batches handed out) is numbered as it is submitted, sent to the backup ps over one Replicate
// stream in that order, and applied here only once the backup has acknowledged it, in the same
// order, on this object's own thread; the submitter hears the result then. So a worker is told
// that an update was applied only once both copies hold it, and nothing a pull can see here is
// missing on the backup: the backup is this shard plus the inputs in flight.
//
// A stream starts with an install: a snapshot of the shard after the inputs applied so far, from
// which the backup ps makes its copy (replacing any older one); the inputs not yet acknowledged
// follow. A stream that breaks is opened again the same way, so a backup ps that restarted empty
// is rebuilt. While no stream is open, inputs wait (CONNECTING); once the backup has been out of
// reach for `unreachable_after`, or at once when connecting to it fails (refused: its ps is not
// running there; unreachable; a TLS handshake that failed) or when this copy took the shard over
// from it (`backup_found_gone`), the shard goes on alone (DEGRADED, logged and counted), applying
// inputs as they come, and tries the backup again every `retry_interval` (ten times that when the
// backup ps had no room for the copy).
//
// When the backup refuses an install because it took the shard over (its ps found this one
// gone, docs/replication.md "Promotion"), this copy is FENCED: it applies nothing more, and
// answers every input, pending or new, UNAVAILABLE saying where the shard went.
//
// A copy serving a shard away from its own ps (it took the shard over; `hand_back`) hands the
// shard back to that ps, its backup, as soon as the backup is installed there: a hand-back input
// follows the inputs before it, new requests are refused meanwhile, and once the backup has
// acknowledged it, the backup serves the shard and this copy is HANDED_BACK (refusing every
// request, saying where the shard went). A backup that goes away or refuses first leaves this
// copy serving, to try again at its next install.
//
// The outcome the backup reports for each input is compared with this copy's; a difference
// (which the determinism of ShardJob rules out) is logged, counted, and repaired by a new
// install.
#ifndef PS_SERVER_SHARD_REPLICATOR_H_
#define PS_SERVER_SHARD_REPLICATOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/shard_job.h"

namespace ps {

struct ShardReplicatorOptions {
  std::string backup_name;                 // "ps:1 (10.0.0.2:2222)", for messages.
  std::shared_ptr<grpc::Channel> channel;  // To the backup ps.
  absl::Duration unreachable_after = absl::Seconds(1);
  absl::Duration retry_interval = absl::Seconds(1);
  // This copy serves the shard away from its own ps, which holds the backup: hand it back there.
  bool hand_back = false;
  // The shard came back here from the backup's copy (a hand-back): until the first install
  // there, Superseding() says so.
  bool superseding = false;
  // This copy took the shard over from the backup's ps, just found gone (a worker's call failed
  // there): if that ps does not answer the first install, the shard goes on alone at once
  // rather than after `unreachable_after` (a ps that hangs accepts connections and answers
  // nothing; its workers waited for keepalive to find it gone already).
  bool backup_found_gone = false;
  // A live move of a shard without replicas to the backup's ps (ParameterService::MoveShard),
  // set with hand_back: `on_move_end` is called once, with OK when the shard went there (the
  // hand-back acknowledged, or sent and its answer lost), or with why it stays here (the ps
  // refused the install or the hand-back, could not be reached, or the stream broke before the
  // hand-back was sent). A move never replicates after its end: a copy the shard stays on
  // applies its inputs alone until it is stopped. Refusals name ps `move_to` as where the
  // shard went (WithShardMovedTo).
  std::function<void(absl::Status)> on_move_end;
  int move_from = -1;  // This ps's task index (ReplicaInstall.moving_from).
  int move_to = -1;
  // How far a move's inputs may be applied here ahead of the new ps, in bytes of those not yet
  // acknowledged there (Submit; one at least); 0: ShardReplicator::kMoveAheadBytes.
  int64_t move_ahead_bytes = 0;
};

// Thread-safe.
class ShardReplicator {
 public:
  // Called once with the input's result on this copy (a push's answer, the batches handed out;
  // empty for the others), on the replicator's thread; it must not block.
  using Done = std::function<void(absl::StatusOr<ReplicaOutcome>)>;

  // Starts replicating `job`, which from now on changes only through Submit.
  ShardReplicator(std::shared_ptr<ShardJob> job, ShardReplicatorOptions options);
  ShardReplicator(const ShardReplicator&) = delete;
  ShardReplicator& operator=(const ShardReplicator&) = delete;
  // Stops; inputs not yet applied are answered UNAVAILABLE.
  ~ShardReplicator();

  // Numbers `input` (its seq is set here) and applies it once the backup holds it, calling
  // `done` then; returns none. `push`: a push input's decoded gradient, applied here without
  // decoding the message again. A move's copy (on_move_end) applies it here at once instead,
  // in the order the new ps gets it, and returns its result for the caller to answer (`done`
  // is not called): the shard has no replicas, so nothing waits for the new ps but the
  // hand-over, sent once the new ps holds every input before it. So the workers go on while
  // the shard is copied (only the snapshot holds them up) and caught up, up to
  // kMoveAheadBytes ahead of the new ps; past that an input waits as a replica's does.
  std::optional<absl::StatusOr<ReplicaOutcome>> Submit(
      ReplicaInput input, Done done, std::optional<ShardJob::ReadyPush> push = std::nullopt)
      ABSL_LOCKS_EXCLUDED(apply_mu_, mu_);

  ReplicationStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::shared_ptr<ShardJob>& job() const { return job_; }
  // OK while this copy serves the shard; else the error to answer requests with: the backup
  // took the shard over (FENCED), or the shard is going or went back to its own ps.
  absl::Status Fenced() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether this copy no longer serves the shard: FENCED (never again) or HANDED_BACK (again only
  // as a new replicator's, ParameterService::RetakeFromGonePs).
  bool Superseded() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether this copy went back (HANDED_BACK).
  bool HandedBack() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the hand-back is sent and its answer not yet in.
  bool HandingBack() const ABSL_LOCKS_EXCLUDED(mu_);
  // For a move that succeeded (HANDED_BACK), the ps the shard went to (move_to); else none.
  std::optional<int> MovedTo() const ABSL_LOCKS_EXCLUDED(mu_);
  // The shard's version when it was handed over (for a move that succeeded).
  int64_t MovedAtVersion() const ABSL_LOCKS_EXCLUDED(mu_);
  // What a copy that went back (HANDED_BACK) learns of the ps it went back to, for taking the
  // shard again (ParameterService::RetakeFromGonePs). The start of that ps which took the shard
  // back applies nothing before this copy holds it too, unless it finds this copy's ps out of
  // reach for replica_unreachable_after; `within` is less than that. A start of the ps that
  // began is taken to mean the start before it ended: one start at a time serves an address.
  enum class HomeAfterHandBack {
    // It serves the shard or holds a copy of it, cannot be asked (or does not say how long it
    // has run), or another call is asking it: nothing to do.
    kUnknown,
    // The start of it that took the shard back (or none did) ended sooner than `within` after
    // the hand-back: it refuses connections now, sooner than that, or it was started again by
    // then and does not hold the shard. It applied nothing this copy lacks.
    kGoneInTime,
    // It was started again later than that and does not hold the shard: it may have applied
    // updates alone before it stopped, so this copy may be out of date.
    kStartedAgainTooLate,
  };
  // Waits up to 100 ms for a connection attempt to tell whether the ps refuses connections,
  // then asks it (ListJobs, up to `wait`) whether it holds the shard and how long it has run.
  // One call at a time asks, on its own thread (a request handler's, for at most 100 ms plus
  // `wait`); the others hear kUnknown meanwhile.
  HomeAfterHandBack AskHomeAfterHandBack(absl::Duration within, absl::Duration wait) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // What the new ps's ListJobs says of a move's hand-back whose answer was lost, for shard
  // `shard` of `job_id` handed over at `version` (`home`: to its own ps): true when it serves
  // the shard (a copy, or its own shard again at home), or moved it on after later updates;
  // false when it holds no copy of it (away), or still answers with an earlier move's record
  // (a version before this one); none when it cannot tell yet (a copy still arriving, a
  // record at this very version).
  static std::optional<bool> Landed(const ListJobsResponse& listed, const std::string& job_id,
                                    int shard, int64_t version, bool home);
  // Whether this copy was handed the shard by the backup's copy and has not installed its backup
  // there yet: the backup's copy, which may not know it handed the shard back (its stream broke
  // before the acknowledgement), is then refused as an install of the shard (ABORTED).
  bool Superseding() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Pending {
    ReplicaInput input;
    std::optional<ShardJob::ReadyPush> push;
    Done done;
    // A move's input, applied here at once (Submit): its result once applied, compared with the
    // new ps's when it acknowledges the input.
    bool applied_ahead = false;
    std::optional<absl::StatusOr<ReplicaOutcome>> outcome = std::nullopt;
    int64_t bytes = 0;  // Its size, counted in ahead_bytes_.
  };
  using Stream = grpc::ClientReaderWriter<ReplicaInput, ReplicaAck>;

  void Run();
  // A move's Submit: numbers `input` and queues it for the new ps; applies it here now and
  // returns its result, unless that would take the inputs applied ahead and not yet
  // acknowledged there past move_ahead_bytes_ (or an input waits already, or the snapshot is
  // being taken): then it waits to be applied on its acknowledgement, as a replica's, `done`
  // hearing it.
  std::optional<absl::StatusOr<ReplicaOutcome>> SubmitToMove(
      ReplicaInput input, Done done, std::optional<ShardJob::ReadyPush> push)
      ABSL_LOCKS_EXCLUDED(apply_mu_, mu_);
  // Opens a stream and installs the backup; the error if it could not, with `*refused` set when
  // connecting failed (refused, unreachable, or a TLS handshake that failed) rather than going
  // unanswered.
  absl::Status Open(grpc::ClientContext* context, std::unique_ptr<Stream>* stream, bool* refused);
  // Sends the pending inputs over `stream` as they come, until it breaks or Stop.
  void Send(Stream* stream, grpc::ClientContext* context, uint64_t generation);
  // Applies the oldest pending input here; `ack`: the backup's answer (none while DEGRADED).
  void ApplyOldest(const ReplicaAck* ack);
  void SetState(ReplicationStats::State state, const std::string& error) ABSL_LOCKS_EXCLUDED(mu_);
  // FENCED: answers every pending input with `why`.
  void Fence(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  // Queues the hand-back input after those pending, and refuses new inputs and requests.
  void QueueHandBackLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The hand-back's end: HANDED_BACK when the backup acknowledged it, or when its answer was
  // lost (`ack` null: the stream broke, and the backup is out of reach) after it was sent; on
  // its refusal, or unanswered and never sent, this copy goes on serving, and hands the shard
  // back again after a new install.
  void FinishHandBack(const ReplicaAck* ack) ABSL_LOCKS_EXCLUDED(mu_);
  bool moving() const { return static_cast<bool>(options_.on_move_end); }
  // A move's catch-up: how long after the install new inputs are still taken before the
  // hand-back is queued (refusing them) even though inputs are still pending.
  static constexpr absl::Duration kMoveCatchUp = absl::Seconds(1);
  // How far a move's inputs applied here may be ahead of the new ps (SubmitToMove), in bytes of
  // the inputs not yet acknowledged there (one input at least, however big).
  static constexpr int64_t kMoveAheadBytes = int64_t{32} << 20;
  // For a move's hand-back sent and unanswered: false once the new ps says it does not hold
  // the shard's copy (its stream ended there first); true when it serves it, or cannot tell
  // within 10 s (it then may serve it).
  bool MoveMayHaveLanded() const ABSL_LOCKS_EXCLUDED(mu_);
  // A move's end (on_move_end, once).
  void EndMove(const absl::Status& outcome) ABSL_LOCKS_EXCLUDED(mu_);
  // A move that ended: applies inputs as they come, without a backup, until Stop (or until a
  // hand-back left pending makes this copy HANDED_BACK).
  void ServeAlone() ABSL_LOCKS_EXCLUDED(mu_);

  const std::shared_ptr<ShardJob> job_;
  const ShardReplicatorOptions options_;
  const std::unique_ptr<ParameterServer::Stub> stub_;

  // A move's: held while an input is numbered and applied (SubmitToMove, ApplyOldest) and while
  // the snapshot is taken (Open), so that inputs are applied in their order and the snapshot
  // holds exactly those applied.
  absl::Mutex apply_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* open_context_ ABSL_GUARDED_BY(mu_) = nullptr;  // Cancelled by Stop.
  // Inputs submitted and not yet applied here, oldest first: seq applied_ + 1, applied_ + 2, ...
  std::deque<std::shared_ptr<Pending>> pending_ ABSL_GUARDED_BY(mu_);
  int64_t applied_ ABSL_GUARDED_BY(mu_) = 0;    // Inputs applied here (the last seq).
  // Inputs applied here whose outcome was compared with the backup's: a move's hand-back waits
  // for every one before it.
  int64_t compared_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t submitted_ ABSL_GUARDED_BY(mu_) = 0;  // The last seq given out.
  int64_t next_to_send_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // Of the open stream; bumped when it breaks.
  bool repair_ ABSL_GUARDED_BY(mu_) = false;      // A divergence: install anew.
  // Set once the backup took the shard over, or while and after handing the shard back.
  absl::Status fenced_ ABSL_GUARDED_BY(mu_);
  bool handing_back_ ABSL_GUARDED_BY(mu_) = false;  // The hand-back input is pending.
  bool handed_back_ ABSL_GUARDED_BY(mu_) = false;   // ... and was acknowledged: Run ends.
  // When the hand-back was queued, before the own ps could have taken the shard.
  std::chrono::steady_clock::time_point hand_back_queued_at_ ABSL_GUARDED_BY(mu_);
  bool hand_back_refused_ ABSL_GUARDED_BY(mu_) = false;  // Reopen later, and hand back again.
  bool hand_back_sent_ ABSL_GUARDED_BY(mu_) = false;  // Taken by Send: the own ps may have it.
  ReplicationStats stats_ ABSL_GUARDED_BY(mu_);
  bool move_ended_ ABSL_GUARDED_BY(mu_) = false;  // on_move_end was called.
  int64_t moved_at_version_ ABSL_GUARDED_BY(mu_) = 0;  // The shard's, at the hand-over.
  absl::Time move_installed_at_ ABSL_GUARDED_BY(mu_);  // A move's install was acknowledged.
  const int64_t move_ahead_bytes_;  // options_.move_ahead_bytes, its 0 resolved.
  int64_t ahead_bytes_ ABSL_GUARDED_BY(mu_) = 0;    // Of the queued inputs applied ahead.
  int64_t waiting_ ABSL_GUARDED_BY(mu_) = 0;  // A move's queued inputs not applied ahead.
  bool snapshotting_ ABSL_GUARDED_BY(mu_) = false;  // A move's Open takes its snapshot.
  mutable std::atomic<bool> asking_home_{false};  // AskHomeAfterHandBack's call is out.
  std::thread thread_;  // Run.
};

}  // namespace ps

#endif  // PS_SERVER_SHARD_REPLICATOR_H_
