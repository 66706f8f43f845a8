// The ParameterServer gRPC service of one ps task (callback API). Pull, Push and PushPull are
// raw methods: their tensors are decoded straight into the shard's buffers and encoded from
// snapshots without copies (common/tensor/tensor_coding.h). A pull that must wait is parked in its
// ShardJob and finished later by a push, the wait timeout, cancellation or Shutdown; no gRPC
// thread ever blocks on it.
#ifndef PS_SERVER_PS_SERVICE_H_
#define PS_SERVER_PS_SERVICE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/checkpoint/checkpoint_store.h"
#include "common/cluster/cluster_spec.h"
#include "common/file_system.h"
#include "common/metrics/metrics.h"
#include "common/security/peer_identity.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/bulk_streams.h"
#include "server/byte_budget.h"
#include "server/deadline_timer.h"
#include "server/io_thread.h"
#include "server/requests_in_flight.h"
#include "server/push_request.h"
#include "server/shard_job.h"
#include "server/shard_replicator.h"
#include "common/security/transport_security.h"

namespace ps {

// Limits of one ps. A job's bytes are those of its values and optimizer slots on this shard,
// twice (updates write to a fresh copy while pulls read the last one): ShardJob::MemoryBytes.
struct ServiceLimits {
  int max_jobs = 64;
  int max_workers = 4096;  // Per job.
  int64_t max_job_bytes = int64_t{64} << 30;
  // Of every job together; 0: three quarters of this machine's memory.
  int64_t max_total_bytes = 0;
  // Calls of one peer in flight at once, parked pulls included (server/requests_in_flight.h
  // says who is a peer: a certificate's identity under mutual TLS, else one connection). A
  // worker's batch of calls keeps about max_bytes_in_flight_per_ps / chunk_bytes of them in
  // flight per shard (16 with PsConnections' defaults), so that even the 16 workers of a local
  // cluster sharing one host certificate stay well below the default.
  int max_requests_per_peer = 1024;
  // The bytes of pushes held at once by all jobs and connections together: push buffers being
  // filled or applied, and push requests received (server/byte_budget.h, --max_inflight_mb).
  // 0: no budget; -1: a quarter of the memory this process may use (UsableMemoryBytes).
  int64_t max_inflight_bytes = -1;
};

struct ParameterServiceOptions {
  int ps_index = 0;
  int num_ps = 1;
  // How long a pull may wait when its request does not say (wait_timeout_ms = 0).
  absl::Duration default_wait_timeout = absl::Seconds(60);
  // How long a job whose every worker has left stays on the shard (its statistics for
  // `psctl status`, its values for the results) before the shard forgets it and frees its
  // memory. InfiniteDuration(): never.
  absl::Duration finished_job_retention = absl::Hours(1);
  // Where this ps writes checkpoints of jobs that do not name a directory (--checkpoint_dir);
  // "": none (such jobs' checkpoints are refused, saying so).
  std::string checkpoint_dir;
  // Checkpoint files go through it (a test injects disk faults). Not owned.
  FileSystem* file_system = FileSystem::Default();
  // Where each worker task of the cluster listens (worker:i at worker_addresses[i], "host:port"):
  // under mutual TLS a task pushes, pulls and leaves only as the workers on its own host
  // (RequireWorkerHost), and a job grows only by workers after these (GrowJob). Empty: neither
  // is checked.
  std::vector<std::string> worker_addresses;
  // What this ps holds at most (--max_jobs, --max_workers, --max_job_mb, --max_memory_mb); a
  // job beyond a limit is refused with RESOURCE_EXHAUSTED before anything of it is allocated.
  // A call beyond --max_requests_per_peer is refused with RESOURCE_EXHAUSTED before anything
  // of its request is decoded.
  ServiceLimits limits;
  // Whose time pull deadlines, worker leases, retention and checkpoint timestamps are on; a
  // test passes a SimulatedClock. Not owned.
  Clock* clock = Clock::Real();
  // Replication (ParameterSpec.replicas 2, server/shard_replicator.h): where every ps task of
  // the cluster listens (task i at ps_addresses[i]; empty: this ps cannot replicate, and such
  // jobs are refused), and how this ps calls the next one, which backs up its shards: the
  // channel's security and the cluster's token (none when empty).
  std::vector<std::string> ps_addresses;
  TransportSecurity security;
  std::string token;
  // How long a shard waits for its unreachable backup before it goes on alone.
  absl::Duration replica_unreachable_after = absl::Seconds(1);
  // Shared memory for workers on this host (docs/shared_memory.md): the directory of the
  // descriptor handout's socket (--shared_memory_dir), and the bytes all segments hold at most
  // (--shared_memory_mb); 0: none, every tensor goes in the requests.
  std::string shared_memory_dir = "/tmp";
  int64_t shared_memory_bytes = int64_t{1} << 30;
  // Bulk streams for large pulls (docs/bulk_streams.md): the address and port they listen on
  // (--bulk_port; 0: a free one); port -1: none, every pull's values go in its answer. PsServer
  // sets the host to its own and opens none where it serves TLS (the streams are plaintext).
  std::string bulk_host = "0.0.0.0";
  int bulk_port = -1;
};

using ParameterServerBase = ParameterServer::WithCallbackMethod_MoveShard<
    ParameterServer::WithCallbackMethod_OpenSharedMemory<
    ParameterServer::WithCallbackMethod_OpenBulkStream<
    ParameterServer::WithCallbackMethod_Replicate<
    ParameterServer::WithCallbackMethod_CreateJob<
    ParameterServer::WithCallbackMethod_DeleteJob<ParameterServer::WithRawCallbackMethod_Pull<
        ParameterServer::WithRawCallbackMethod_Push<
            ParameterServer::WithRawCallbackMethod_PushPull<
                ParameterServer::WithCallbackMethod_GetJobStats<
                    ParameterServer::WithCallbackMethod_ListJobs<
                        ParameterServer::WithCallbackMethod_LeaveJob<
                        ParameterServer::WithCallbackMethod_GrowJob<
                        ParameterServer::WithCallbackMethod_NextBatches<
                            ParameterServer::WithCallbackMethod_ArmCheckpoint<
                                ParameterServer::WithCallbackMethod_CommitCheckpoint<
                                    ParameterServer::WithCallbackMethod_ListCheckpoints<
                                        ParameterServer::WithCallbackMethod_RestoreJob<
                                            ParameterServer::WithCallbackMethod_DeleteCheckpoints<
                                                ParameterServer::WithCallbackMethod_GetApplyLog<
                                                ParameterServer::WithCallbackMethod_GetTrace<
                                                    ParameterServer::Service>>>>>>>>>>>>>>>>>>>>>;

// Thread-safe.
class ParameterService final : public ParameterServerBase {
 public:
  explicit ParameterService(const ParameterServiceOptions& options);
  ~ParameterService() override;

  // Ends every parked pull with UNAVAILABLE and refuses new calls with UNAVAILABLE. Call before
  // shutting the gRPC server down, so that its shutdown does not wait on parked calls.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Writes every job's statistics (JobStats) as Prometheus families, labelled job_id and
  // shard (docs/REFERENCE.md, "Metrics"): a MetricsRegistry collector, called at scrape time.
  void WriteMetrics(MetricsWriter* writer) ABSL_LOCKS_EXCLUDED(mu_);

  // The bytes all jobs together may hold here (--max_memory_mb, or 3/4 of the memory this
  // process may use: the machine's, or its container's limit).
  int64_t max_total_bytes() const { return max_total_bytes_; }

  grpc::ServerUnaryReactor* CreateJob(grpc::CallbackServerContext* context,
                                      const CreateJobRequest* request,
                                      CreateJobResponse* response) override;
  grpc::ServerUnaryReactor* DeleteJob(grpc::CallbackServerContext* context,
                                      const DeleteJobRequest* request,
                                      DeleteJobResponse* response) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetJobStats(grpc::CallbackServerContext* context,
                                        const JobStatsRequest* request,
                                        JobStats* response) override;
  grpc::ServerUnaryReactor* GetApplyLog(grpc::CallbackServerContext* context,
                                        const ApplyLogRequest* request,
                                        ApplyLog* response) override;
  grpc::ServerUnaryReactor* GetTrace(grpc::CallbackServerContext* context,
                                     const TraceRequest* request, Trace* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const ListJobsRequest* request,
                                     ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* LeaveJob(grpc::CallbackServerContext* context,
                                     const LeaveJobRequest* request,
                                     LeaveJobResponse* response) override;
  // ps_service_grow.cc.
  grpc::ServerUnaryReactor* GrowJob(grpc::CallbackServerContext* context,
                                    const GrowJobRequest* request,
                                    GrowJobResponse* response) override;
  grpc::ServerUnaryReactor* NextBatches(grpc::CallbackServerContext* context,
                                        const NextBatchesRequest* request,
                                        NextBatchesResponse* response) override;
  // Checkpoints (ps_service_checkpoint.cc): shard files are written, and restores read, on
  // io_thread_, never on a gRPC thread.
  grpc::ServerUnaryReactor* ArmCheckpoint(grpc::CallbackServerContext* context,
                                          const ArmCheckpointRequest* request,
                                          ArmCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* CommitCheckpoint(grpc::CallbackServerContext* context,
                                             const CommitCheckpointRequest* request,
                                             CommitCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* ListCheckpoints(grpc::CallbackServerContext* context,
                                            const ListCheckpointsRequest* request,
                                            ListCheckpointsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteCheckpoints(grpc::CallbackServerContext* context,
                                              const DeleteCheckpointsRequest* request,
                                              DeleteCheckpointsResponse* response) override;
  grpc::ServerUnaryReactor* RestoreJob(grpc::CallbackServerContext* context,
                                       const RestoreJobRequest* request,
                                       RestoreJobResponse* response) override;
  // A shared memory segment for a worker on this host (ps_service_shared_memory.cc).
  grpc::ServerUnaryReactor* OpenSharedMemory(grpc::CallbackServerContext* context,
                                             const OpenSharedMemoryRequest* request,
                                             OpenSharedMemoryResponse* response) override;
  // A bulk stream for a worker's large pulls (ps_service_bulk.cc).
  grpc::ServerUnaryReactor* OpenBulkStream(grpc::CallbackServerContext* context,
                                           const OpenBulkStreamRequest* request,
                                           OpenBulkStreamResponse* response) override;
  // The bulk streams' port, or -1 where this ps opens none.
  int bulk_port() const { return bulk_streams_ == nullptr ? -1 : bulk_streams_->port(); }
  // Pulls answered on bulk streams so far, and pushes' frames read from them (0 without them).
  int64_t bulk_frames_sent() const {
    return bulk_streams_ == nullptr ? 0 : bulk_streams_->traffic().frames_sent;
  }
  int64_t bulk_frames_received() const {
    return bulk_streams_ == nullptr ? 0 : bulk_streams_->traffic().frames_received;
  }
  // The backup's side of replication (ps_service_replica.cc).
  grpc::ServerBidiReactor<ReplicaInput, ReplicaAck>* Replicate(
      grpc::CallbackServerContext* context) override;
  // A live move of this ps's own shard of a job without replicas to another ps
  // (ps_service_move.cc; docs/replication.md "A live move to another ps").
  grpc::ServerUnaryReactor* MoveShard(grpc::CallbackServerContext* context,
                                      const MoveShardRequest* request,
                                      MoveShardResponse* response) override;

  // Sets where the ps tasks listen (options.ps_addresses) once they are known: an in-process
  // cluster's servers bind port 0 first. Jobs created before keep their replicators.
  void SetPsAddresses(std::vector<std::string> addresses) ABSL_LOCKS_EXCLUDED(mu_);
  // For tests: the backup copy of shard `shard` of job `job_id` this ps holds, or null.
  std::shared_ptr<ShardJob> BackupForTesting(const std::string& job_id, int shard)
      ABSL_LOCKS_EXCLUDED(mu_);
  // For tests: this ps's own shard of job `job_id`, or null.
  std::shared_ptr<ShardJob> JobForTesting(const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class PullReactor;
  class ReplicaReactor;

  // What a backup stream of `peer` is bound to once installed.
  struct BackupBinding {
    std::string job_id;
    uint64_t generation = 0;
    std::shared_ptr<ShardJob> job;
    int64_t last_seq = 0;
  };
  // Replication (ps_service_replica.cc). OK for a spec without replicas, or one this ps can
  // replicate (FAILED_PRECONDITION saying why not).
  absl::Status CheckReplicas(const ParameterSpec& spec) ABSL_LOCKS_EXCLUDED(mu_);
  // The replicator of `job` (this ps's own shard of a replicated job), or null.
  std::shared_ptr<ShardReplicator> ReplicatorFor(const std::shared_ptr<ShardJob>& job)
      ABSL_LOCKS_EXCLUDED(mu_);
  // How a change to `job` is made: at once (null: the job has no replicas) or through its
  // replicator; UNAVAILABLE for a replicated shard that has none (this ps is stopping, or the
  // shard's other copy took it over): never applied here alone.
  absl::StatusOr<std::shared_ptr<ShardReplicator>> ChangesThrough(
      const std::shared_ptr<ShardJob>& job) ABSL_LOCKS_EXCLUDED(mu_);
  // A replicator of `job`, a shard this ps serves, to its backup on ps `backup` (the next ps
  // for its own shard); null when the job has no replicas, or when this ps does not know where
  // ps `backup` listens. A shard served away from its own ps goes back there once its backup is
  // installed there (ShardReplicatorOptions.hand_back); `superseding`: it came back here so;
  // `backup_found_gone`: this ps took the shard over from ps `backup`, found gone
  // (ShardReplicatorOptions.backup_found_gone).
  std::shared_ptr<ShardReplicator> MakeReplicatorLocked(const std::shared_ptr<ShardJob>& job,
                                                        int backup, bool superseding = false,
                                                        bool backup_found_gone = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the backup copy this ps holds of shard `shard` of `job_id` serve the shard, replicated
  // to the shard's other ps: this ps's own shard becomes its job again (as before its ps was
  // started again); the previous ps's shard is served as a promoted copy until it goes back.
  // FAILED_PRECONDITION when this ps serves the shard already, or does not know where the
  // other ps listens. `superseding`: a hand-back made it (MakeReplicatorLocked);
  // `backup_found_gone`: a takeover from the other ps, found gone (a worker's call failed there;
  // MakeReplicatorLocked). The replicator
  // it replaces (of this ps's own job, fenced off, or of a copy that went back) goes to
  // `dropped`, to stop outside mu_.
  absl::StatusOr<std::shared_ptr<ShardJob>> PromoteLocked(
      const std::string& job_id, int shard, bool superseding,
      std::shared_ptr<ShardReplicator>* dropped, bool backup_found_gone = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A hand-back input on the backup stream `binding` (ReplicaHandBack): this ps takes its own
  // shard back. The ack says whether it did (a refusal is an ack's code, which leaves the other
  // copy serving, not an error that would end the stream).
  ReplicaAck TakeShardBack(const BackupBinding& binding, int64_t seq) ABSL_LOCKS_EXCLUDED(mu_);
  // The copy of shard `shard` of job `job_id` this ps holds as a backup, promoted to serve the
  // shard if it was not yet: only once no stream from its primary is open (the primary is gone;
  // a primary still streaming keeps the shard: UNAVAILABLE, retry it). UNAVAILABLE too when
  // this ps holds no copy of the shard.
  // `peer` must be allowed `access` to the job first; only a data call (a worker's) promotes.
  absl::StatusOr<std::shared_ptr<ShardJob>> PromotedCopy(const std::string& job_id, int shard,
                                                         const Peer& peer, JobAccess access,
                                                         absl::string_view method)
      ABSL_LOCKS_EXCLUDED(mu_);
  // PromotedCopy of a copy that went back to its own ps (HANDED_BACK, `went_back` its
  // replicator): that copy serves the shard again when the own ps stopped right after taking it
  // back, before it replicated anything here (it refuses connections, or was started again
  // empty: ShardReplicator::AskHomeAfterHandBack); its requests are otherwise answered where the
  // shard went. UNAVAILABLE when the own ps installed its copy here meanwhile; DATA_LOSS
  // (DropOutdatedCopy) when the own ps was started again too late to tell.
  absl::StatusOr<std::shared_ptr<ShardJob>> RetakeFromGonePs(
      const std::string& job_id, int shard, const std::shared_ptr<ShardReplicator>& went_back)
      ABSL_LOCKS_EXCLUDED(mu_);
  // For RetakeFromGonePs: the own ps was started again empty more than `within` after the
  // hand-back, so the shard's newest state may be lost with its last start. Drops the copy that
  // went back (it may be out of date; psctl, finding neither ps holding the shard, recovers the
  // job from its latest checkpoint) and returns DATA_LOSS saying so.
  // UNAVAILABLE: the own ps of `shard` replicates it here again (a new install replaced the
  // copy that went back), so it is alive.
  absl::Status ReplicatedHereAgain(const std::string& job_id, int shard) const;
  absl::Status DropOutdatedCopy(const std::string& job_id, int shard,
                                const std::shared_ptr<ShardReplicator>& went_back,
                                absl::Duration within) ABSL_LOCKS_EXCLUDED(mu_);

  // Starts moving this ps's shard of `request.job_id` to ps `request.to_ps` for `peer` (the
  // job's owner or an admin); `done` gets the shard's version once it is served there, or why
  // it stays here, once, on the replicator's thread. An error returned instead: nothing
  // started.
  absl::Status StartMove(const Peer& peer, const MoveShardRequest& request,
                         std::function<void(absl::StatusOr<int64_t>)> done)
      ABSL_LOCKS_EXCLUDED(move_gate_, mu_);
  // A move of `job`'s shard that failed with `outcome`: its replicator is taken out (on
  // io_thread_: it cannot stop on its own thread), the shard is changed here at once again,
  // and then `done` hears the outcome. (One that succeeded keeps its replicator, refusing every
  // call with where the shard went.)
  void MoveEnded(const std::shared_ptr<ShardJob>& job, const absl::Status& outcome,
                 std::function<void(absl::StatusOr<int64_t>)> done) ABSL_LOCKS_EXCLUDED(mu_);
  // The copy of shard `shard` of job `job_id` (without replicas) moved here, for `peer`, who
  // must be allowed `access` to the job; UNAVAILABLE while it is moving here, and with where
  // the shard is (WithShardMovedTo: its own ps) when this ps holds none.
  absl::StatusOr<std::shared_ptr<ShardJob>> MovedInCopy(const std::string& job_id, int shard,
                                                        const Peer& peer, JobAccess access,
                                                        absl::string_view method)
      ABSL_LOCKS_EXCLUDED(mu_);
  // OK when this ps may take the move install `install` (ReplicaInstall.moving_from) as far as
  // its numbers go: the cluster's number of ps, a shard of it, from another ps;
  // FAILED_PRECONDITION saying why not.
  absl::Status CheckMoveHere(const ReplicaInstall& install) const;
  // A move's install (ReplicaInstall.moving_from, checked by CheckMoveHere and the streaming
  // ps's identity): the copy goes to incoming_, bound to `binding`, once ps moving_from (unless
  // it is the shard's own ps) says that it serves the shard, this ps holds its own shard of the
  // job's run and owner, and it holds nothing of the shard but what left it (a copy that moved
  // on, or its own shard moved away: served elsewhere); or, its own shard coming home to this
  // ps that holds nothing of the job (started again empty), ps moving_from vouches for the
  // copy's owner and run (ConfirmSameRunServedBy) and the job fits CreateJob's limits: the ps
  // adopts the job at the hand-over. The ack, or why not.
  absl::StatusOr<ReplicaAck> InstallMovingCopy(const ReplicaInput& input, BackupBinding* binding)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether this ps holds job `job_id`: its own shard, or any copy (backup, moved, moving in),
  // but a copy of shard `but_incoming` moving in (an earlier stream's, which a new install of
  // that shard replaces).
  bool HoldsAnyOf(const std::string& job_id, int but_incoming) ABSL_LOCKS_EXCLUDED(mu_);
  bool HoldsCopiesLocked(const std::string& job_id, int but_incoming) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The limits CreateJob applies (--max_workers, --max_job_mb, --max_jobs), for a job adopted
  // with its shard coming home (RESOURCE_EXHAUSTED naming the flag).
  absl::Status CheckAdoptionLimitsLocked(const ParameterSpec& spec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK when ps `ps`, asked by this ps itself, serves `key` as a moved copy of the same owner and
  // run as `spec`, at `version` or later (FAILED_PRECONDITION otherwise): a ps started again
  // empty adopts only the copy that serves the shard.
  absl::Status ConfirmSameRunServedBy(int ps, const std::pair<std::string, int>& key,
                                      const ParameterSpec& spec, int64_t version)
      ABSL_LOCKS_EXCLUDED(mu_);
  // OK when ps `ps` lists the copy of `key` as one it serves (ListJobs, up to 2 s); else
  // FAILED_PRECONDITION (or its error) saying so.
  absl::Status ConfirmServedBy(int ps, const std::pair<std::string, int>& key)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The hand-back of a moving copy (incoming_): this ps serves the shard from now on, in place
  // of what it held of it. The ack says whether it does.
  ReplicaAck TakeMovedShard(const BackupBinding& binding, int64_t seq) ABSL_LOCKS_EXCLUDED(mu_);
  // A channel to ps task `ps` as replication makes them; `name` gets "ps:1 (host:port)". Null
  // when this ps does not know where `ps` listens.
  std::shared_ptr<grpc::Channel> ChannelToPsLocked(int ps, std::string* name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<grpc::Channel> ChannelToPs(int ps, std::string* name) ABSL_LOCKS_EXCLUDED(mu_);

  // Applies a whole push to `job`: at once, or through its replicator once its backup holds it;
  // `done` gets the answer (on the calling thread when at once).
  void ApplyPush(const std::shared_ptr<ShardJob>& job, ShardJob::ReadyPush push,
                 std::function<void(absl::StatusOr<PushResponse>)> done) ABSL_LOCKS_EXCLUDED(mu_);
  // Applies a small input (a leave, batches handed out) to `job` as ApplyPush does a push: at
  // once (ApplyReplicaInput), or through its replicator. Not for pushes: a push made into a
  // message only when it is replicated is ApplyPush's.
  void ApplyInput(const std::shared_ptr<ShardJob>& job, ReplicaInput input,
                  ShardReplicator::Done done) ABSL_LOCKS_EXCLUDED(mu_);
  // Applies one input of a backup stream (an install binds it); the ack to send back, or the
  // error that ends the stream.
  absl::StatusOr<ReplicaAck> ApplyAsBackup(const Peer& peer, const ReplicaInput& input,
                                           BackupBinding* binding) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes every replicator and backup copy of job `job_id` out (for the caller to stop outside
  // mu_), the promoted copies also into `promoted`.
  void ForgetCopiesLocked(const std::string& job_id,
                          std::vector<std::shared_ptr<ShardReplicator>>* replicators,
                          std::vector<std::shared_ptr<ShardJob>>* promoted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A backup stream ended: its copy's primary no longer streams to it.
  void BackupStreamEnded(const BackupBinding& binding) ABSL_LOCKS_EXCLUDED(mu_);

  // The job a worker's link to this ps (a shared memory segment, a bulk stream) is opened for,
  // once the caller may act as `worker` of it: PERMISSION_DENIED (RequireWorker, FindJobFor),
  // NOT_FOUND, INVALID_ARGUMENT for a worker out of range, FAILED_PRECONDITION for another run.
  absl::StatusOr<std::shared_ptr<ShardJob>> FindJobForWorkerLink(const Peer& peer,
                                                                 const std::string& job_id,
                                                                 int worker,
                                                                 const std::string& run_id,
                                                                 absl::string_view method);
  absl::Status DoOpenSharedMemory(const Peer& peer, const OpenSharedMemoryRequest& request,
                                  OpenSharedMemoryResponse* response);
  absl::Status DoOpenBulkStream(const Peer& peer, const OpenBulkStreamRequest& request,
                                OpenBulkStreamResponse* response);
  // A push decoded: its answer, the whole push to apply, or the error to answer with.
  using SettledPush = absl::StatusOr<std::variant<PushResponse, ShardJob::ReadyPush>>;
  // Takes a push's frame from the bulk stream its header names into its buffer, then settles
  // it (AwaitedFrame::finish) and calls `then` with the outcome, on a push thread.
  void ReceiveBulkPush(const PushRequestHeader& header, AwaitedFrame awaited,
                       std::function<void(SettledPush)> then);
  // A push naming a frame was refused before it took it: the frame is read past when it comes.
  void RefuseBulkFrame(const PushRequestHeader& header);
  // Runs `work` on one of push_threads_, in turn.
  void RunOnPushThread(std::function<void()> work);
  // The stream a call of `worker` of job `job_id` names (BulkStreams::Find), or UNAVAILABLE
  // where this ps opens none (the values then go in the message).
  absl::StatusOr<std::shared_ptr<BulkStream>> BulkStreamOf(uint64_t stream,
                                                           const std::string& job_id,
                                                           int worker) const;
  // The segment a request of `worker` of job `job_id` names (SharedMemoryRegistry::Find), or
  // UNAVAILABLE where this ps serves none (the client retries in the requests).
  absl::StatusOr<SharedMemoryRegistry::Region> SharedMemoryOf(uint64_t segment,
                                                              const std::string& job_id,
                                                              int worker) const;

  // The job, NOT_FOUND naming it, or UNAVAILABLE while shutting down.
  // FindJob, then RequireJobAccess (common/security/peer_identity.h) for `peer` on the job found:
  // every call about a job is checked so before it reads or changes anything of it.
  // `shard`: the shard a request names (PullRequest.shard); one other than this ps's own is
  // the backup copy this ps holds of it, which takes the shard over on its first request once
  // its primary has gone (PromotedCopy).
  // `unreplicated`: the request says its job has no replicas (PullRequest.unreplicated), so an
  // unknown job is NOT_FOUND even when it names its shard.
  absl::StatusOr<std::shared_ptr<ShardJob>> FindJobFor(const Peer& peer, const std::string& job_id,
                                                       JobAccess access, absl::string_view method,
                                                       std::optional<int> shard = std::nullopt,
                                                       bool unreplicated = false)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::shared_ptr<ShardJob>> FindJob(const std::string& job_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // RequireWorkerHost for a call of `worker` of job `job_id`: a worker the ClusterSpec lacks
  // is one only where the job grew by it (ParameterSpec.worker_addresses, on the job's own shard
  // or a copy of one held here), on that worker's host. ps_service_grow.cc.
  absl::Status RequireWorker(const Peer& peer, const std::string& job_id, int worker,
                             absl::string_view method) ABSL_LOCKS_EXCLUDED(mu_);
  // OK when `grown` keeps this ps's cluster (ClusterSpec::CheckGrownInto, by the ps addresses
  // and worker hosts this ps knows); INVALID_ARGUMENT naming the difference otherwise.
  absl::Status CheckGrownCluster(const ClusterSpec& grown) ABSL_LOCKS_EXCLUDED(mu_);
  // FAILED_PRECONDITION unless a request for task `ps_index` of `num_ps` is for this server.
  absl::Status CheckTask(int num_ps, int ps_index) const;
  // A job that starts at its chief's values (ParameterSpec.chief_initializes) is created only
  // with them, and only such a job takes them.
  absl::Status CheckInitialValuesGiven(const CreateJobRequest& request) const;
  absl::StatusOr<CreateJobResponse> DoCreateJob(const CreateJobRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Decodes a push from `peer` (DecodePush); `header` receives its header, `job` the job it
  // named once found (else it stays null). Chunks (total_chunks >= 2) are INVALID_ARGUMENT
  // unless `allow_chunks`.
  // A push's way past the byte budget, which DoDecodePush fills in: the room it reserved for the
  // push buffer it starts (held until decoded), or where there was none the bytes it waits for
  // (then it was not decoded) and its worker's lease, held while it waits (ShardJob::ParkPush).
  struct PushAdmission {
    ByteBudget::Charge reservation;
    int64_t wait_bytes = 0;
    std::shared_ptr<void> parked;
  };
  // With `admission`, a push that would start a push buffer first reserves its room in the byte
  // budget.
  absl::StatusOr<DecodedPush> DoDecodePush(const Peer& peer, const grpc::ByteBuffer& request,
                                           bool allow_chunks, PushRequestHeader* header,
                                           std::shared_ptr<ShardJob>* job,
                                           PushAdmission* admission = nullptr);
  // DoDecodePush within the byte budget (ps_service_budget.cc): a push that would start a push
  // buffer the budget has no room for is parked, without a thread, until there is; `then` gets
  // the job (null where none was found), the header and the outcome, once, on this thread or
  // the budget's, the window already sent (SendWindow). A call parked until its deadline gets
  // UNAVAILABLE, saying why.
  using PushDecoded = std::function<void(std::shared_ptr<ShardJob> job,
                                         const PushRequestHeader& header,
                                         absl::StatusOr<DecodedPush> decoded)>;
  void DecodePushInBudget(grpc::CallbackServerContext* context, const Peer& peer,
                          const grpc::ByteBuffer* request, bool allow_chunks,
                          ByteBudget::Charge reservation, PushDecoded then);
  // Tells the caller of `context`, a client working for job `job_id`, how many bytes it may keep
  // in flight to this ps (ByteBudget::Window; the trailing metadata "ps-window-bytes"). Before
  // the call is finished.
  void SendWindow(grpc::CallbackServerContext* context, const std::string& job_id);
  std::string TaskName() const;
  // Who may make a call (common/security/peer_identity.h): RequireMember, RequireUser.
  using AccessRule = absl::Status (*)(const Peer& peer, absl::string_view method);
  // Admits the call `context` serves before anything of its request is decoded: its caller
  // (PeerOf, into `*peer` when given) must pass `rule` (nullptr: the handler checks later) and
  // have room for one more request in flight (options_.limits.max_requests_per_peer). Then
  // `*slot` holds the call's place until Finish gives it back, and Admit returns nullptr;
  // else the call is finished with why, and its reactor returned for the handler to return.
  grpc::ServerUnaryReactor* Admit(grpc::CallbackServerContext* context, absl::string_view method,
                                  AccessRule rule, RequestsInFlight::Slot* slot,
                                  Peer* peer = nullptr);
  // Gives the call's place back, then finishes it with `status`: a client that has the answer
  // may call again at once.
  static void Finish(grpc::ServerUnaryReactor* reactor, RequestsInFlight::Slot* slot,
                     const absl::Status& status);
  // Finish on the call's default reactor, which it returns for the handler to return.
  static grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                          RequestsInFlight::Slot* slot, const absl::Status& status);
  // Expires the leases of `job`'s workers (ShardJob::ExpireLeases) every quarter lease, on the
  // timer's thread, for as long as the job lives. No-op for a job without leases.
  void WatchLeases(const std::string& id, const std::weak_ptr<ShardJob>& job);
  // Forgets finished job `id` after finished_job_retention (ForgetFinishedJob).
  void ForgetAfterRetention(const std::string& id, const std::weak_ptr<ShardJob>& job);
  // Forgets job `id` if it is still `job` (not a newer job of the same id). Runs on the timer
  // thread, where the job is then destroyed if no call holds it.
  void ForgetFinishedJob(const std::string& id, const std::weak_ptr<ShardJob>& job)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Writes a taken checkpoint's shard file (on io_thread_) and tells the job how it went.
  void WriteCheckpoint(const std::weak_ptr<ShardJob>& job, const std::string& job_dir,
                       const std::string& name,
                       const std::shared_ptr<ShardJob::TakenCheckpoint>& taken);
  // The blocks this shard resumes from, placed again from every shard's file of `manifest`,
  // which was taken on another number of ps (server/checkpoint_reshard.h); a file this ps
  // cannot find is FAILED_PRECONDITION saying how to give it.
  absl::StatusOr<std::vector<CheckpointBlock>> ReshardedBlocks(const std::string& job_dir,
                                                               const CheckpointManifest& manifest);
  // Restores the job of `request` for `peer`, who must own the checkpointed job.
  absl::Status DoRestoreJob(const RestoreJobRequest& request, const Peer& peer)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Reserves room for a new job of `spec` under options_.limits, or RESOURCE_EXHAUSTED naming
  // the limit and its flag. The reservation ends with the returned object (once the job is in
  // jobs_, or it failed).
  class Reservation {
   public:
    Reservation(ParameterService* service, int64_t bytes) : service_(service), bytes_(bytes) {}
    ~Reservation();

   private:
    ParameterService* const service_;
    const int64_t bytes_;
  };
  absl::StatusOr<std::unique_ptr<Reservation>> Reserve(const ParameterSpec& spec)
      ABSL_LOCKS_EXCLUDED(mu_);

  const ParameterServiceOptions options_;
  const std::vector<std::string> worker_hosts_;  // Of options_.worker_addresses, in order.
  const CheckpointStore checkpoints_;
  // When this service was made, on a clock no one sets (ListJobsResponse.uptime_ms).
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  // Taken shared around every change made to a job at once (ChangesThrough found no
  // replicator, then the change), and exclusively while a move's replicator is made: so no
  // change made at once is missing from the move's snapshot. Before mu_.
  absl::Mutex move_gate_ ABSL_ACQUIRED_BEFORE(mu_);
  // Set at the first MoveShard: from then on a job without replicas may have a replicator too.
  std::atomic<bool> any_move_{false};
  absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::shared_ptr<ShardJob>> jobs_ ABSL_GUARDED_BY(mu_);
  // Of the shards this ps serves with a backup elsewhere: their replicators.
  // Replicated shards are keyed by job id and shard: a ps holds its own shard of a job and the
  // backup of another's (or, after a promotion, serves that one too).
  using ShardKey = std::pair<std::string, int>;
  std::map<ShardKey, std::shared_ptr<ShardReplicator>> replicators_ ABSL_GUARDED_BY(mu_);
  // The backup copies this ps holds (of the previous ps's shard, or of its own shard while the
  // next ps serves it), and the stream generation that installed each (a newer install replaces
  // a copy and fences the older stream off); a promoted one serves its shard.
  struct BackupCopy {
    std::shared_ptr<ShardJob> job;
    uint64_t generation = 0;
    bool streaming = false;  // The stream that installed it is open.
    std::chrono::steady_clock::time_point installed_at;  // When that stream installed it.
    bool promoted = false;   // It serves the shard now (its primary went away).
    // A copy of a shard without replicas moved here from ps `moving_from` (MoveShard), served
    // here (promoted) unless it moved on. -1: none.
    int moving_from = -1;
  };
  std::map<ShardKey, BackupCopy> backups_ ABSL_GUARDED_BY(mu_);
  // A copy of a shard without replicas moving here (MoveShard), installed by the stream of
  // `generation` from ps `moving_from`: served once that stream hands it over, dropped if the
  // stream ends first. What this ps held of the shard before (a copy that moved on, its own
  // shard moved away), with its record of where the shard went, stays until the hand-over.
  struct IncomingMove {
    std::shared_ptr<ShardJob> job;
    uint64_t generation = 0;
    int moving_from = -1;
    // This ps's own shard coming home to a ps that holds nothing of the job (started again
    // empty while the shard was away): the copy becomes the job here at the hand-over.
    bool adopting = false;
  };
  std::map<ShardKey, IncomingMove> incoming_ ABSL_GUARDED_BY(mu_);
  // Whether `binding`'s copy is still the one its stream installed (a backup, or a move's).
  bool BindingCurrentLocked(const BackupBinding& binding) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The bytes this ps holds and has reserved for all jobs: its own shards, the backup copies and
  // moves' copies it holds (but the one at `replacing`, when given, and this ps's own shard when
  // `replacing` names it), and the reservations in flight.
  int64_t HeldBytesLocked(const ShardKey* replacing = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t backup_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> ps_addresses_ ABSL_GUARDED_BY(mu_);  // options_.ps_addresses at first.
  int reserved_jobs_ ABSL_GUARDED_BY(mu_) = 0;  // Being created or restored.
  int64_t reserved_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  const int64_t max_total_bytes_;  // options_.limits.max_total_bytes, 0 resolved.

  // Before the members below, whose work finishes calls (and so gives their places back).
  RequestsInFlight requests_in_flight_;
  // Every job's push buffers are charged to it (ShardJob::UseByteBudget). Pushes it parked are
  // decoded and applied on push_threads_ once let in, in turn.
  const std::shared_ptr<ByteBudget> byte_budget_;
  // Null where this ps serves no shared memory (options_.shared_memory_bytes 0, or its socket
  // could not be made).
  const std::unique_ptr<SharedMemoryRegistry> shared_memory_;
  std::vector<std::unique_ptr<IoThread>> push_threads_;
  std::atomic<uint64_t> next_push_thread_{0};
  // Null where this ps opens no bulk streams (options_.bulk_port -1, or its port could not be
  // bound). After push_threads_, so destroyed before them: the pushes its streams fail are
  // answered on them.
  const std::unique_ptr<BulkStreams> bulk_streams_;

  // Declared last, so destroyed first: their work uses the members above.
  DeadlineTimer timer_;
  IoThread io_thread_;
};

}  // namespace ps

#endif  // PS_SERVER_PS_SERVICE_H_
