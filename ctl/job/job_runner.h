// Submitting a job to a running cluster and following it to the end (psctl submit, local).
#ifndef PS_CTL_JOB_JOB_RUNNER_H_
#define PS_CTL_JOB_JOB_RUNNER_H_

#include <atomic>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "common/clock.h"
#include "common/cluster/cluster_spec.h"
#include "ctl/export/apply_log_files.h"
#include "proto/job.pb.h"

namespace ps {

struct SubmitOptions {
  std::string results_dir;       // Required unless detach.
  bool overwrite = false;        // Replace a non-empty results directory.
  // A job id the cluster already holds (an earlier run, finished, failed or running) is
  // refused; with `replace` that run is stopped on every worker and deleted on every ps first.
  bool replace = false;
  // Continue the job from its latest complete checkpoint as a new run (its earlier run, if a
  // task still holds it, is stopped and deleted first); see ctl/job/checkpoint_restore.h.
  bool resume = false;
  bool detach = false;           // Start the job and return at once.
  // How long to wait for a cluster that is not ready (a task down or unreachable: daemons
  // still starting), probing it every second, before refusing the job (UNAVAILABLE).
  absl::Duration wait_for_cluster = absl::ZeroDuration();
  // Set (from a signal handler thread) to stop the job everywhere and return CANCELLED.
  const std::atomic<bool>* interrupted = nullptr;
  std::ostream* out = nullptr;   // Progress: a live line when `live_line`, else log lines.
  bool live_line = false;
  // psctl replay: the recorded run's apply logs (not owned). The job is created on every shard
  // with its shard's log before the workers start (CreateJobRequest.replay), so that each
  // shard serves and applies in the recorded order.
  const ApplyLogFiles* replay = nullptr;
  // The time of the run: its waits and deadlines (recovery, starting workers, checkpoints)
  // and the times it records. Not owned; never null.
  Clock* clock = Clock::Real();
};

// Checks the cluster (one line per problem), starts `spec` on every worker as a new run (a fresh
// run_id unless the spec has one), follows it to the end writing the results directory, and
// returns OK when every worker finished; else the first failure, naming the worker. Bad input
// (job, results directory) changes nothing. A job id some ps already holds is refused with
// FAILED_PRECONDITION unless options.replace or options.resume (see SubmitOptions). A job that
// asks for checkpoints has them taken while it is followed (ctl/job/checkpoint_coordinator.h), so
// it cannot be detached.
absl::Status SubmitJob(const ClusterSpec& cluster, const JobSpec& spec,
                       const SubmitOptions& options);

// Asks every worker to stop `job_id` and deletes it on every ps. NOT_FOUND if no task knows it.
absl::Status StopJobEverywhere(const ClusterSpec& cluster, const std::string& job_id);

}  // namespace ps

#endif  // PS_CTL_JOB_JOB_RUNNER_H_
