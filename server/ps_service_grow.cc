// ParameterService's part of a job that grows past its ClusterSpec (GrowJob; docs/elastic.md
// "A ClusterSpec that grows"): the call itself, and who may act as a worker the ClusterSpec
// lacks.
#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cluster/cluster_spec.h"
#include "common/cluster/host_port.h"
#include "server/ps_service.h"

namespace ps {

absl::Status ParameterService::RequireWorker(const Peer& peer, const std::string& job_id,
                                             int worker, absl::string_view method) {
  if (worker_hosts_.empty() || worker < static_cast<int>(worker_hosts_.size())) {
    return RequireWorkerHost(peer, worker, worker_hosts_, method);
  }
  // A worker the ClusterSpec lacks: only one the job grew by, on its host.
  std::string host;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<ShardJob> job;
    if (auto it = jobs_.find(job_id); it != jobs_.end()) {
      job = it->second;
    } else if (auto copy = backups_.lower_bound({job_id, -1});
               copy != backups_.end() && copy->first.first == job_id) {
      job = copy->second.job;
    }
    if (job != nullptr && worker < job->spec().worker_addresses_size()) {
      host = HostsOf({job->spec().worker_addresses(worker)})[0];
    }
  }
  return RequireWorkerOnHost(peer, worker, host.empty() ? nullptr : &host, method);
}

absl::Status ParameterService::CheckGrownCluster(const ClusterSpec& grown) {
  std::vector<std::string> ps;
  {
    absl::MutexLock lock(&mu_);
    ps = ps_addresses_;
  }
  const std::vector<std::string>& grown_ps = grown.Tasks(kPsJob);
  if (static_cast<int>(grown_ps.size()) != options_.num_ps || (!ps.empty() && grown_ps != ps)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the grown cluster lists the ps tasks [", absl::StrJoin(grown_ps, ", "), "]; ",
        TaskName(), " runs in a cluster of ", options_.num_ps, " ps",
        ps.empty() ? "" : absl::StrCat(" [", absl::StrJoin(ps, ", "), "]"),
        ": a cluster grows by workers only, its ps tasks stay"));
  }
  const std::vector<std::string>& workers = grown.Tasks(kWorkerJob);
  const std::vector<std::string>& own = options_.worker_addresses;
  for (size_t w = 0; w < own.size(); ++w) {
    if (w >= workers.size() || workers[w] != own[w]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the grown cluster ",
          w >= workers.size() ? absl::StrCat("lacks worker:", w)
                              : absl::StrCat("runs worker:", w, " at ", workers[w]),
          ", which ", TaskName(), "'s ClusterSpec runs at ", own[w],
          ": a cluster grows by adding workers after its own"));
    }
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ParameterService::GrowJob(grpc::CallbackServerContext* context,
                                                    const GrowJobRequest* request,
                                                    GrowJobResponse* response) {
  Peer peer;
  RequestsInFlight::Slot slot;
  if (grpc::ServerUnaryReactor* refused = Admit(context, "GrowJob", RequireUser, &slot, &peer)) {
    return refused;
  }
  // Only the job's owner (or an admin) learns anything of the cluster from the answer.
  absl::StatusOr<std::shared_ptr<ShardJob>> job =
      FindJobFor(peer, request->job_id(), JobAccess::kManage, "GrowJob",
                 request->has_shard() ? std::optional<int>(request->shard()) : std::nullopt,
                 request->unreplicated());
  if (!job.ok()) return Answer(context, &slot, job.status());
  absl::StatusOr<ClusterSpec> grown = ClusterSpec::FromProto(request->cluster());
  if (!grown.ok()) {
    return Answer(context, &slot,
                  absl::InvalidArgumentError(
                      absl::StrCat("GrowJob: cluster: ", grown.status().message())));
  }
  absl::Status status = CheckGrownCluster(*grown);
  if (status.ok() && grown->NumTasks(kWorkerJob) > options_.limits.max_workers) {
    status = absl::ResourceExhaustedError(absl::StrCat(
        "job \"", request->job_id(), "\" would have ", grown->NumTasks(kWorkerJob), " workers; ",
        TaskName(), " holds jobs of at most ", options_.limits.max_workers,
        " (ps_server --max_workers)"));
  }
  if (!status.ok()) return Answer(context, &slot, status);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ReplicaInput grow;
  *grow.mutable_grow() = *request;
  ApplyInput(*job, std::move(grow),
             [reactor, response, job = *job,
              slot = std::make_shared<RequestsInFlight::Slot>(std::move(slot))](
                 absl::StatusOr<ReplicaOutcome> grew) {
               if (grew.ok()) {
                 response->set_num_workers(job->spec().num_workers());
                 LOG(INFO) << "job " << job->spec().job_id() << " grew to "
                           << job->spec().num_workers() << " workers";
               }
               Finish(reactor, slot.get(), grew.status());
             });
  return reactor;
}

}  // namespace ps
