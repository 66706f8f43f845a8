// How a worker's training step gets its weights and where its gradient goes: the part of the
// training loop that a consistency mode decides (docs/ARCHITECTURE.md sections 4-5). The loop
// (worker/trainer.cc) reads data, computes, evaluates and reports; each step it calls
//   BeforeCompute(step)  -> weights() hold the values the step computes on;
//   AfterCompute(step, gradients)
// and once at the end Finish(). One implementation per family, each in a file of its own:
//   PsExchange            the ps modes (SYNC, SSP, SOFTSYNC, and ASYNC with Downpour's n_fetch,
//                         n_push and local accumulation), pulls and pushes in the step;
//   OverlappedPsExchange  ASYNC with overlap_communication: a step's push and pull run in the
//                         background while the next step computes;
//   RingExchange          ALLREDUCE and LOCAL_SGD: the workers average among themselves over a
//                         ring (gradients every step, or models every local_steps steps);
//   EasgdExchange         EASGD: a copy of its own, pulled towards the shards' center every
//                         easgd_period steps, the center towards it.
// A new family is a new class in a file of its own and a line in exchange_factory.cc; the loop
// does not change.
//
// Not thread-safe: the training thread makes every call.
#ifndef PS_WORKER_EXCHANGE_EXCHANGE_H_
#define PS_WORKER_EXCHANGE_EXCHANGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/host_variables.h"

namespace ps {

// The rows of a sparse model's table that one step touches (worker/model/sparse_model.h). The
// loop sets `keys` (the batch's distinct keys) before BeforeCompute, which fills `values` (keys x
// width) with the rows pulled with the weights; the model writes `gradients` (the same shape)
// before AfterCompute, which pushes them with the dense gradient. Only PsExchange takes them
// (exchange_factory.cc): the other families keep no model on the shards, or keep copies of it.
struct SparseStepRows {
  std::string table;
  int64_t width = 0;
  std::vector<uint64_t> keys;
  std::vector<float> values;
  std::vector<float> gradients;
};

// A job whose data is handed out (DataSpec.sharding DYNAMIC): the numbers of the batches whose
// gradients the exchange has been given and not yet pushed. The loop appends each step's batch
// before AfterCompute; the push that carries their gradient takes them (and empties this), so
// that the first shard takes them as trained on exactly when it admits that gradient. Only the
// exchanges of the modes whose shards hold the model take them (exchange_factory.cc).
using StepBatches = std::vector<int64_t>;

class Exchange {
 public:
  virtual ~Exchange() = default;

  // Makes weights() hold the values step `step` (this worker's count, from 0) computes on; may
  // wait (a barrier, a staleness bound). Errors end the job: a dead ps, a barrier that timed out.
  virtual absl::Status BeforeCompute(int64_t step) = 0;
  // Takes step `step`'s gradient (every variable): sends it, adds it up, or both. `gradients`
  // may be changed by the next step's compute once this returns.
  virtual absl::Status AfterCompute(int64_t step, const HostVariables& gradients) = 0;
  // Ends what is still in flight (the last push is in). Called once, after the last step.
  virtual absl::Status Finish() = 0;

  // The values the current step computes on and the chief evaluates.
  virtual const HostVariables& weights() const = 0;
  // The step of the job that weights() begin, where the job counts steps apart from the worker
  // (SYNC counts the shards' steps, as SyncReplicasOptimizer its global step: with backup
  // workers a worker's own count lags behind); else -1. The loop ends when it reaches the
  // job's step limit.
  virtual int64_t job_step() const { return -1; }
  // The job's progress as the last values brought saw it (SYNC: the step; else the oldest
  // shard version), for progress reports.
  virtual int64_t global_step() const = 0;
  // The mean staleness of the gradients sent so far, as the ps reported it (0 before any).
  virtual double mean_staleness() const = 0;
  // How long its pulls have waited at the shards so far (barriers, staleness bounds), as they
  // reported it; part of the time BeforeCompute and AfterCompute took, or, where pulls run in
  // the background, of the time they overlapped.
  virtual absl::Duration parked_time() const = 0;
  // Bytes it has sent and received so far for this worker (serialized messages, every attempt,
  // without gRPC's framing): a PS worker moves about twice the model each step, a ring member
  // 2 (N - 1) / N of it.
  virtual int64_t bytes_sent() const = 0;
  virtual int64_t bytes_received() const = 0;
};

}  // namespace ps

#endif  // PS_WORKER_EXCHANGE_EXCHANGE_H_
