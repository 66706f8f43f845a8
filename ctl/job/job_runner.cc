#include "ctl/job/job_runner.h"

#include <algorithm>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint/checkpoint_store.h"
#include "common/job/job_schema.h"
#include "common/job/job_warnings.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "ctl/job/checkpoint_coordinator.h"
#include "ctl/job/checkpoint_restore.h"
#include "ctl/job/exit_code.h"
#include "ctl/job/job_figures.h"
#include "ctl/job/job_defaults.h"
#include "ctl/cluster/cluster_client.h"
#include "ctl/cluster/cluster_probe.h"
#include "ctl/job/job_follower.h"
#include "ctl/job/lost_workers.h"
#include "ctl/job/ps_recovery.h"
#include "ctl/job/job_trace.h"
#include "ctl/job/results_writer.h"
#include "ctl/job/run_claim.h"
#include "ctl/job/run_manifest.h"
#include "ctl/job/shard_results.h"
#include "proto/ps_service.pb.h"
#include "proto/worker_service.pb.h"

namespace ps {
namespace {

// Starts the job on worker `w`. With `replace`, a worker still ending the earlier run (it stops
// at its next step) is asked again for up to `wait`.
absl::StatusOr<StartJobResponse> StartOnWorker(const ClusterClient& client, int w,
                                               const StartJobRequest& request, bool replace,
                                               absl::Duration wait, Clock* clock) {
  const absl::Time deadline = clock->Now() + wait;
  while (true) {
    absl::StatusOr<StartJobResponse> started = client.StartJob(w, request);
    if (started.ok() || !replace || !absl::IsAlreadyExists(started.status()) ||
        clock->Now() >= deadline) {
      return started;
    }
    clock->SleepFor(absl::Milliseconds(100));
  }
}

}  // namespace

namespace {

// Whether any worker has run a step: before that (loading data, or failing to) a progress line
// would only say "step 0".
bool AnyStepRun(const std::vector<JobProgress>& last) {
  for (const JobProgress& progress : last) {
    if (progress.step() > 0) return true;
  }
  return false;
}

// Where a run starts: step 0, or a resumed job's checkpoint.
struct RunStart {
  std::vector<int64_t> worker_steps;  // Per worker (WorkerResumeSteps).
  std::string checkpoint;             // The checkpoint resumed from; empty: none.

  // The slowest worker's step: where the run as a whole starts.
  int64_t first_step() const {
    return worker_steps.empty() ? 0 : *std::min_element(worker_steps.begin(), worker_steps.end());
  }
};

// What comes before the workers start: the checkpoint settings checked, the job id claimed,
// and, to resume, the shards restored.
absl::StatusOr<RunStart> PrepareRun(const ClusterSpec& cluster, const ClusterClient& client,
                                    const JobSpec& spec, const SubmitOptions& options,
                                    const CheckpointCoordinator& checkpoints) {
  std::ostream& out = *options.out;
  if (checkpoints.enabled()) {
    if (options.detach) {
      return absl::InvalidArgumentError(
          "job: checkpoints are taken by psctl while it follows the job; submit it without "
          "--detach (or drop its checkpoint settings)");
    }
    absl::Status status = checkpoints.CheckDirectories();
    if (!status.ok()) return status;
  }
  absl::Status status =
      ClaimJobId(cluster, client, spec.job_id(), options.replace || options.resume, out);
  if (!status.ok()) return status;
  if (options.replace && !options.resume) {
    // The replaced runs' checkpoints go too: no recovery of this run can restore them.
    status = DeleteCheckpointsEverywhere(client, spec.job_id(), out);
    if (!status.ok()) return status;
  }
  if (options.replay != nullptr) {
    // The recorded run's shards' spec, as this run's workers will make it (same JobSpec).
    ParameterSpec parameters = options.replay->parameters;
    parameters.set_job_id(spec.job_id());
    parameters.set_run_id(spec.run_id());
    parameters.set_owner(spec.owner());
    absl::StatusOr<Placement> created = client.ps()->CreateJob(parameters, &options.replay->logs);
    if (!created.ok()) return created.status();
    int64_t events = 0;
    for (const ApplyLog& log : options.replay->logs) events += log.entries_size();
    out << "replaying " << events << " recorded pulls and updates on " << client.num_ps()
        << " ps in their recorded order\n";
  }
  if (!options.resume) return RunStart{std::vector<int64_t>(client.num_workers(), 0), ""};
  RestorableCheckpoints any_run;
  any_run.any = true;  // --resume: the newest complete checkpoint of the job, of any run.
  absl::StatusOr<CheckpointManifest> restored =
      RestoreLatestCheckpoint(client, spec, any_run, out);
  if (absl::IsNotFound(restored.status())) {
    return absl::NotFoundError(absl::StrCat(restored.status().message(),
                                            "; submit it without --resume to start afresh"));
  }
  if (!restored.ok()) return restored.status();
  out << "resuming job " << spec.job_id() << " from checkpoint " << restored->name() << " at step "
      << restored->resume_step() << " as run " << spec.run_id() << "\n";
  return RunStart{WorkerResumeSteps(*restored, client.num_workers()), restored->name()};
}

// Starts the run on every worker w from first_steps[w]; on a failure, stops it on those started.
// With `skip_down` (a recovery, an elastic job), a worker that cannot be reached is skipped
// instead: it is then lost, and rejoins once its daemon is back (LostWorkers).
// `skipped` (when not null) gets the workers skipped. `elapsed`: how long the submission has run
// (a recovery's restart), from which the workers count the job's time_limit_s.
absl::Status StartEveryWorker(const ClusterSpec& cluster, const ClusterClient& client,
                              const JobSpec& spec, const std::vector<int64_t>& first_steps,
                              const SubmitOptions& options, bool skip_down = false,
                              std::vector<int>* skipped = nullptr,
                              absl::Duration elapsed = absl::ZeroDuration()) {
  StartJobRequest request;
  *request.mutable_spec() = spec;
  *request.mutable_cluster() = cluster.ToProto();
  request.set_elapsed_s(absl::ToDoubleSeconds(std::max(elapsed, absl::ZeroDuration())));
  for (int w = 0; w < client.num_workers(); ++w) {
    request.set_first_step(first_steps[w]);
    absl::StatusOr<StartJobResponse> started =
        StartOnWorker(client, w, request, options.replace || options.resume, absl::Seconds(10),
                      options.clock);
    if (!started.ok() && skip_down && absl::IsUnavailable(started.status())) {
      *options.out << "worker:" << w << " is down: it rejoins the job once it is back\n";
      if (skipped != nullptr) skipped->push_back(w);
      continue;
    }
    if (!started.ok()) {
      if (w > 0) StopJobEverywhere(cluster, spec.job_id()).IgnoreError();
      return absl::Status(started.status().code(),
                          absl::StrCat(started.status().message(), "; the job was not started"));
    }
    *options.out << "worker:" << w << " started job " << spec.job_id() << " on "
                 << started->device() << "\n";
  }
  return absl::OkStatus();
}

// Recovers the job after a ps lost it (RecoverRun, ctl/job/ps_recovery.h) on the cluster's
// daemons: each probe and the recovered run use channels made afresh (`*client` is replaced),
// and the restored run is started on every worker that is up, its time limit counting from
// `start` (the submission's).
absl::StatusOr<int64_t> Recover(const ClusterSpec& cluster, std::unique_ptr<ClusterClient>* client,
                                JobSpec* spec, RestorableCheckpoints* restorable,
                                const SubmitOptions& options, const Recovery& recovery,
                                ResultsWriter* results, absl::Time start) {
  RecoveryEnvironment env;
  env.connect = [&cluster] { return ClusterClient::Create(cluster); };
  env.stop_everywhere = [&cluster](const std::string& job_id) {
    StopJobEverywhere(cluster, job_id).IgnoreError();
  };
  env.new_run_id = NewRunId;
  env.start_workers = [&cluster, &options, start](const ClusterClient& fresh, const JobSpec& run,
                                                  const std::vector<int64_t>& first_steps) {
    SubmitOptions restart = options;
    restart.replace = true;  // The workers of the run stopped may still be ending it.
    return StartEveryWorker(cluster, fresh, run, first_steps, restart, /*skip_down=*/true,
                            /*skipped=*/nullptr, options.clock->Now() - start);
  };
  env.clock = options.clock;
  env.out = options.out;
  env.live_line = options.live_line;
  env.results = results;
  return RecoverRun(env, recovery, client, spec, restorable);
}

// How often the staleness histograms are read from the shards while a job runs.
constexpr absl::Duration kStalenessSnapshotEvery = absl::Seconds(2);

// A recovery rolls the job back to a checkpoint, membership included: it starts every worker,
// those that left since (psctl remove-worker) too. Says so; returns OK.
absl::Status SayLeftWorkersComeBack(const LostWorkers& lost, std::ostream& out,
                                    ResultsWriter* results) {
  for (int worker : lost.left()) {
    const std::string line = absl::StrCat(
        "worker:", worker, " had left the job (psctl remove-worker); the recovery starts it "
        "again with the others, as the job was at its checkpoint: remove it again once the job "
        "runs if it should stay out");
    out << line << "\n";
    results->RecordEvent({"worker_rejoined", absl::StrCat("worker:", worker), -1, "", -1, line});
  }
  return absl::OkStatus();
}

// Follows the run to its end: progress lines, checkpoints, the results, and stopping it
// everywhere on an interrupt or on a failed worker the job cannot go on without (one it can is
// lost: said, and listed in the summary). Returns as SubmitJob does; but when a worker failed
// because a ps lost the job and the job has checkpoints, returns at once with `*recover` set
// (the run is to be recovered: see Recover).
// The cluster every shard of a job (`shards`: each one's statistics) has grown into past
// `cluster`: `cluster`'s ps and the workers the shards list (ParameterSpec.worker_addresses). A
// growth reaches the shards in turn, and a shard refuses a worker it does not have: so, the
// fewest any shard lists. None when some shard has not grown past `cluster`.
absl::StatusOr<std::optional<ClusterSpec>> GrownCluster(const ClusterSpec& cluster,
                                                        const std::vector<JobStats>& shards) {
  const ParameterSpec* fewest = nullptr;
  for (const JobStats& shard : shards) {
    if (fewest == nullptr ||
        shard.spec().worker_addresses_size() < fewest->worker_addresses_size()) {
      fewest = &shard.spec();
    }
  }
  if (fewest == nullptr || fewest->worker_addresses_size() <= cluster.NumTasks(kWorkerJob)) {
    return std::nullopt;
  }
  ClusterDef grown = cluster.ToProto();
  for (ClusterJob& job : *grown.mutable_jobs()) {
    if (job.name() == kWorkerJob) *job.mutable_tasks() = fewest->worker_addresses();
  }
  absl::StatusOr<ClusterSpec> parsed = ClusterSpec::FromProto(grown);
  if (!parsed.ok()) return parsed.status();
  return std::optional<ClusterSpec>(*std::move(parsed));
}

absl::Status FollowJob(ClusterClient& client, const JobSpec& spec,
                       const SubmitOptions& options, CheckpointCoordinator& checkpoints,
                       ResultsWriter* results, absl::Time start, int64_t first_step,
                       std::optional<Recovery>* recover) {
  std::ostream& out = *options.out;
  bool interrupted = false;
  Follower follower(client, spec.job_id(), results);
  absl::Time last_line = absl::InfinitePast();
  absl::Time last_snapshot = start;  // Of the staleness histograms (staleness_timeline.csv).
  bool stopped = false;
  std::vector<JobStats> shards;  // Written once: when the job is stopped, or at its end.
  std::string growth_refused;  // Why the last growth seen was not taken (said once).
  LostWorkers lost(client, spec, first_step, start, out, results,
                   [&follower, &spec](int worker) { follower.Refollow(worker, spec.job_id()); });
  while (!follower.WaitAllFinal(absl::Milliseconds(200))) {
    // On an interrupt, or once a worker failed that the job cannot go on without (the others
    // would only wait, at a SYNC barrier or SSP bound, for the worker that is gone), stop it
    // everywhere.
    std::string reason;
    if (options.interrupted != nullptr && options.interrupted->load()) {
      interrupted = true;
      reason = "interrupted";
    }
    if (!stopped && reason.empty() && checkpoints.enabled()) {
      *recover = RecoveryNeeded(client, spec.job_id(), follower.Last(), spec.replicas() > 1,
                                lost.not_started());
      if (recover->has_value()) return SayLeftWorkersComeBack(lost, out, results);
    }
    if (!stopped) {
      std::string lost_reason =
          lost.Update(follower.Last(), follower.Gone(), options.clock->Now());
      if (reason.empty()) reason = std::move(lost_reason);
    }
    if (!stopped && !reason.empty()) {
      stopped = true;
      out << (options.live_line ? "\n" : "") << reason << ": stopping job " << spec.job_id()
          << " everywhere\n";
      results->RecordEvent({"stopped", "", -1, "", -1, reason});
      // The shards' statistics and parameters go into the results first; then the job
      // leaves the shards, which ends the pulls still parked there (a SYNC barrier, an SSP
      // bound), so that the workers that are left stop at once.
      WriteShardResults(client, spec, results, out, &shards).IgnoreError();  // Said on `out`.
      checkpoints.Finish(/*final=*/false, absl::Seconds(5));  // Completes those written.
      StopJobEverywhere(client.cluster(), spec.job_id()).IgnoreError();
    }
    if (!stopped) checkpoints.Poll(options.clock->Now());
    if (!stopped && options.clock->Now() - last_snapshot >= kStalenessSnapshotEvery) {
      last_snapshot = options.clock->Now();
      absl::StatusOr<std::vector<JobStats>> stats =
          client.ps()->GetJobStats(spec.job_id(), spec.replicas() > 1);
      if (stats.ok()) results->RecordStalenessSnapshot(*stats).IgnoreError();
      // psctl add-worker grew the job past its ClusterSpec: its new workers join once up.
      absl::StatusOr<std::optional<ClusterSpec>> grown =
          stats.ok() ? GrownCluster(client.cluster(), *stats)
                     : absl::StatusOr<std::optional<ClusterSpec>>(std::nullopt);
      if (grown.ok() && grown->has_value()) {
        const int before = client.num_workers();
        absl::Status taken = client.GrowTo(**grown);
        if (taken.ok()) {
          follower.AddWorkers();
          lost.AddWorkers(before);
        } else if (taken.message() != growth_refused) {
          growth_refused = std::string(taken.message());
          out << "job " << spec.job_id() << " grew, but not from this psctl's cluster: "
              << taken.message() << "\n";
        }
      }
    }
    absl::Duration every = options.live_line ? absl::Milliseconds(200) : absl::Seconds(2);
    if (options.clock->Now() - last_line >= every && AnyStepRun(follower.Last())) {
      last_line = options.clock->Now();
      std::string line =
          ProgressLine(spec, follower.Last(), options.clock->Now() - start, first_step);
      if (options.live_line) {
        out << "\r\033[K" << line << std::flush;
      } else {
        out << line << "\n" << std::flush;
      }
    }
  }
  std::vector<JobProgress> last = follower.Last();
  if (!stopped && checkpoints.enabled()) {  // Every worker may have failed at once.
    *recover = RecoveryNeeded(client, spec.job_id(), last, spec.replicas() > 1,
                              lost.not_started());
    if (recover->has_value()) return SayLeftWorkersComeBack(lost, out, results);
  }
  if (AnyStepRun(last)) {
    out << (options.live_line ? "\r\033[K" : "")
        << ProgressLine(spec, last, options.clock->Now() - start, first_step) << "\n";
  }
  if (const std::string note =
          FiguresOf(spec.consistency().mode(), last, options.clock->Now() - start, spec.steps())
              .note;
      !note.empty()) {
    out << "job " << spec.job_id() << ": " << note << "\n";
  }
  // Every worker but those lost, left, or grown by and never started.
  auto out_of_the_job = [&lost](int worker) {
    return lost.lost().count(worker) > 0 || lost.not_started().count(worker) > 0;
  };
  bool all_done = true;
  for (const JobProgress& progress : last) {
    all_done = all_done && (progress.state() == JobProgress::DONE ||
                            progress.state() == JobProgress::LEFT ||
                            out_of_the_job(progress.worker()));
  }
  if (!stopped) checkpoints.Finish(/*final=*/all_done, absl::Seconds(30));

  absl::Status results_read;
  if (!stopped) results_read = WriteShardResults(client, spec, results, out, &shards);
  results
      ->WriteSummary(spec, last, shards, options.clock->Now() - start, lost.lost(),
                     lost.not_started())
      .IgnoreError();
  out << "results in " << results->dir() << "\n";
  // A run that failed or was stopped leaves the shards once its results are written (above,
  // when stopped here); a finished one stays for `psctl status` (a new run of its id then
  // needs --replace).
  if (!all_done && !stopped) client.ps()->DeleteJob(spec.job_id()).IgnoreError();

  // Ctrl-C on a terminal reaches psctl local's daemons too: the job may end (failing, its
  // ps gone) before the loop above sees the flag, and those failures are not the reason.
  if (options.interrupted != nullptr && options.interrupted->load()) interrupted = true;
  if (interrupted) return absl::CancelledError("interrupted; the job was stopped");
  for (const JobProgress& progress : last) {
    if (progress.state() == JobProgress::FAILED && !out_of_the_job(progress.worker())) {
      return absl::Status(static_cast<absl::StatusCode>(progress.error_code()),
                          absl::StrCat("worker:", progress.worker(), ": ", progress.error()));
    }
  }
  // Stopped, and not by this psctl: someone else ended the run (psctl stop, an admin).
  for (const JobProgress& progress : last) {
    if (!stopped && progress.state() == JobProgress::STOPPED &&
        lost.lost().count(progress.worker()) == 0) {
      return WithExitCode(
          absl::AbortedError(absl::StrCat(
              "job ", spec.job_id(), " was stopped on worker:", progress.worker(), " by ",
              progress.stopped_by().empty() ? "another caller" : progress.stopped_by(),
              " before it finished")),
          kExitStopped);
    }
  }
  // Trained to the end, but its results are not all there: not a success, unless the job is no
  // longer on the ps at all (a program job that deleted it, a short finished-job retention),
  // which the line above says (summary.json: "parameters_written": false).
  if (!results_read.ok() && !absl::IsNotFound(results_read)) {
    return absl::Status(results_read.code(),
                        absl::StrCat("job ", spec.job_id(),
                                     " finished, but its parameters could not be read: ",
                                     results_read.message()));
  }
  // Each group of workers the run finished without, and why.
  const std::pair<const std::set<int>*, const char*> without[] = {
      {&lost.lost(), "lost"},
      {&lost.left(), "left: psctl remove-worker"},
      {&lost.not_started(), "the job grew by them, and their daemons were never up"}};
  for (const auto& [workers, why] : without) {
    if (workers->empty()) continue;
    out << "finished without "
        << absl::StrJoin(*workers, ", ",
                         [](std::string* to, int worker) { absl::StrAppend(to, "worker:", worker); })
        << " (" << why << "; see summary.json)\n";
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SubmitJob(const ClusterSpec& cluster, const JobSpec& submitted,
                       const SubmitOptions& options) {
  JobSpec spec = submitted;
  if (spec.run_id().empty()) spec.set_run_id(NewRunId());
  std::vector<std::string> defaults;  // What psctl gave the job (ctl/job/job_defaults.h).
  if (!options.detach && ValidateJobSpec(spec, cluster.NumTasks(kWorkerJob)).ok()) {
    spec = WithCrashDefaults(spec, cluster.NumTasks(kWorkerJob), &defaults);
  }
  absl::Status status = ValidateJobSpec(spec, cluster.NumTasks(kWorkerJob));
  if (!status.ok()) return absl::InvalidArgumentError(absl::StrCat("job: ", status.message()));
  for (const std::string& warning : JobWarnings(spec, cluster.NumTasks(kWorkerJob))) {
    *options.out << "warning: " << warning << "\n";
  }
  std::vector<int> workers_not_ready;
  int wrong_roles = 0;
  std::vector<std::string> problems;
  bool starts_without = false;
  const absl::Time wait_until = options.clock->Now() + options.wait_for_cluster;
  bool said_waiting = false;
  while (true) {
    wrong_roles = 0;
    problems = ProbeCluster(cluster, absl::Seconds(5), &workers_not_ready, &wrong_roles);
    // An elastic job starts without workers that are not up, as long as enough are.
    starts_without = !problems.empty() && spec.min_workers() > 0 &&
                     problems.size() == workers_not_ready.size() &&
                     workers_not_ready.front() != 0 &&
                     cluster.NumTasks(kWorkerJob) - static_cast<int>(workers_not_ready.size()) >=
                         spec.min_workers();
    // Daemons of the wrong role alone: the spec or the placement is wrong; waiting cannot mend it.
    const bool misplaced = !problems.empty() && wrong_roles == static_cast<int>(problems.size());
    if (problems.empty() || starts_without || misplaced || options.clock->Now() >= wait_until ||
        (options.interrupted != nullptr && options.interrupted->load())) {
      break;
    }
    if (!std::exchange(said_waiting, true)) {
      *options.out << "waiting up to " << absl::FormatDuration(wait_until - options.clock->Now())
                   << " for the cluster (--wait_for_cluster_s): " << absl::StrJoin(problems, "; ")
                   << "\n";
    }
    options.clock->SleepFor(absl::Seconds(1));
  }
  if (options.interrupted != nullptr && options.interrupted->load()) {
    return absl::CancelledError("interrupted while waiting for the cluster; nothing was started");
  }
  if (!problems.empty() && !starts_without) {
    // Bad input (exit 2) when every problem is a daemon of the wrong role; else retry (138).
    const absl::StatusCode code = wrong_roles == static_cast<int>(problems.size())
                                      ? absl::StatusCode::kInvalidArgument
                                      : absl::StatusCode::kUnavailable;
    return absl::Status(code, absl::StrCat(
        "the cluster is not ready:\n  ", absl::StrJoin(problems, "\n  "),
        spec.min_workers() > 0
            ? absl::StrCat("\n(an elastic job starts with at least min_workers = ",
                           spec.min_workers(), " workers up, worker:0 among them, and every ps)")
            : ""));
  }
  for (const std::string& problem : starts_without ? problems : std::vector<std::string>()) {
    *options.out << problem << ": the elastic job starts without it, and it joins once it is up\n";
  }
  absl::StatusOr<std::unique_ptr<ClusterClient>> client = ClusterClient::Create(cluster);
  if (!client.ok()) return client.status();
  // psctl's default checkpoints (the job set none): no last one of a short run, and none at all
  // where a ps has no --checkpoint_dir.
  const bool default_checkpoints = !submitted.has_checkpoint() && spec.has_checkpoint();
  auto coordinator = [&]() {
    auto made = std::make_unique<CheckpointCoordinator>(**client, spec, options.out, options.clock);
    if (default_checkpoints) made->set_final_only_after_one();
    return made;
  };
  auto checkpoints = coordinator();
  if (default_checkpoints) {
    absl::Status directories = checkpoints->CheckDirectories();
    if (!directories.ok()) {
      // The defaults again, for a job that said "no checkpoints".
      JobSpec without = submitted;
      without.set_run_id(spec.run_id());
      without.mutable_checkpoint();
      defaults.clear();
      spec = WithCrashDefaults(without, cluster.NumTasks(kWorkerJob), &defaults);
      spec.clear_checkpoint();
      *options.out << "no checkpoints (" << directories.message() << ")\n";
      checkpoints = coordinator();
    }
  }
  for (const std::string& given : defaults) *options.out << "default: " << given << "\n";
  *options.out << std::flush;
  absl::StatusOr<RunStart> run = PrepareRun(cluster, **client, spec, options, *checkpoints);
  if (!run.ok()) return run.status();
  std::unique_ptr<ResultsWriter> results;
  if (!options.detach) {
    ResultsWriterOptions writer;
    writer.clock = options.clock;
    absl::StatusOr<std::unique_ptr<ResultsWriter>> created =
        ResultsWriter::Create(options.results_dir, options.overwrite, writer);
    status = created.status();
    if (created.ok()) {
      results = *std::move(created);
      status = results->WriteJob(spec, cluster);
      results->SetTasks(DescribeTasks(**client, cluster));
    }
    if (!status.ok()) {
      // A resumed job is on the shards already: it goes, as the run does not start.
      if (options.resume) (*client)->ps()->DeleteJob(spec.job_id()).IgnoreError();
      return status;
    }
    checkpoints->set_results(results.get());
    if (!run->checkpoint.empty()) {
      results->RecordEvent(
          {"resumed", "", run->first_step(), run->checkpoint, -1,
           absl::StrCat("from checkpoint ", run->checkpoint, " at step ", run->first_step())});
    }
  }
  const absl::Time start = options.clock->Now();
  std::vector<int> skipped;
  status = StartEveryWorker(cluster, **client, spec, run->worker_steps, options,
                            /*skip_down=*/spec.min_workers() > 0, &skipped);
  if (!status.ok()) return status;
  // An elastic job whose workers went down between the probe and the start: it still needs
  // its chief and min_workers.
  const int started = (*client)->num_workers() - static_cast<int>(skipped.size());
  if (!skipped.empty() && (skipped.front() == 0 || started < spec.min_workers())) {
    StopJobEverywhere(cluster, spec.job_id()).IgnoreError();
    return absl::UnavailableError(absl::StrCat(
        "the elastic job started on ", started, " workers",
        skipped.front() == 0 ? ", without worker:0 (its chief)" : "", "; it needs min_workers = ",
        spec.min_workers(), " and worker:0: it was stopped; start the workers' daemons and "
        "submit it again"));
  }
  if (options.detach) {
    *options.out << spec.job_id() << "\n";
    return absl::OkStatus();
  }
  int64_t first_step = run->first_step();
  RestorableCheckpoints restorable;  // A recovery restores only this submission's runs' own.
  restorable.run_ids.insert(spec.run_id());
  restorable.resumed_from = run->checkpoint;
  while (true) {
    std::optional<Recovery> recover;
    status = FollowJob(**client, spec, options, *checkpoints, results.get(), start,
                       first_step, &recover);
    if (!recover.has_value()) return status;
    // The cluster as the job has it: grown, where psctl add-worker grew it.
    const ClusterSpec current = (*client)->cluster();
    absl::StatusOr<int64_t> recovered =
        Recover(current, &*client, &spec, &restorable, options, *recover, results.get(), start);
    if (!recovered.ok()) return recovered.status();
    first_step = *recovered;
    checkpoints = coordinator();
    checkpoints->set_results(results.get());
  }
}

absl::Status StopJobEverywhere(const ClusterSpec& cluster, const std::string& job_id) {
  absl::StatusOr<std::unique_ptr<ClusterClient>> client = ClusterClient::Create(cluster);
  if (!client.ok()) return client.status();
  int found = 0;
  std::vector<std::string> errors;
  absl::StatusCode code = absl::StatusCode::kOk;  // The first error's (PERMISSION_DENIED, ...).
  auto note = [&](const absl::Status& status) {
    if (status.ok()) {
      ++found;
    } else if (!absl::IsNotFound(status)) {
      if (code == absl::StatusCode::kOk) code = status.code();
      errors.push_back(std::string(status.message()));
    }
  };
  for (int w = 0; w < (*client)->num_workers(); ++w) note((*client)->StopJob(w, job_id));
  note((*client)->ps()->DeleteJob(job_id));
  if (!errors.empty()) return absl::Status(code, absl::StrJoin(errors, "; "));
  if (found == 0) {
    return absl::NotFoundError(
        absl::StrCat("no task knows job \"", job_id, "\"; `psctl status` lists the jobs"));
  }
  return absl::OkStatus();
}

}  // namespace ps
