// psctl's commands that change who trains a running job: remove-worker and add-worker
// (ctl/psctl_commands.h; docs/elastic.md, "Removing and adding workers").
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cluster/cluster_spec.h"
#include "ctl/cluster/cluster_client.h"
#include "ctl/job/exit_code.h"
#include "ctl/psctl_commands.h"
#include "ctl/psctl_flags.h"
#include "proto/ps_service.pb.h"
#include "proto/worker_service.pb.h"

namespace ps {
namespace {

// How long the commands watch for the change they asked for before saying it is not seen yet.
constexpr absl::Duration kWatchFor = absl::Seconds(15);

// The worker task of --task, checked against `cluster`.
absl::StatusOr<int> WorkerOfTaskFlag(const ClusterSpec& cluster) {
  if (FLAGS_task.empty()) {
    return absl::InvalidArgumentError("--task=worker:N is required (the worker to move)");
  }
  absl::StatusOr<TaskId> task = ParseTaskFlag(FLAGS_task);
  if (!task.ok()) return task.status();
  if (task->type() != kWorkerJob) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--task=", FLAGS_task, " is not a worker; ps tasks hold the model's shards and stay "
        "with the job (give --task=worker:N)"));
  }
  if (absl::Status in = cluster.CheckTask(*task); !in.ok()) return in;
  return task->index();
}

// Polls `worker`'s record of `job_id` until `reached` holds (true) or kWatchFor passed.
bool Await(const ClusterClient& client, int worker, const std::string& job_id,
           const std::function<bool(const JobProgress&)>& reached, JobProgress* seen) {
  const absl::Time deadline = absl::Now() + kWatchFor;
  while (!interrupted.load()) {
    std::optional<JobProgress> record = client.JobOnWorker(worker, job_id);
    if (record.has_value() && reached(*record)) {
      *seen = *record;
      return true;
    }
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return false;
}

// The parts both commands start with.
struct Target {
  ClusterSpec cluster;
  std::unique_ptr<ClusterClient> client;
  int worker = 0;
};

absl::StatusOr<Target> TargetFromFlags() {
  absl::StatusOr<ClusterSpec> cluster = Cluster();
  if (!cluster.ok()) return cluster.status();
  if (FLAGS_job.empty()) return absl::InvalidArgumentError("--job=ID is required");
  absl::StatusOr<int> worker = WorkerOfTaskFlag(*cluster);
  if (!worker.ok()) return worker.status();
  absl::StatusOr<std::unique_ptr<ClusterClient>> client = ClusterClient::Create(*cluster);
  if (!client.ok()) return client.status();
  return Target{*std::move(cluster), *std::move(client), *worker};
}

// add-worker of a worker the job does not have: the job grows to the workers of --cluster_spec,
// a grown ClusterSpec (docs/elastic.md "A ClusterSpec that grows"), on every shard; the psctl
// following it then starts the new workers as their daemons come up. `job` is the job's spec on
// its first shard.
int GrowJob(const Target& target, const ParameterSpec& job) {
  const ClusterClient& client = *target.client;
  const std::string task = absl::StrCat("worker:", target.worker);
  GrowJobRequest request;
  request.set_job_id(FLAGS_job);
  request.set_run_id(job.run_id());
  *request.mutable_cluster() = target.cluster.ToProto();
  absl::Status grown = client.ps()->GrowJob(request, job.replicas() > 1);
  if (!grown.ok()) {
    // The shards that took the growth keep it; each takes the same cluster again as a no-op.
    return Fail(absl::Status(
        grown.code(), absl::StrCat(grown.message(), "; the other shards may have grown: once "
                                   "the cause is mended, run this add-worker again (a shard "
                                   "that grew takes it again as it is). The psctl following "
                                   "the job takes the new workers only once every shard has "
                                   "them")));
  }
  std::cout << "job " << FLAGS_job << " grew from " << job.num_workers() << " to "
            << target.cluster.NumTasks(kWorkerJob) << " workers\n";
  JobProgress started;
  if (!Await(client, target.worker, FLAGS_job,
             [](const JobProgress& p) { return p.state() == JobProgress::RUNNING; }, &started)) {
    return Fail(absl::UnavailableError(absl::StrCat(
        task, " is in job ", FLAGS_job, " but has not started there within ",
        absl::FormatDuration(kWatchFor), ": it joins once its daemon is up and the psctl "
        "following the job starts it. Is ps_worker --task=", task, " running, and the psctl "
        "that submitted the job (a job submitted with --detach is not followed)?")));
  }
  std::cout << task << " joined job " << FLAGS_job << "\n";
  return 0;
}

}  // namespace

int RemoveWorker() {
  absl::StatusOr<Target> target = TargetFromFlags();
  if (!target.ok()) return Fail(target.status());
  const ClusterClient& client = *target->client;
  // The daemon refuses a leave that would leave the job too few workers to go on with.
  int others_running = 0;
  for (int w = 0; w < client.num_workers(); ++w) {
    if (w == target->worker) continue;
    std::optional<JobProgress> record = client.JobOnWorker(w, FLAGS_job);
    if (record.has_value() && record->state() == JobProgress::RUNNING) ++others_running;
  }
  absl::Status asked = client.AskWorkerToLeave(target->worker, FLAGS_job, others_running);
  if (!asked.ok()) return Fail(asked);
  const std::string task = absl::StrCat("worker:", target->worker);
  JobProgress left;
  if (!Await(client, target->worker, FLAGS_job,
             [](const JobProgress& p) { return p.state() != JobProgress::RUNNING; }, &left)) {
    std::cout << task << " was asked to leave job " << FLAGS_job
              << "; it leaves at the end of its current step (not seen within "
              << absl::FormatDuration(kWatchFor) << ": see psctl status)\n";
    return 0;
  }
  if (left.state() == JobProgress::DONE) {  // Its end came first: nothing to leave.
    std::cout << task << " had finished job " << FLAGS_job << " (DONE at step " << left.step()
              << ") before it could leave\n";
    return 0;
  }
  if (left.state() != JobProgress::LEFT) {
    return Fail(absl::AbortedError(absl::StrCat(
        task, " ended job ", FLAGS_job, " as ", JobProgress::State_Name(left.state()),
        " rather than leaving it", left.error().empty() ? "" : absl::StrCat(": ", left.error()))));
  }
  std::cout << task << " left job " << FLAGS_job << " at step " << left.step() << "; "
            << others_running << " worker" << (others_running == 1 ? "" : "s")
            << " go on with it. Take it back with: psctl add-worker --job=" << FLAGS_job
            << " --task=" << task << "\n";
  return 0;
}

int AddWorker() {
  absl::StatusOr<Target> target = TargetFromFlags();
  if (!target.ok()) return Fail(target.status());
  const ClusterClient& client = *target->client;
  const std::string task = absl::StrCat("worker:", target->worker);
  // The chief ends the job: once it has, a worker would rejoin a job that is over.
  std::optional<JobProgress> chief = client.JobOnWorker(0, FLAGS_job);
  if (!chief.has_value() || chief->state() != JobProgress::RUNNING) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "job ", FLAGS_job, " is not running on its chief, worker:0 (",
        chief.has_value() ? JobProgress::State_Name(chief->state())
                          : std::string("no record, or its daemon does not answer"),
        "): a worker can be added back only while the job runs")));
  }
  // A worker the job never had: the job grows (--cluster_spec lists it).
  absl::StatusOr<JobStats> shard = client.GetShardStats(0, FLAGS_job, /*replicated=*/true);
  if (!shard.ok()) return Fail(shard.status());
  if (target->worker >= shard->spec().num_workers()) return GrowJob(*target, shard->spec());
  absl::Status asked = client.AskWorkerBack(target->worker, FLAGS_job);
  if (!asked.ok()) return Fail(asked);
  JobProgress back;
  if (!Await(client, target->worker, FLAGS_job,
             [](const JobProgress& p) { return p.state() != JobProgress::LEFT; }, &back)) {
    return Fail(absl::UnavailableError(absl::StrCat(
        task, " was asked back into job ", FLAGS_job, ", but the psctl following the job has "
        "not started it there within ", absl::FormatDuration(kWatchFor),
        "; is the psctl that submitted the job still running (a job submitted with --detach "
        "is not followed)? It takes the worker back within a second once it is")));
  }
  if (back.state() == JobProgress::FAILED) {
    return Fail(absl::AbortedError(absl::StrCat(task, " was started in job ", FLAGS_job,
                                                " again and failed: ", back.error())));
  }
  std::cout << task << " rejoined job " << FLAGS_job << " ("
            << JobProgress::State_Name(back.state()) << ")\n";
  return 0;
}

}  // namespace ps
