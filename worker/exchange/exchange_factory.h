// Where a job's exchange is chosen: once, from its JobSpec (see exchange.h).
#ifndef PS_WORKER_EXCHANGE_EXCHANGE_FACTORY_H_
#define PS_WORKER_EXCHANGE_EXCHANGE_FACTORY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "proto/job.pb.h"
#include "proto/parameter.pb.h"
#include "worker/allreduce/ring_link.h"
#include "worker/exchange/exchange.h"

namespace ps {

struct ExchangeContext {
  JobSpec spec;             // REQUIRES: valid (ValidateJobSpec).
  ParameterSpec parameters;  // The ps side of the job, created on every shard.
  std::vector<VariableDef> variables;  // The model's.
  int worker = 0;
  int incarnation = 0;     // StartJobRequest.incarnation.
  PsClient* ps = nullptr;  // Not owned; outlives the exchange.
  int64_t step_limit = 0;  // The loop runs steps [first_step, step_limit).
  int64_t first_step = 0;  // A resumed run's (StartJobRequest.first_step).
  // ALLREDUCE and LOCAL_SGD: this worker's links to the others (not owned; outlives the
  // exchange); null elsewhere.
  RingLink* ring = nullptr;
  // A sparse model's step rows (exchange.h; not owned, outlives the exchange); null for dense
  // models.
  SparseStepRows* sparse = nullptr;
  // A job whose data is handed out: its step batches (exchange.h; not owned, outlives the
  // exchange); null otherwise.
  StepBatches* step_batches = nullptr;
};

// The exchange of the job's mode and options. INVALID_ARGUMENT when the worker's session
// cannot be made (see WorkerSession::Create), or for sparse rows in a family or Downpour schedule
// that cannot carry them (ValidateJobSpec refuses such jobs first).
absl::StatusOr<std::unique_ptr<Exchange>> CreateExchange(const ExchangeContext& context);

}  // namespace ps

#endif  // PS_WORKER_EXCHANGE_EXCHANGE_FACTORY_H_
