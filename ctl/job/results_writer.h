// A job's results directory (docs/ARCHITECTURE.md section 8; columns documented in
// docs/REFERENCE.md, "psctl"):
//   job.json        the JobSpec, the ClusterSpec and the software version
//   metrics.csv     time_s,worker,step,global_step,epoch,loss,examples_per_second,staleness,
//                   bytes_sent,bytes_received
//   eval.csv        time_s,step,loss,accuracy,examples (the chief's evaluations on the test
//                   split: only the final one where the job has a validation split)
//   validation.csv  the same columns, on the validation split (no rows without one)
//   events.csv      time_s,event,task,step,checkpoint,steps_lost,detail (JobEvent)
//   staleness.csv   shard,worker,staleness,count (histograms of applied gradients)
//   staleness_timeline.csv  time_s,shard,worker,staleness,count: the same histograms as they
//                   stood every few seconds of the run (cumulative), for staleness over time
//   summary.json    final loss and accuracy, steps, wall time, throughput, staleness, drops
//   manifest.json   what ran, where and on what (ctl/job/run_manifest.h), written with summary.json
//   params/*.npy    the final parameters, one NumPy file per variable
#ifndef PS_CTL_JOB_RESULTS_WRITER_H_
#define PS_CTL_JOB_RESULTS_WRITER_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/cluster/cluster_spec.h"
#include "common/file_system.h"
#include "common/job/variables.h"
#include "ctl/job/run_manifest.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"
#include "proto/worker_service.pb.h"

namespace ps {

// What happened to a run besides its steps: one row of events.csv.
struct JobEvent {
  // "resumed", "checkpoint_complete", "checkpoint_abandoned", "worker_lost",
  // "worker_rejoined", "recovering", "recovered", "stopped", "checkpoints_paused",
  // "checkpoints_resumed".
  std::string event;
  std::string task;        // The task it concerns ("ps:1", "worker:2"), or empty.
  int64_t step = -1;       // The step it happened at, or a run resumes at; -1: none.
  std::string checkpoint;  // The checkpoint completed, resumed or rolled back to; or empty.
  int64_t steps_lost = -1; // "recovered": the steps done again (rolled back); -1: none.
  std::string detail;      // Free text: why, and what comes next.
};

struct ResultsWriterOptions {
  // Where every file is written (job.json, staleness.csv, summary.json and params/*.npy
  // atomically); a test passes one that injects faults.
  FileSystem* fs = FileSystem::Default();
  // The run's time: its start (when the writer is made) and each row's and the manifest's
  // times; a test passes a SimulatedClock. Not owned; must outlive the writer.
  Clock* clock = Clock::Real();
};

// Thread-safe. A file that cannot be written fails its Write* call naming the file;
// RESOURCE_EXHAUSTED when the disk is full. metrics.csv, eval.csv and validation.csv grow with
// each RecordProgress; the first failure to write them is returned by WriteSummary.
class ResultsWriter {
 public:
  // Creates `dir` and its parents. FAILED_PRECONDITION if it exists and is not empty, unless
  // `overwrite`.
  static absl::StatusOr<std::unique_ptr<ResultsWriter>> Create(
      const std::string& dir, bool overwrite, const ResultsWriterOptions& options = {});

  const std::string& dir() const { return dir_; }

  // job.json; also keeps the cluster for manifest.json.
  absl::Status WriteJob(const JobSpec& spec, const ClusterSpec& cluster) ABSL_LOCKS_EXCLUDED(mu_);
  // The tasks as manifest.json will list them (DescribeTasks, when the run starts).
  void SetTasks(std::vector<TaskManifest> tasks) ABSL_LOCKS_EXCLUDED(mu_);
  // One metrics.csv row; an eval.csv (validation.csv) row when the chief reports a new
  // evaluation of the test (validation) split. A row that
  // cannot be written is dropped, and the error kept for WriteSummary.
  void RecordProgress(const JobProgress& progress) ABSL_LOCKS_EXCLUDED(mu_);
  // One events.csv row, its time now. A row that cannot be written is kept for WriteSummary,
  // as above.
  void RecordEvent(const JobEvent& event) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status WriteStaleness(const std::vector<JobStats>& shards);
  // Appends the shards' staleness histograms as they stand now to staleness_timeline.csv
  // (created with its header on the first call; rows of counts that grew since the last call).
  absl::Status RecordStalenessSnapshot(const std::vector<JobStats>& shards);
  // params/NAME.npy per variable; summary.json's "parameters_written" says whether it was.
  absl::Status WriteParameters(const ParameterSpec& spec, const MutableVariables& values)
      ABSL_LOCKS_EXCLUDED(mu_);
  // summary.json from the workers' last updates and the shards' statistics, then manifest.json
  // (the run ends now). Then the first error writing metrics.csv, eval.csv or validation.csv, if
  // any.
  // `lost`: workers that failed and that the job went on without (its mode allows it): they
  // are listed under "lost_workers" and do not make the job's state FAILED. `not_started`:
  // workers the job grew by whose daemons were never up, listed under "workers_not_started"
  // and counted nowhere else.
  absl::Status WriteSummary(const JobSpec& spec, const std::vector<JobProgress>& last,
                            const std::vector<JobStats>& shards, absl::Duration wall_time,
                            const std::set<int>& lost = {},
                            const std::set<int>& not_started = {}) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  ResultsWriter(std::string dir, FileSystem* fs, Clock* clock)
      : dir_(std::move(dir)), fs_(fs), clock_(clock), start_(clock->Now()) {}

  // Writes `name` in dir_ atomically.
  absl::Status WriteFile(const std::string& name, const std::string& text);
  // Appends and flushes `row`; keeps the first error in progress_error_.
  void AppendRow(AppendableFile* file, const std::string& row) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A row of `file` (eval.csv or validation.csv) for `eval` unless its step is not past
  // `*last_step`, which it then becomes.
  void RecordEval(double time_s, const EvalResult& eval, AppendableFile* file, int64_t* last_step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  FileSystem* const fs_;
  Clock* const clock_;
  const absl::Time start_;
  absl::Mutex mu_;
  std::unique_ptr<AppendableFile> metrics_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<AppendableFile> eval_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<AppendableFile> validation_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<AppendableFile> events_ ABSL_GUARDED_BY(mu_);
  int64_t last_eval_step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_validation_step_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<AppendableFile> timeline_ ABSL_GUARDED_BY(mu_);  // staleness_timeline.csv
  // The counts last written to it, by (shard, worker, staleness).
  std::map<std::tuple<int, int, int>, int64_t> timeline_counts_ ABSL_GUARDED_BY(mu_);
  nlohmann::json cluster_ ABSL_GUARDED_BY(mu_);  // WriteJob's, for the manifest.
  std::vector<TaskManifest> tasks_ ABSL_GUARDED_BY(mu_);
  absl::Status progress_error_ ABSL_GUARDED_BY(mu_);
  bool parameters_written_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ps

#endif  // PS_CTL_JOB_RESULTS_WRITER_H_
