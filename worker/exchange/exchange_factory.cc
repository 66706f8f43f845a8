#include "worker/exchange/exchange_factory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/job/consistency_modes.h"
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
  const ConsistencyConfig::Mode mode = spec.consistency().mode();
  const ModeTraits* traits = FindModeTraits(mode);
  if (traits == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "consistency.mode is ", ConsistencyConfig::Mode_Name(mode), ": no exchange for it"));
  }
  if (context.sparse != nullptr &&
      (!traits->shards_hold_the_model || spec.downpour().overlap_communication() ||
       downpour.n_fetch != 1 || downpour.n_push != 1 || downpour.local_learning_rate != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a sparse model's rows go with every step's pull and push: run it in ",
        ModeNames([](const ModeTraits& m) { return m.shards_hold_the_model; }, "or"),
        " without downpour settings, not ", ConsistencyConfig::Mode_Name(mode),
        spec.downpour().ByteSizeLong() > 0 ? " with them" : ""));
  }
  PsExchangeOptions options;
  options.downpour = downpour;
  options.step_limit = context.step_limit;
  options.sparse = context.sparse;
  options.step_batches = context.step_batches;
  if (context.step_batches != nullptr && !traits->shards_hold_the_model) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.sharding DYNAMIC needs a mode whose workers push gradients to the shards, not ",
        ConsistencyConfig::Mode_Name(mode)));
  }
  switch (mode) {  // No default: a mode without an exchange does not build.
    case ConsistencyConfig::ALLREDUCE:
    case ConsistencyConfig::LOCAL_SGD: {
      absl::StatusOr<std::unique_ptr<RingExchange>> ring = RingExchange::Create(
          *std::move(session), context.ring, context.variables, spec, context.worker,
          context.first_step);
      if (!ring.ok()) return ring.status();
      return std::unique_ptr<Exchange>(*std::move(ring));
    }
    case ConsistencyConfig::EASGD: {
      absl::StatusOr<std::unique_ptr<EasgdExchange>> easgd =
          EasgdExchange::Create(*std::move(session), context.variables, spec);
      if (!easgd.ok()) return easgd.status();
      return std::unique_ptr<Exchange>(*std::move(easgd));
    }
    case ConsistencyConfig::ASYNC:
      if (spec.downpour().overlap_communication()) {
        return std::make_unique<OverlappedPsExchange>(*std::move(session), context.variables,
                                                      downpour, context.step_limit,
                                                      context.step_batches);
      }
      return std::make_unique<PsExchange>(*std::move(session), context.variables, options);
    case ConsistencyConfig::SYNC:
      options.counts_steps = true;
      return std::make_unique<PsExchange>(*std::move(session), context.variables, options);
    case ConsistencyConfig::SSP:
    case ConsistencyConfig::SOFTSYNC:
    case ConsistencyConfig::DELAYED:
      return std::make_unique<PsExchange>(*std::move(session), context.variables, options);
    case ConsistencyConfig::MODE_UNSPECIFIED:
    case ConsistencyConfig_Mode_ConsistencyConfig_Mode_INT_MIN_SENTINEL_DO_NOT_USE_:
    case ConsistencyConfig_Mode_ConsistencyConfig_Mode_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "consistency.mode is ", ConsistencyConfig::Mode_Name(mode), ": no exchange for it"));
}

}  // namespace ps
