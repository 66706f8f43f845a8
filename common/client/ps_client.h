// Job management on every ps task of a cluster: create, delete, leave, statistics. One per
// process; workers open a WorkerSession (worker_session.h) on it for their pulls and pushes.
//
// Every call carries a deadline and is retried on UNAVAILABLE (see ps_connections.h); errors
// name the shard.
#ifndef PS_COMMON_CLIENT_PS_CLIENT_H_
#define PS_COMMON_CLIENT_PS_CLIENT_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/job/partitioner.h"
#include "common/client/ps_connections.h"
#include "proto/ps_service.pb.h"

namespace ps {

// Thread-safe.
class PsClient {
 public:
  // INVALID_ARGUMENT for no address or a malformed one. Connections are made lazily.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(const PsClientOptions& options);

  int num_ps() const { return connections_->num_ps(); }
  const PsClientOptions& options() const { return connections_->options(); }
  // The connections the calls go over; they live as long as this client.
  PsConnections* connections() const { return connections_.get(); }

  // Each dense variable's values by name, row-major, its whole size: a chief's model.
  using InitialValues = absl::flat_hash_map<std::string, absl::Span<const float>>;

  // Creates the job on every shard (idempotent for the same spec) and returns its placement; a
  // shard that moved to another ps (MoveShard) is not made again at its own ps (which may be
  // gone), and this client's calls go to the ps that serves it. A ps that cannot be asked
  // fails it before anything is made, unless its shard is served elsewhere so.
  // With `replay` (one log per shard, in ps order: psctl replay), each shard replays its log
  // (CreateJobRequest.replay).
  // A job that starts at its chief's values (ParameterSpec.chief_initializes) is created by the
  // chief with `initial_values` (every variable; each shard gets its slices); another worker
  // passes none and waits, up to options().wait_timeout, until the chief has created it on
  // every shard (DEADLINE_EXCEEDED, naming the chief, if it does not).
  absl::StatusOr<Placement> CreateJob(const ParameterSpec& spec,
                                      const std::vector<ApplyLog>* replay = nullptr,
                                      const InitialValues* initial_values = nullptr);
  // Deletes the job on every shard; NOT_FOUND only if no shard had it.
  absl::Status DeleteJob(const std::string& job_id);
  // Tells every shard that `worker` is done with run `run_id` of the job (see LeaveJobRequest).
  // `replicated`: the job keeps a backup of each shard (ParameterSpec.replicas 2), and a shard
  // whose ps is gone is reached at its other copy (PsConnections::Failover).
  // `incarnation`: the leaving worker's (LeaveJobRequest.incarnation), when it knows it.
  absl::Status LeaveJob(const std::string& job_id, const std::string& run_id, int worker,
                        bool replicated = false, std::optional<int> incarnation = std::nullopt);
  // Grows the job on every shard to the workers of `request.cluster` (GrowJobRequest; psctl
  // add-worker). `replicated`: as LeaveJob's.
  absl::Status GrowJob(GrowJobRequest request, bool replicated = false);
  // The next batches for a worker of a job whose data is handed out, from its first shard
  // (`request` as NextBatchesRequest says; its request_id makes a retry safe). `replicated`: as
  // LeaveJob's (the first shard may be served by its other copy).
  absl::StatusOr<NextBatchesResponse> NextBatches(NextBatchesRequest request,
                                                  bool replicated = false);
  // Each shard's statistics, in ps order.
  absl::StatusOr<std::vector<JobStats>> GetJobStats(const std::string& job_id,
                                                    bool replicated = false);
  // Each shard's apply log of the job (ParameterSpec.record_apply_log), in ps order.
  absl::StatusOr<std::vector<ApplyLog>> GetApplyLogs(const std::string& job_id);
  // Every shard's trace of the job so far (JobSpec.trace), in shard order; `replicated`: as
  // GetJobStats's (a shard's copy on another ps where its own ps is gone).
  absl::StatusOr<std::vector<Trace>> GetTraces(const std::string& job_id, bool replicated = false);

 private:
  // Waits until job `job_id` exists on every shard (its chief created it).
  absl::Status AwaitChiefsJob(const std::string& job_id);
  // The shards of job `job_id` (without replicas) that a ps other than their own serves, moved
  // there (MovedShardsIn, of every ps that answers ListJobs), each with that ps; the error of a
  // ps that cannot be asked, unless its own shard is among them.
  absl::StatusOr<std::map<int, int>> MovedShards(const std::string& job_id);
  // This client's calls of job `job_id`'s shards in `moved` (shard -> the ps that serves it)
  // go to those ps from now on.
  void RouteMovedShards(const std::string& job_id, const std::map<int, int>& moved);

  explicit PsClient(std::unique_ptr<PsConnections> connections)
      : connections_(std::move(connections)) {}

  const std::unique_ptr<PsConnections> connections_;
};

// The shards of job `job_id` (without replicas) that a ps other than their own serves, moved
// there (MoveShard: a serving moved copy in that ps's ListJobs), each with that ps; `listed[ps]` is
// ps's ListJobs answer, null where it could not be asked (a shard moved there is not found).
std::map<int, int> MovedShardsIn(const std::string& job_id,
                                 const std::vector<const ListJobsResponse*>& listed);

}  // namespace ps

#endif  // PS_COMMON_CLIENT_PS_CLIENT_H_
