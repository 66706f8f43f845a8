#include "server/consistency/delayed_rule.h"

namespace ps {

PushDecision DelayedRule::Admit(const PushRequestHeader& header, int64_t staleness) {
  (void)header;
  (void)staleness;
  return PushDecision::Of(PushDecision::kApply);
}

}  // namespace ps
