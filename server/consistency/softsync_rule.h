// SOFTSYNC: n-softsync (Gupta et al. 2016). The shard applies the mean of every
// c = max(1, floor(N / n)) gradients that arrive, whichever workers sent them and whatever
// version they read; pulls never wait. With c = 1 each gradient is applied alone, as it arrives.
#ifndef PS_SERVER_CONSISTENCY_SOFTSYNC_RULE_H_
#define PS_SERVER_CONSISTENCY_SOFTSYNC_RULE_H_

#include <cstdint>

#include "server/consistency/consistency_rule.h"

namespace ps {

class SoftsyncRule : public ConsistencyRule {
 public:
  SoftsyncRule(const ConsistencyConfig& consistency, int num_workers);

  bool aggregates() const override { return aggregate_size_ > 1; }
  PushDecision Admit(const PushRequestHeader& header, int64_t staleness) override;
  // Dropped: no step waits for a worker's gradient, the next c others make the aggregate.
  PushDecision AdmitRepeat(const PushRequestHeader& header, int64_t staleness) override;

  int aggregate_size() const { return aggregate_size_; }

 private:
  const int aggregate_size_;  // c.
};

}  // namespace ps

#endif  // PS_SERVER_CONSISTENCY_SOFTSYNC_RULE_H_
