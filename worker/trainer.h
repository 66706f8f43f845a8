// One worker's training for one job (docs/ARCHITECTURE.md section 4): the loop in trainer.cc reads
// its data shard, computes gradients, injects the JobSpec's straggler delays, evaluates and
// reports; how a step gets its weights and where its gradient goes is the job's exchange, chosen
// once from the JobSpec (worker/exchange/exchange.h lists them: the ps modes, SYNC's barrier steps,
// SSP's clocks, SOFTSYNC, ASYNC with Downpour's n_fetch, n_push and local accumulation, and ASYNC
// with overlapped communication). A new mode or family (all-reduce, averaging) is a new exchange in
// worker/exchange/ and a line in exchange_factory.cc, not a change to the loop. The loop stops at
// the first of: `steps`, `epochs` (converted to the same step count on every worker),
// `time_limit_s`, evaluation loss below `target_loss` (every worker evaluates, so in SYNC all stop
// at the same step), the job's step count as the exchange sees it (SYNC: the shards'), or a stop
// request. Worker 0, the chief, reports evaluation results.
#ifndef PS_WORKER_TRAINER_H_
#define PS_WORKER_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "common/clock.h"
#include "common/trace/trace_recorder.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"
#include "worker/allreduce/ring_link.h"
#include "worker/compute/compute_backend.h"

namespace ps {

struct TrainerOutcome {
  DataSummary data;
  std::string note;  // Empty: nothing to say beyond the progress reports' own note.
  // The exchange's bytes when the loop ended normally, its finishing included (-1: not known,
  // the last report's stand).
  int64_t bytes_sent = -1;
  int64_t bytes_received = -1;
};

struct TrainerContext {
  JobSpec spec;            // REQUIRES: ValidateJobSpec(spec, num_workers).ok().
  int worker = 0;
  int num_workers = 1;
  // The step the worker starts at (StartJobRequest.first_step): a resumed job's.
  int64_t first_step = 0;
  int incarnation = 0;  // StartJobRequest.incarnation: which start of this worker in the run.
  // StartJobRequest.elapsed_s: how long the run had gone on before this start; time_limit_s
  // counts from the run's start.
  absl::Duration elapsed_before;
  PsClient* ps = nullptr;                  // Not owned.
  ComputeBackend* backend = nullptr;       // Not owned; used by this thread only.
  RingLink* ring = nullptr;  // ALLREDUCE, LOCAL_SGD: links to the other workers; not owned.
  const std::atomic<bool>* stop = nullptr;  // Set to ask the loop to stop.
  // Called on the training thread after each step and evaluation; must not block for long.
  std::function<void(const JobProgress&)> report;
  // When given, filled for the report that ends the job: what it trained and evaluated on
  // (once the data is loaded), and a note on how training went (a loss that stopped falling).
  TrainerOutcome* outcome = nullptr;
  // Whose time the loop's timings, time limit and straggler delays are on (a test may pass a
  // SimulatedClock). Not owned.
  Clock* clock = Clock::Real();
  // JobSpec.trace: where the loop records each step's pull, compute, straggler delay, push and
  // their waits, and each evaluation (on `clock`'s time). Null: no trace. Not owned.
  TraceRecorder* trace = nullptr;
};

// Runs the job: OK when it reached its stop condition, CANCELLED when asked to stop, else the
// failure (bad data, a dead ps, a barrier that timed out) with its message. However it ends,
// the worker then leaves the job on the ps (LeaveJob), so that SSP peers stop waiting for it.
absl::Status RunTrainer(const TrainerContext& context);

}  // namespace ps

#endif  // PS_WORKER_TRAINER_H_
