#include "ctl/job/job_figures.h"

#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "common/job/consistency_modes.h"

namespace ps {
namespace {

bool Running(const JobProgress& p) { return p.state() == JobProgress::RUNNING; }
bool Done(const JobProgress& p) { return p.state() == JobProgress::DONE; }
bool Stepped(const JobProgress& p) { return p.step() > 0; }
bool RunningAndStepped(const JobProgress& p) { return Running(p) && Stepped(p); }
bool DoneAndStepped(const JobProgress& p) { return Done(p) && Stepped(p); }

// The workers a figure is taken over: those of the first of `choices` that holds for some, else
// all.
std::vector<const JobProgress*> Preferring(const std::vector<JobProgress>& workers,
                                           std::initializer_list<bool (*)(const JobProgress&)>
                                               choices) {
  for (const auto which : choices) {
    std::vector<const JobProgress*> chosen;
    for (const JobProgress& progress : workers) {
      if (which(progress)) chosen.push_back(&progress);
    }
    if (!chosen.empty()) return chosen;
  }
  std::vector<const JobProgress*> all;
  for (const JobProgress& progress : workers) all.push_back(&progress);
  return all;
}

}  // namespace

JobFigures FiguresOf(ConsistencyConfig::Mode mode, const std::vector<JobProgress>& workers,
                     absl::Duration wall_time, int64_t steps) {
  JobFigures figures;
  if (workers.empty()) return figures;
  const ModeTraits* traits = FindModeTraits(mode);
  if (traits != nullptr && traits->barrier) {
    // A worker reports after its step's push: global_step is the step it pushed for (from 0).
    for (const JobProgress& progress : workers) {
      if (Stepped(progress)) figures.step = std::max(figures.step, progress.global_step() + 1);
    }
  } else {
    // A worker started again reports step 0 until its first step: the others count meanwhile.
    std::vector<const JobProgress*> counted =
        Preferring(workers, {RunningAndStepped, Running, Done});
    figures.step = counted[0]->step();
    for (const JobProgress* progress : counted) {
      figures.step = std::min(figures.step, progress->step());
    }
  }
  if (steps > 0) figures.step = std::min(figures.step, steps);
  int losses = 0;
  // Once none runs, of those that ended DONE (not of a lost worker's last, stale report).
  for (const JobProgress* progress :
       Preferring(workers, {RunningAndStepped, DoneAndStepped, Stepped})) {
    if (progress->step() == 0) continue;
    figures.loss += progress->loss();
    ++losses;
  }
  if (losses > 0) figures.loss /= losses;
  figures.stepped = losses > 0;
  for (const JobProgress& progress : workers) {
    // Its count, which a restarted worker carries on; else its rate over its own time since
    // its training loop began (a program job's worker).
    figures.examples += progress.examples() > 0
                            ? progress.examples()
                            : progress.examples_per_second() * progress.elapsed_seconds();
    figures.staleness += progress.staleness() / workers.size();
  }
  std::set<std::string> notes;
  std::vector<std::string> named;
  for (const JobProgress& progress : workers) {
    if (progress.note().empty()) continue;
    notes.insert(progress.note());
    named.push_back(absl::StrCat("worker:", progress.worker(), ": ", progress.note()));
  }
  figures.note = notes.size() == 1 ? *notes.begin() : absl::StrJoin(named, "; ");
  const double seconds = absl::ToDoubleSeconds(wall_time);
  figures.examples_per_second = seconds > 0 ? figures.examples / seconds : 0;
  return figures;
}

absl::optional<Eta> EtaOf(const JobSpec& spec, const JobFigures& figures, absl::Duration wall_time,
                          int64_t first_step) {
  wall_time = std::max(wall_time, absl::ZeroDuration());  // A clock set back.
  const int64_t run = figures.step - first_step;  // Steps this run took.
  absl::optional<Eta> eta;
  if (spec.steps() > 0 && run > 0) {
    eta = Eta{wall_time *
              (static_cast<double>(std::max<int64_t>(spec.steps() - figures.step, 0)) / run)};
  }
  if (spec.time_limit_s() > 0 && figures.step > 0) {
    const absl::Duration left =
        std::max(absl::Seconds(spec.time_limit_s()) - wall_time, absl::ZeroDuration());
    if (!eta.has_value() || left < eta->left) eta = Eta{left, /*time_limit=*/true};
  }
  return eta;
}

}  // namespace ps
