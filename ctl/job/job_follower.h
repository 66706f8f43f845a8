// What psctl follows while a job runs: every worker's progress stream (Follower), and the
// progress line it prints from them.
#ifndef PS_CTL_JOB_JOB_FOLLOWER_H_
#define PS_CTL_JOB_JOB_FOLLOWER_H_

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/client_context.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ctl/cluster/cluster_client.h"
#include "ctl/job/results_writer.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"

namespace ps {

// Follows every worker's progress stream until each reports a final state, recording each
// update in `results` (when not null). Thread-safe.
class Follower {
 public:
  // `client` and `results` must outlive the follower.
  Follower(const ClusterClient& client, const std::string& job_id, ResultsWriter* results);
  // Cancels the streams still open and waits for their threads.
  ~Follower();

  // Whether every worker's state is final, waiting up to `timeout` for it.
  bool WaitAllFinal(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Each worker's latest progress, worker i at index i.
  std::vector<JobProgress> Last() ABSL_LOCKS_EXCLUDED(mu_);
  // The workers whose stream broke before a final state (their daemon or host is gone), as
  // opposed to those that reported their own failure.
  std::set<int> Gone() ABSL_LOCKS_EXCLUDED(mu_);
  // Follows `worker` again, started anew: RUNNING until its new stream says otherwise.
  // REQUIRES: its earlier stream has ended (its state is final).
  void Refollow(int worker, const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);
  // The job grew (ClusterClient::GrowTo): each worker the client has and this does not is
  // listed too, not started yet: gone, FAILED, until Refollow once it is started.
  void AddWorkers() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Follow(int worker, const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `worker` answers and runs `job_id` still.
  bool StillRuns(int worker, const std::string& job_id) const;

  const ClusterClient& client_;
  ResultsWriter* const results_;
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  std::vector<JobProgress> last_ ABSL_GUARDED_BY(mu_);
  std::set<int> gone_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts_ ABSL_GUARDED_BY(mu_);
  int finished_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // The destructor runs: no stream is reopened.
};

// "step 120/1000 | loss 0.4210 | 5120 ex/s | staleness 0.50 | 3.1s, ETA 23s | validation ...
// | eval ...": the job's figures (job_figures.h) after `wall_time` of it, the time left (steps
// left at the pace since `first_step`, the run's first, or "(time_limit_s)" where the time
// limit ends it first: EtaOf), and the
// chief's evaluations (of the validation split where the job has one, of the test split where
// the chief made one).
std::string ProgressLine(const JobSpec& spec, const std::vector<JobProgress>& last,
                         absl::Duration wall_time, int64_t first_step = 0);

}  // namespace ps

#endif  // PS_CTL_JOB_JOB_FOLLOWER_H_
