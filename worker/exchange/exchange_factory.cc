#include "worker/exchange/exchange_factory.h"

#include <utility>

#include "absl/strings/str_cat.h"
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
  const DownpourSchedule downpour = DownpourSchedule::FromJobSpec(spec);
  if (context.sparse != nullptr) {
    const ConsistencyConfig::Mode mode = spec.consistency().mode();
    const bool ps_mode = mode == ConsistencyConfig::SYNC || mode == ConsistencyConfig::SSP ||
                         mode == ConsistencyConfig::SOFTSYNC || mode == ConsistencyConfig::ASYNC;
    if (!ps_mode || spec.downpour().overlap_communication() || downpour.n_fetch != 1 ||
        downpour.n_push != 1 || downpour.local_learning_rate != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a sparse model's rows go with every step's pull and push: run it in SYNC, SSP, "
          "SOFTSYNC or ASYNC without downpour settings, not ",
          ConsistencyConfig::Mode_Name(mode),
          spec.downpour().ByteSizeLong() > 0 ? " with them" : ""));
    }
  }
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
  if (spec.consistency().mode() == ConsistencyConfig::ASYNC &&
      spec.downpour().overlap_communication()) {
    return std::make_unique<OverlappedPsExchange>(*std::move(session), context.variables,
                                                  downpour, context.step_limit);
  }
  PsExchangeOptions options;
  options.downpour = downpour;
  options.counts_steps = spec.consistency().mode() == ConsistencyConfig::SYNC;
  options.step_limit = context.step_limit;
  options.sparse = context.sparse;
  return std::make_unique<PsExchange>(*std::move(session), context.variables, options);
}

}  // namespace ps
