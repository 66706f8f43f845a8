#include "ctl/job/job_follower.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "ctl/job/job_figures.h"

namespace ps {

Follower::Follower(const ClusterClient& client, const std::string& job_id,
                   ResultsWriter* results)
    : client_(client), results_(results), last_(client.num_workers()) {
  for (int w = 0; w < client.num_workers(); ++w) {
    last_[w].set_worker(w);
    threads_.emplace_back([this, w, job_id] { Follow(w, job_id); });
  }
}

Follower::~Follower() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& context : contexts_) context->TryCancel();
  }
  for (std::thread& thread : threads_) thread.join();
}

bool Follower::WaitAllFinal(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto all = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return finished_ == static_cast<int>(last_.size());
  };
  return mu_.AwaitWithTimeout(absl::Condition(&all), timeout);
}

std::vector<JobProgress> Follower::Last() {
  absl::MutexLock lock(&mu_);
  return last_;
}

std::set<int> Follower::Gone() {
  absl::MutexLock lock(&mu_);
  return gone_;
}

void Follower::Refollow(int worker, const std::string& job_id) {
  {
    absl::MutexLock lock(&mu_);
    last_[worker] = JobProgress();
    last_[worker].set_worker(worker);
    gone_.erase(worker);
    --finished_;
  }
  threads_.emplace_back([this, worker, job_id] { Follow(worker, job_id); });
}

void Follower::AddWorkers() {
  const int grown = client_.num_workers();
  absl::MutexLock lock(&mu_);
  for (int w = static_cast<int>(last_.size()); w < grown; ++w) {
    last_.emplace_back();
    last_[w].set_worker(w);
    last_[w].set_state(JobProgress::FAILED);
    last_[w].set_error_code(static_cast<int>(absl::StatusCode::kUnavailable));
    last_[w].set_error("not started yet: the job grew by it");
    gone_.insert(w);
    ++finished_;
  }
}

bool Follower::StillRuns(int worker, const std::string& job_id) const {
  std::optional<JobProgress> job = client_.JobOnWorker(worker, job_id);
  return job.has_value() && job->state() == JobProgress::RUNNING;
}

void Follower::Follow(int worker, const std::string& job_id) {
  absl::Status status;
  // A stream that broke while the worker still runs the job (this psctl was suspended past the
  // worker's keepalive, a network blip) is opened again, at most kReopens times in a row
  // without an update in between; a worker that does not answer, or no longer runs the job, is
  // gone.
  constexpr int kReopens = 3;
  for (int reopens = 0;; ++reopens) {
    auto context = std::make_unique<grpc::ClientContext>();
    grpc::ClientContext* raw = context.get();
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      contexts_.push_back(std::move(context));
    }
    bool heard = false;
    status = client_.WatchJob(worker, job_id, raw,
                              [this, worker, &heard](const JobProgress& progress) {
                                if (results_ != nullptr) results_->RecordProgress(progress);
                                absl::MutexLock lock(&mu_);
                                last_[worker] = progress;
                                heard = true;
                              });
    if (heard) reopens = 0;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || last_[worker].state() != JobProgress::RUNNING) break;
    }
    if (reopens >= kReopens || !StillRuns(worker, job_id)) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  absl::MutexLock lock(&mu_);
  if (last_[worker].state() == JobProgress::RUNNING) {
    // The stream broke before a final state: the worker died or went away.
    gone_.insert(worker);
    last_[worker].set_state(JobProgress::FAILED);
    last_[worker].set_error_code(status.ok() ? static_cast<int>(absl::StatusCode::kUnavailable)
                                             : static_cast<int>(status.code()));
    last_[worker].set_error(absl::StrCat("lost the progress stream: ",
                                         status.ok() ? "it ended early" : status.message()));
  }
  ++finished_;
}

std::string ProgressLine(const JobSpec& spec, const std::vector<JobProgress>& last,
                         absl::Duration wall_time, int64_t first_step) {
  const JobFigures figures =
      FiguresOf(spec.consistency().mode(), last, wall_time, spec.steps());
  const JobProgress& chief = last[0];
  std::string total = spec.steps() > 0 ? absl::StrCat("/", spec.steps()) : "";
  std::string eta;
  if (absl::optional<Eta> left = EtaOf(spec, figures, wall_time, first_step); left.has_value()) {
    eta = absl::StrFormat(", ETA %.0fs%s", absl::ToDoubleSeconds(left->left),
                          left->time_limit ? " (time_limit_s)" : "");
  }
  // The validation split's figures where the job has one, and the test split's where the chief
  // has evaluated it (with a validation split, once: at the end).
  std::string eval;
  if (chief.has_validation()) {
    eval = absl::StrFormat(" | validation loss %.4f acc %.3f", chief.validation().loss(),
                           chief.validation().accuracy());
  }
  if (chief.has_eval()) {
    absl::StrAppend(&eval, absl::StrFormat(" | eval loss %.4f acc %.3f", chief.eval().loss(),
                                           chief.eval().accuracy()));
  }
  return absl::StrFormat("step %d%s | loss %.4f | %.0f ex/s | staleness %.2f | %.1fs%s%s",
                         figures.step, total, figures.loss, figures.examples_per_second,
                         figures.staleness, absl::ToDoubleSeconds(wall_time), eta, eval);
}

}  // namespace ps
