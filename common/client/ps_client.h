// Job management on every ps task of a cluster: create, delete, leave, statistics. One per
// process; workers open a WorkerSession (worker_session.h) on it for their pulls and pushes.
//
// Every call carries a deadline and is retried on UNAVAILABLE (see ps_connections.h); errors
// name the shard.
#ifndef PS_COMMON_CLIENT_PS_CLIENT_H_
#define PS_COMMON_CLIENT_PS_CLIENT_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

  // Creates the job on every shard (idempotent for the same spec) and returns its placement.
  // With `replay` (one log per shard, in ps order: psctl replay), each shard replays its log
  // (CreateJobRequest.replay).
  absl::StatusOr<Placement> CreateJob(const ParameterSpec& spec,
                                      const std::vector<ApplyLog>* replay = nullptr);
  // Deletes the job on every shard; NOT_FOUND only if no shard had it.
  absl::Status DeleteJob(const std::string& job_id);
  // Tells every shard that `worker` is done with run `run_id` of the job (see LeaveJobRequest).
  absl::Status LeaveJob(const std::string& job_id, const std::string& run_id, int worker);
  // Each shard's statistics, in ps order.
  absl::StatusOr<std::vector<JobStats>> GetJobStats(const std::string& job_id);
  // Each shard's apply log of the job (ParameterSpec.record_apply_log), in ps order.
  absl::StatusOr<std::vector<ApplyLog>> GetApplyLogs(const std::string& job_id);

 private:
  explicit PsClient(std::unique_ptr<PsConnections> connections)
      : connections_(std::move(connections)) {}

  const std::unique_ptr<PsConnections> connections_;
};

}  // namespace ps

#endif  // PS_COMMON_CLIENT_PS_CLIENT_H_
