// The Worker gRPC service of one ps_worker task: runs jobs on threads of their own (one per
// job, side by side), stops them, and streams their progress to watchers (callback API; a
// slow watcher skips to the newest update and always receives the final one).
#ifndef PS_WORKER_WORKER_SERVICE_H_
#define PS_WORKER_WORKER_SERVICE_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/cluster/cluster_spec.h"
#include "common/metrics/metrics.h"
#include "common/client/ps_client.h"
#include "common/trace/trace_recorder.h"
#include "proto/worker_service.grpc.pb.h"
#include "worker/allreduce/ring_link.h"
#include "worker/allreduce/ring_mailbox.h"
#include "worker/compute/device.h"
#include "common/security/peer_identity.h"
#include "worker/data/data_roots.h"

namespace ps {

class ProgressLog;

struct WorkerServiceOptions {
  ClusterSpec cluster;
  int worker_index = 0;
  Device device;
  PsClientOptions ps_client;  // ps_addresses are filled from the cluster.
  // How long a job that ended stays (its last progress for `psctl status` and late watchers)
  // before the worker forgets it; checked whenever a job starts or the status is asked.
  absl::Duration finished_job_retention = absl::Hours(1);
  // Where jobs' data files may be read from (--data_root); none: synthetic data only.
  DataRoots data_roots;
  // The ring all-reduce messages the previous worker sends this one (its Ring service fills
  // it), for ALLREDUCE and LOCAL_SGD jobs; not owned, outlives the service. Null: this worker
  // runs no such job (it fails saying so).
  RingMailbox* ring_mailbox = nullptr;
  // Whether program jobs (JobSpec.program: the user's program run as this worker) may run
  // here (--allow_programs): a job's submitter then runs code of their choice on this host, as
  // this daemon's user. Off: such a job is refused with FAILED_PRECONDITION.
  bool allow_programs = false;
  // Whose time jobs' training loops and retention are on (a test may pass a SimulatedClock).
  // Not owned.
  Clock* clock = Clock::Real();
};

// Thread-safe.
class WorkerService final : public Worker::CallbackService {
 public:
  explicit WorkerService(WorkerServiceOptions options);
  // Stops every job and waits for its thread.
  ~WorkerService() override;

  // Asks every running job to stop and waits for them (SIGTERM).
  void StopAll() ABSL_LOCKS_EXCLUDED(mu_);

  // Writes every job's latest progress (GetStatus's) as Prometheus families labelled job_id
  // and worker (docs/REFERENCE.md, "Metrics"): a MetricsRegistry collector, called at scrape time.
  void WriteMetrics(MetricsWriter* writer) ABSL_LOCKS_EXCLUDED(mu_);

  grpc::ServerUnaryReactor* StartJob(grpc::CallbackServerContext* context,
                                     const StartJobRequest* request,
                                     StartJobResponse* response) override;
  grpc::ServerUnaryReactor* StopJob(grpc::CallbackServerContext* context,
                                    const StopJobRequest* request,
                                    StopJobResponse* response) override;
  grpc::ServerUnaryReactor* RejoinJob(grpc::CallbackServerContext* context,
                                      const RejoinJobRequest* request,
                                      RejoinJobResponse* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const WorkerStatusRequest* request,
                                      WorkerStatus* response) override;
  grpc::ServerWriteReactor<JobProgress>* WatchJob(grpc::CallbackServerContext* context,
                                                  const WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* GetTrace(grpc::CallbackServerContext* context,
                                     const TraceRequest* request, Trace* response) override;

 private:
  struct RunningJob {
    std::atomic<bool> stop{false};
    std::atomic<bool> finished{false};
    absl::Time finished_at;  // Written before `finished` is set.
    std::shared_ptr<ProgressLog> progress;
    // JobSpec.trace of a built-in model's job: its training loop's timeline; else null.
    std::shared_ptr<TraceRecorder> trace;
    std::thread thread;
    JobSpec spec;  // Its owner (JobSpec.owner) may stop it.
    // The workers of the job's cluster (StartJobRequest.cluster): this daemon's ClusterSpec's,
    // or more where the job grew past it (docs/elastic.md).
    int num_workers = 0;
    // Who asked it to stop (Peer::Describe), for its last report; under mu_.
    std::string stopped_by;
    // The stop is this worker leaving the running job (StopJobRequest.leave); under mu_.
    bool leave = false;
    // Its ring link while the job runs (ALLREDUCE, LOCAL_SGD), for StopLocked; under mu_.
    RingLink* ring = nullptr;
  };

  // The latest progress of every job not yet forgotten (ForgetFinishedJobsLocked first) that
  // `reader` may read (RequireJobAccess, kRead); of every job when null (this process's own
  // /metrics).
  std::vector<JobProgress> LatestProgress(const Peer* reader = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status DoStartJob(const StartJobRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // ALLREDUCE and LOCAL_SGD: this worker's link in the job's ring; null for the other modes.
  absl::StatusOr<std::unique_ptr<RingLink>> MakeRing(const JobSpec& spec) const;
  // Asks `job` to stop for `who` (said in its last report): its loop at its next step, and its
  // ring's calls at once.
  static void StopLocked(RunningJob* job, const std::string& who);
  // StopJob with leave: OK if `job` may go on without this worker, `others_running` of its
  // workers staying; else FAILED_PRECONDITION saying why and what to do.
  absl::Status CheckLeave(const RunningJob& job, int others_running) const;
  // Forgets the jobs that ended longer than finished_job_retention ago (joining their threads,
  // which have returned or are about to).
  void ForgetFinishedJobsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `spec` from step `first_step` as the worker's `incarnation` (StartJobRequest) on the
  // job's thread.
  void RunJob(JobSpec spec, int64_t first_step, int incarnation, absl::Duration elapsed,
              RunningJob* job);
  // RunJob for a program job (JobSpec.program; worker/program_runner.h).
  void RunProgramJob(const JobSpec& spec, int64_t first_step, int incarnation, RunningJob* job);
  // Ends the job with `status` (DONE, STOPPED, LEFT or FAILED) in `last`, its final report.
  void Finish(const JobSpec& spec, const absl::Status& status, RunningJob* job, JobProgress* last)
      ABSL_LOCKS_EXCLUDED(mu_);

  // GetTrace calls answered at once; more are refused (RESOURCE_EXHAUSTED).
  static constexpr int kMaxTraceCalls = 4;

  const WorkerServiceOptions options_;
  std::unique_ptr<PsClient> ps_client_;
  std::atomic<int> trace_calls_{0};

  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<RunningJob>> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_WORKER_WORKER_SERVICE_H_
