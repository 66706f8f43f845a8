// Where a consistency mode's rule is chosen: once per job and shard, from its spec.
#ifndef PS_SERVER_CONSISTENCY_RULE_FACTORY_H_
#define PS_SERVER_CONSISTENCY_RULE_FACTORY_H_

#include <memory>

#include "proto/parameter.pb.h"
#include "server/consistency/consistency_rule.h"

namespace ps {

// The rule of `spec.consistency().mode()`, for `spec.num_workers()` workers; null for a mode
// without one (MODE_UNSPECIFIED), which the job schema's checks refuse before this is reached.
std::unique_ptr<ConsistencyRule> CreateConsistencyRule(const ParameterSpec& spec);

}  // namespace ps

#endif  // PS_SERVER_CONSISTENCY_RULE_FACTORY_H_
