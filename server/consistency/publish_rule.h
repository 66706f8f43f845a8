// ALLREDUCE and LOCAL_SGD: the workers train on copies of their own and average among
// themselves (worker/exchange/ring_exchange.h); a shard holds the initial values they pull
// once, and the model the chief (worker 0) publishes, whose values replace the shard's
// (kAssign). A push from another worker is refused, as it would overwrite the chief's model.
#ifndef PS_SERVER_CONSISTENCY_PUBLISH_RULE_H_
#define PS_SERVER_CONSISTENCY_PUBLISH_RULE_H_

#include <cstdint>

#include "server/consistency/consistency_rule.h"

namespace ps {

class PublishRule : public ConsistencyRule {
 public:
  explicit PublishRule(int num_workers) : ConsistencyRule(num_workers) {}

  PushDecision Admit(const PushRequestHeader& header, int64_t staleness) override;
};

}  // namespace ps

#endif  // PS_SERVER_CONSISTENCY_PUBLISH_RULE_H_
