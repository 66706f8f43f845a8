#include "server/consistency/softsync_rule.h"

#include <algorithm>

namespace ps {

SoftsyncRule::SoftsyncRule(const ConsistencyConfig& consistency, int num_workers)
    : ConsistencyRule(num_workers),
      aggregate_size_(std::max(1, num_workers / std::max(1, consistency.softsync_n()))) {}

PushDecision SoftsyncRule::Admit(const PushRequestHeader& header, int64_t staleness) {
  (void)staleness;
  if (!aggregates()) return PushDecision::Of(PushDecision::kApply);
  open_aggregate_.push_back({header.worker(), header.read_version()});
  return PushDecision::Of(static_cast<int>(open_aggregate_.size()) >= aggregate_size_
                              ? PushDecision::kApplyAggregate
                              : PushDecision::kAccumulate);
}

PushDecision SoftsyncRule::AdmitRepeat(const PushRequestHeader& header, int64_t staleness) {
  (void)header;
  (void)staleness;
  return PushDecision::Drop("batch_seen");
}

}  // namespace ps
