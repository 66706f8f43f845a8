#include "server/consistency/rule_factory.h"

#include <memory>

#include "server/consistency/async_rule.h"
#include "server/consistency/delayed_rule.h"
#include "server/consistency/publish_rule.h"
#include "server/consistency/softsync_rule.h"
#include "server/consistency/ssp_rule.h"
#include "server/consistency/sync_rule.h"

namespace ps {

std::unique_ptr<ConsistencyRule> CreateConsistencyRule(const ParameterSpec& spec) {
  const ConsistencyConfig& consistency = spec.consistency();
  const int num_workers = spec.num_workers();
  switch (consistency.mode()) {
    case ConsistencyConfig::SYNC:
      return std::make_unique<SyncRule>(consistency, num_workers);
    case ConsistencyConfig::ASYNC:
    case ConsistencyConfig::EASGD:  // Each elastic difference added as it arrives.
      return std::make_unique<AsyncRule>(consistency, num_workers);
    case ConsistencyConfig::SSP:
      return std::make_unique<SspRule>(consistency, num_workers);
    case ConsistencyConfig::SOFTSYNC:
      return std::make_unique<SoftsyncRule>(consistency, num_workers);
    case ConsistencyConfig::ALLREDUCE:
    case ConsistencyConfig::LOCAL_SGD:
      return std::make_unique<PublishRule>(num_workers);
    case ConsistencyConfig::DELAYED:
      return std::make_unique<DelayedRule>(consistency.delay(), num_workers);
    case ConsistencyConfig::MODE_UNSPECIFIED:
    case ConsistencyConfig_Mode_ConsistencyConfig_Mode_INT_MIN_SENTINEL_DO_NOT_USE_:
    case ConsistencyConfig_Mode_ConsistencyConfig_Mode_INT_MAX_SENTINEL_DO_NOT_USE_:
      return nullptr;
  }
  return nullptr;  // A value outside the enum.
}

}  // namespace ps
