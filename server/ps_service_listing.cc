// What a ps tells of the jobs it holds: each shard's statistics, apply log and trace, and the
// list of its jobs, copies and moved shards (ps_service.h). Read-only: nothing here changes a
// job. Another user's jobs are neither answered nor listed.
#include <chrono>
#include <memory>
#include <optional>

#include "server/ps_service.h"

namespace ps {

grpc::ServerUnaryReactor* ParameterService::GetJobStats(grpc::CallbackServerContext* context,
                                                        const JobStatsRequest* request,
                                                        JobStats* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "GetJobStats", RequireMember, &slot, &peer)) {
    return refused;
  }
  absl::StatusOr<std::shared_ptr<ShardJob>> job =
      FindJobFor(peer, request->job_id(), JobAccess::kRead, "GetJobStats",
                 request->has_shard() ? std::optional<int>(request->shard()) : std::nullopt,
                 request->unreplicated());
  if (job.ok()) {
    *response = (*job)->Stats();
    // A shard without replicas served by another ps than its own was moved here.
    response->set_moved_in((*job)->spec().replicas() < 2 &&
                           (*job)->ps_index() != options_.ps_index);
    if (std::shared_ptr<ShardReplicator> replicator = ReplicatorFor(*job)) {
      *response->mutable_replication() = replicator->Stats();
      absl::MutexLock lock(&mu_);
      auto own = jobs_.find(request->job_id());
      // Only a replicated shard's backup takes a shard over; an unreplicated copy served here
      // was moved here (moved_in), replicator or not (it may be moving on).
      response->mutable_replication()->set_took_over(
          (*job)->spec().replicas() >= 2 && (own == jobs_.end() || own->second != *job));
    }
  }
  return Answer(context, &slot, job.status());
}

grpc::ServerUnaryReactor* ParameterService::GetApplyLog(grpc::CallbackServerContext* context,
                                                        const ApplyLogRequest* request,
                                                        ApplyLog* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused =
          Admit(context, "GetApplyLog", RequireMember, &slot, &peer)) {
    return refused;
  }
  absl::StatusOr<std::shared_ptr<ShardJob>> job =
      FindJobFor(peer, request->job_id(), JobAccess::kRead, "GetApplyLog");
  if (job.ok()) *response = (*job)->GetApplyLog();
  return Answer(context, &slot, job.status());
}

grpc::ServerUnaryReactor* ParameterService::GetTrace(grpc::CallbackServerContext* context,
                                                     const TraceRequest* request,
                                                     Trace* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused = Admit(context, "GetTrace", RequireMember, &slot, &peer)) {
    return refused;
  }
  absl::StatusOr<std::shared_ptr<ShardJob>> job =
      FindJobFor(peer, request->job_id(), JobAccess::kRead, "GetTrace",
                 request->has_shard() ? std::optional<int>(request->shard()) : std::nullopt,
                 request->unreplicated());
  if (job.ok()) *response = (*job)->GetTrace(*request);
  return Answer(context, &slot, job.status());
}

grpc::ServerUnaryReactor* ParameterService::ListJobs(grpc::CallbackServerContext* context,
                                                     const ListJobsRequest* /*request*/,
                                                     ListJobsResponse* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused = Admit(context, "ListJobs", RequireMember, &slot, &peer)) {
    return refused;
  }
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, job] : jobs_) {
      // Another user's jobs are not listed.
      if (RequireJobAccess(peer, job->spec().owner(), id, JobAccess::kRead, "ListJobs").ok()) {
        response->add_job_ids(id);
      }
    }
    // A copy of shard `key` held here, listed if `peer` may read its job; null if not.
    auto add_copy = [&](const ShardKey& key, const std::shared_ptr<ShardJob>& job)
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> ListJobsResponse::ShardCopy* {
      if (job == nullptr ||
          !RequireJobAccess(peer, job->spec().owner(), key.first, JobAccess::kRead, "ListJobs")
               .ok()) {
        return nullptr;
      }
      ListJobsResponse::ShardCopy* listed = response->add_copies();
      listed->set_job_id(key.first);
      listed->set_shard(key.second);
      return listed;
    };
    for (const auto& [key, copy] : backups_) {
      ListJobsResponse::ShardCopy* listed = add_copy(key, copy.job);
      if (listed == nullptr) continue;
      listed->set_moved(copy.moving_from >= 0);
      auto serving = replicators_.find(key);
      // A copy moved here serves without a replicator (it has no replicas) until it moves on.
      listed->set_serving(copy.promoted && (serving != replicators_.end()
                                                ? !serving->second->Superseded()
                                                : copy.moving_from >= 0));
    }
    for (const auto& [key, move] : incoming_) {
      if (ListJobsResponse::ShardCopy* listed = add_copy(key, move.job)) {
        listed->set_incoming(true);
        listed->set_moved(true);
      }
    }
    for (const auto& [key, replicator] : replicators_) {
      const std::optional<int> to = replicator->MovedTo();
      if (!to.has_value() ||
          !RequireJobAccess(peer, replicator->job()->spec().owner(), key.first,
                            JobAccess::kRead, "ListJobs")
               .ok()) {
        continue;
      }
      ListJobsResponse::MovedShard* moved = response->add_moved();
      moved->set_job_id(key.first);
      moved->set_shard(key.second);
      moved->set_to_ps(*to);
      moved->set_version(replicator->MovedAtVersion());
    }
  }
  response->set_uptime_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - started_)
                              .count());
  return Answer(context, &slot, absl::OkStatus());
}

}  // namespace ps
