// A job's figures from its workers' latest progress reports, with one definition each for
// psctl's progress line, summary.json and `psctl top`.
#ifndef PS_CTL_JOB_JOB_FIGURES_H_
#define PS_CTL_JOB_JOB_FIGURES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "proto/job.pb.h"
#include "proto/parameter.pb.h"
#include "proto/worker_service.pb.h"

namespace ps {

struct JobFigures {
  // The job's step as its `steps` limit counts it: in a mode with a barrier (SYNC) the shards'
  // steps (TensorFlow's global step: the step the most advanced worker pushed for, from 0, plus
  // one), whichever worker took part in them; in the others each worker
  // counts its own steps, and the job's step is that of the worker furthest behind among those
  // still running (among those DONE once none runs; a worker the job went on without no longer
  // counts).
  int64_t step = 0;
  // The last training batch's loss, averaged over the workers still running that have run a
  // step (over every worker that has, once none runs); 0 before any step.
  double loss = 0;
  // Examples trained on by every worker, and those over the job's wall time (since psctl
  // started it): what the job as a whole processes a second, finished workers' examples
  // included and their idle time not hidden.
  double examples = 0;
  double examples_per_second = 0;
  // The workers' mean staleness, averaged over the workers.
  double staleness = 0;
  // Whether some worker has run a step.
  bool stepped = false;
  // Why the job ended before its step limit (a stop rule, the time limit) or what went wrong
  // with its training (divergence, a loss that stopped falling): the workers' note where they
  // agree, else each worker's ("worker:0: ...; worker:1: ..."); empty when none has one.
  std::string note;
};

// The figures of `workers` (each one's latest report) of a job in `mode` after `wall_time` of
// it. `steps`: the job's `steps` (0: none or unknown), which the step does not pass (a SYNC
// worker that ends behind the shards reports the step it pulled, one past the last).
JobFigures FiguresOf(ConsistencyConfig::Mode mode, const std::vector<JobProgress>& workers,
                     absl::Duration wall_time, int64_t steps = 0);

// How long the job has left, and why: the steps left at the pace since `first_step` (the run's
// first: a resumed run's steps before it took no time of this one), or the time left of its
// time_limit_s where that ends it first. Empty while no step of the run has, or where neither
// bounds it (an `epochs` job: psctl does not know the shards' size). Never negative.
struct Eta {
  absl::Duration left;
  bool time_limit = false;  // time_limit_s ends the job first.
};
absl::optional<Eta> EtaOf(const JobSpec& spec, const JobFigures& figures, absl::Duration wall_time,
                          int64_t first_step = 0);

}  // namespace ps

#endif  // PS_CTL_JOB_JOB_FIGURES_H_
