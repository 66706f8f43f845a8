#include "worker/exchange/exchange_factory.h"

#include <utility>

#include "worker/exchange/downpour.h"
#include "worker/exchange/easgd_exchange.h"
#include "worker/exchange/overlapped_ps_exchange.h"
#include "worker/exchange/ps_exchange.h"
#include "worker/exchange/ring_exchange.h"

namespace ps {

absl::StatusOr<std::unique_ptr<Exchange>> CreateExchange(const ExchangeContext& context) {
  absl::StatusOr<std::unique_ptr<WorkerSession>> session =
      WorkerSession::Create(context.ps, context.parameters, context.worker, context.incarnation);
  if (!session.ok()) return session.status();
  const JobSpec& spec = context.spec;
  if (spec.consistency().mode() == ConsistencyConfig::ALLREDUCE ||
      spec.consistency().mode() == ConsistencyConfig::LOCAL_SGD) {
    absl::StatusOr<std::unique_ptr<RingExchange>> ring = RingExchange::Create(
        *std::move(session), context.ring, context.variables, spec, context.worker,
        context.first_step);
    if (!ring.ok()) return ring.status();
    return std::unique_ptr<Exchange>(*std::move(ring));
  }
  if (spec.consistency().mode() == ConsistencyConfig::EASGD) {
    absl::StatusOr<std::unique_ptr<EasgdExchange>> easgd =
        EasgdExchange::Create(*std::move(session), context.variables, spec);
    if (!easgd.ok()) return easgd.status();
    return std::unique_ptr<Exchange>(*std::move(easgd));
  }
  const DownpourSchedule downpour = DownpourSchedule::FromJobSpec(spec);
  if (spec.consistency().mode() == ConsistencyConfig::ASYNC &&
      spec.downpour().overlap_communication()) {
    return std::make_unique<OverlappedPsExchange>(*std::move(session), context.variables,
                                                  downpour, context.step_limit);
  }
  PsExchangeOptions options;
  options.downpour = downpour;
  options.counts_steps = spec.consistency().mode() == ConsistencyConfig::SYNC;
  options.step_limit = context.step_limit;
  return std::make_unique<PsExchange>(*std::move(session), context.variables, options);
}

}  // namespace ps
