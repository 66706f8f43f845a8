#include "ctl/job/lost_workers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/job/consistency_modes.h"

namespace ps {
namespace {

// A barrier without backup workers, and with a lease: it waits for a lost worker's return.
bool WaitsForReturn(const JobSpec& spec) {
  return ModeTraitsOf(spec.consistency().mode()).lost_worker ==
             LostWorkerPolicy::kBackupWorkers &&
         spec.consistency().replicas_to_aggregate() == 0 && spec.worker_lease_s() > 0;
}

}  // namespace

bool GoesOnWithout(const JobSpec& spec, int num_workers, int failed) {
  if (failed >= num_workers) return false;
  if (spec.min_workers() > 0) return num_workers - failed >= spec.min_workers();  // Elastic.
  const ConsistencyConfig& consistency = spec.consistency();
  switch (ModeTraitsOf(consistency.mode()).lost_worker) {
    case LostWorkerPolicy::kGoesOn:
      return true;
    case LostWorkerPolicy::kLeavesAfterLease:
      return spec.worker_lease_s() > 0;
    case LostWorkerPolicy::kBackupWorkers:
      return consistency.replicas_to_aggregate() > 0 &&
             consistency.replicas_to_aggregate() <= num_workers - failed;
    case LostWorkerPolicy::kFails:
      return false;
  }
  return false;
}

LostWorkers::LostWorkers(const ClusterClient& client, const JobSpec& spec, int64_t first_step,
                         absl::Time run_start, std::ostream& out, ResultsWriter* results,
                         std::function<void(int)> refollow)
    : client_(client),
      spec_(spec),
      first_step_(first_step),
      run_start_(run_start),
      out_(out),
      results_(results),
      refollow_(std::move(refollow)) {}

std::string LostWorkers::Update(const std::vector<JobProgress>& now, const std::set<int>& gone,
                                absl::Time time) {
  std::vector<const JobProgress*> failed;
  for (const JobProgress& progress : now) {
    if (not_started_.count(progress.worker()) > 0) continue;  // Its record is a placeholder.
    if (progress.state() == JobProgress::FAILED) failed.push_back(&progress);
    if (progress.state() == JobProgress::LEFT && left_.insert(progress.worker()).second) {
      const std::string task = absl::StrCat("worker:", progress.worker());
      out_ << task << " left the job at step " << progress.step() << " (asked by "
           << progress.stopped_by() << "); the job goes on without it until psctl add-worker\n";
      results_->RecordEvent({"worker_left", task, progress.step(), "", -1,
                             absl::StrCat("asked by ", progress.stopped_by())});
    }
  }
  // Those that left are out of the count: the job's mode asks about the workers in it. Two
  // removals at once may each have seen enough workers staying (the daemons check each alone).
  const int in_job = client_.num_workers() - static_cast<int>(left_.size()) -
                     static_cast<int>(not_started_.size());
  if (const int needed = std::max(1, spec_.min_workers()); in_job < needed) {
    return absl::StrCat(left_.size(), " workers left (psctl remove-worker), and the job needs at least ",
                        needed, " in it");
  }
  const bool goes_on = GoesOnWithout(spec_, in_job, static_cast<int>(failed.size()));
  const bool waits = !goes_on && WaitsForReturn(spec_);
  const absl::Duration wait = absl::Seconds(spec_.worker_lease_s());
  for (const JobProgress* progress : failed) {
    const std::string task = absl::StrCat("worker:", progress->worker());
    // Its daemon, or its process alone (a program job's), died: lost, not failed.
    const bool died = gone.count(progress->worker()) > 0 || progress->process_died();
    if ((!goes_on && !waits) || !died) {
      return absl::StrCat(task, " failed");
    }
    if (lost_.insert(progress->worker()).second) {
      lost_at_[progress->worker()] = time;
      out_ << task << " failed at step " << progress->step() << " (" << progress->error() << "); "
           << (goes_on ? absl::StrCat("the job goes on without it (",
                                      spec_.min_workers() > 0
                                          ? absl::StrCat("elastic: at least ",
                                                         spec_.min_workers(), " workers")
                                          : ConsistencyConfig::Mode_Name(
                                                spec_.consistency().mode()),
                                      "); it rejoins once its daemon is back")
                       : absl::StrCat("SYNC waits up to ", absl::FormatDuration(wait),
                                      " for it to return: start its daemon again"))
           << "\n";
      results_->RecordEvent({"worker_lost", task, progress->step(), "", -1, progress->error()});
    } else if (waits && time - lost_at_[progress->worker()] > wait) {
      lost_.erase(progress->worker());  // No longer waited for: the job fails with it.
      return absl::StrCat(task, " did not return within ", absl::FormatDuration(wait));
    }
  }
  // A lost worker whose daemon is back rejoins the job, and a new one joins it; one that left,
  // once asked back.
  if ((!lost_.empty() || !left_.empty() || !not_started_.empty()) &&
      time - last_rejoin_try_ >= absl::Seconds(1)) {
    last_rejoin_try_ = time;
    for (std::set<int>* waiting : {&lost_, &not_started_}) {
      for (auto it = waiting->begin(); it != waiting->end();) {
        if (TryRejoin(now[*it], time)) {
          refollow_(*it);
          it = waiting->erase(it);
        } else {
          ++it;
        }
      }
    }
    // Only into a job still running: once the chief has ended it (its final evaluation) or
    // someone stopped it, a worker taken back would train on after the results were written.
    const bool running =
        now[0].state() == JobProgress::RUNNING &&
        std::none_of(now.begin(), now.end(), [](const JobProgress& p) {
          return p.state() == JobProgress::STOPPED;
        });
    for (auto it = left_.begin(); it != left_.end();) {
      if (running && RejoinAsked(*it) && TryRejoin(now[*it], time)) {
        refollow_(*it);
        it = left_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return "";
}

void LostWorkers::AddWorkers(int first_new) {
  for (int worker = first_new; worker < client_.num_workers(); ++worker) {
    if (!added_.insert(worker).second) continue;
    not_started_.insert(worker);
    const std::string line = absl::StrCat(
        "job ", spec_.job_id(), " grew by worker:", worker, " (",
        client_.cluster().Tasks(kWorkerJob)[worker], "): it joins once its daemon is up");
    out_ << line << "\n";
    results_->RecordEvent({"worker_added", absl::StrCat("worker:", worker), -1, "", -1, line});
  }
}

bool LostWorkers::RejoinAsked(int worker) const {
  std::optional<JobProgress> job = client_.JobOnWorker(worker, spec_.job_id());
  return job.has_value() && job->state() == JobProgress::LEFT && job->rejoin_asked();
}

bool LostWorkers::TryRejoin(const JobProgress& last, absl::Time time) {
  const int worker = last.worker();
  if (!client_.GetWorkerStatus(worker).ok()) return false;  // Still down.
  int64_t first_step = std::max(first_step_, last.step());
  const ModeTraits& mode = ModeTraitsOf(spec_.consistency().mode());
  if (mode.barrier) {
    // It rejoins at the barrier's step.
    absl::StatusOr<JobStats> stats = client_.GetShardStats(0, spec_.job_id(), spec_.replicas() > 1);
    if (!stats.ok()) return false;
    first_step = stats->step();
  } else if (mode.staleness == Staleness::kUpToBound) {
    // SSP: no earlier than the slowest clock of the workers in the job, so that a worker that
    // joins late does not hold them back while it catches up.
    absl::StatusOr<JobStats> stats = client_.GetShardStats(0, spec_.job_id(), spec_.replicas() > 1);
    if (!stats.ok()) return false;
    first_step = std::max(first_step, stats->checkpoint_clock());
  }
  StartJobRequest request;
  *request.mutable_spec() = spec_;
  *request.mutable_cluster() = client_.cluster().ToProto();
  request.set_first_step(first_step);
  request.set_incarnation(incarnations_[worker] + 1);
  request.set_elapsed_s(std::max(0.0, absl::ToDoubleSeconds(time - run_start_)));
  if (!client_.StartJob(worker, request).ok()) return false;
  const bool joins = ++incarnations_[worker] == 1 && added_.count(worker) > 0;
  const std::string line =
      absl::StrCat("worker:", worker, joins ? " is up: it joins" : " is back: it rejoins",
                   " the job at step ", first_step, " (incarnation ", incarnations_[worker], ")");
  out_ << line << "\n";
  results_->RecordEvent(
      {"worker_rejoined", absl::StrCat("worker:", worker), first_step, "", -1, line});
  return true;
}

}  // namespace ps
