// Running a sweep (psctl experiment): every point, in order, one at a time or `parallel` at
// once, on a running cluster (its daemons then hold that many jobs side by side, each its own
// job id) or on a local cluster started for each point (that many clusters at once), with a
// progress bar over the whole sweep. The results
// directory holds:
//   <point dir>/     one job's results directory per point (ctl/job/results_writer.h)
//   sweep.csv        the sweep table (ctl/experiment/sweep_table.h), rewritten after every point
//   sweep.json       the sweep's name, description, target loss and setting paths (the report
//                    reads them)
//   logs/            per point: psctl's output and, with a local cluster, its daemons' logs
// Run again, it resumes: points whose summary.json says DONE and whose manifest.json has the
// point's settings hash (ctl/job/run_manifest.h) on as many tasks are skipped.
#ifndef PS_CTL_EXPERIMENT_EXPERIMENT_H_
#define PS_CTL_EXPERIMENT_EXPERIMENT_H_

#include <atomic>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/cluster/cluster_spec.h"
#include "common/file_system.h"
#include "ctl/cluster/local_cluster.h"
#include "ctl/experiment/sweep.h"

namespace ps {

inline constexpr int kMaxParallelPoints = 64;

struct ExperimentOptions {
  std::string results_dir;  // Required.
  bool overwrite = false;   // Run every point again, also those done earlier.
  // The running cluster to submit to. When unset, each point gets a local cluster from
  // `local` (its num_ps, num_workers and dir are set per point).
  std::optional<ClusterSpec> cluster;
  LocalClusterOptions local;
  // Set (from a signal handler thread) to stop the current point and return CANCELLED.
  const std::atomic<bool>* interrupted = nullptr;
  // Points run at once, 1 to kMaxParallelPoints. SYNC points give the same results either way.
  int parallel = 1;
  std::ostream* out = nullptr;  // Progress: a live bar when `live_line`, else log lines.
  bool live_line = false;
  // Where sweep.json, sweep.csv and the points' summaries are read and written; a test passes
  // one that injects faults.
  FileSystem* fs = FileSystem::Default();
};

// Runs the points that are not done yet, in order (`parallel` at once). OK once every point has
// a result, DONE or FAILED (a job that diverges fails: the table says so); CANCELLED when
// interrupted; INVALID_ARGUMENT when a point's number of workers differs from the cluster's, or
// for `parallel` out of range;
// FAILED_PRECONDITION when a point's directory holds a finished job other than the point's
// (the sweep changed: use another results directory or `overwrite`); any other error when
// a point could not be run at all (a local cluster that does not start, an unreachable
// cluster), naming the point.
absl::Status RunExperiment(const Sweep& sweep, const std::vector<SweepPoint>& points,
                           const ExperimentOptions& options);

}  // namespace ps

#endif  // PS_CTL_EXPERIMENT_EXPERIMENT_H_
