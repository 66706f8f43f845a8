// One worker's training loop for one job, for every consistency mode (DESIGN.md sections 5-6):
//   SYNC      pull for step t (waits for the barrier), compute, push tagged with the step;
//   ASYNC     Downpour: pull every n_fetch steps, apply each gradient to the local copy with
//             local_learning_rate, push the mean of the accumulated gradients every n_push steps;
//             with overlap_communication, a step's push and pull run in the background while
//             the next step computes (on the weights the exchange before brought), and are
//             finished after that step's compute;
//   SSP       pull at clock c (waits while c is more than ssp_bound ahead), push completes c;
//   SOFTSYNC  pull, compute, push (the ps averages every c gradients).
// Stragglers from the JobSpec slow the listed workers down. The loop stops at the first of:
// `steps`, `epochs` (converted to the same step count on every worker), `time_limit_s`,
// evaluation loss below `target_loss` (every worker evaluates, so in SYNC all stop at the
// same step), or a stop request. Worker 0, the chief, reports evaluation results.
#ifndef PS_WORKER_TRAINER_H_
#define PS_WORKER_TRAINER_H_

#include <atomic>
#include <functional>

#include "absl/status/status.h"
#include "common/ps_client.h"
#include "common/worker_session.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"
#include "worker/compute/compute_backend.h"

namespace ps {

struct TrainerContext {
  JobSpec spec;            // REQUIRES: ValidateJobSpec(spec, num_workers).ok().
  int worker = 0;
  int num_workers = 1;
  PsClient* ps = nullptr;                  // Not owned.
  ComputeBackend* backend = nullptr;       // Not owned; used by this thread only.
  const std::atomic<bool>* stop = nullptr;  // Set to ask the loop to stop.
  // Called on the training thread after each step and evaluation; must not block for long.
  std::function<void(const JobProgress&)> report;
};

// Runs the job: OK when it reached its stop condition, CANCELLED when asked to stop, else the
// failure (bad data, a dead ps, a barrier that timed out) with its message. However it ends,
// the worker then leaves the job on the ps (LeaveJob), so that SSP peers stop waiting for it.
absl::Status RunTrainer(const TrainerContext& context);

}  // namespace ps

#endif  // PS_WORKER_TRAINER_H_
