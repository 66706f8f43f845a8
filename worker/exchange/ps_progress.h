// What a ps exchange reports of the job's progress: the global step its pulls saw, the
// staleness of its pushes and how long its pulls waited at the shards, as the shards answered.
#ifndef PS_WORKER_EXCHANGE_PS_PROGRESS_H_
#define PS_WORKER_EXCHANGE_PS_PROGRESS_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "common/client/worker_session.h"
#include "proto/ps_service.pb.h"

namespace ps {

class PsProgress {
 public:
  // `counts_steps`: the job counts steps on the shards (SYNC), and its global step is the
  // pulled step; else it is the oldest version among the shards' values.
  explicit PsProgress(bool counts_steps) : counts_steps_(counts_steps) {}

  void Pulled(const WorkerSession::PullResult& pulled) {
    global_step_ = counts_steps_ ? pulled.step
                                 : *std::min_element(pulled.versions.begin(), pulled.versions.end());
  }
  // A pull's answer came: it had waited at the shards for `pulled.parked`. Called when the call
  // returns, which may be a step before Pulled takes its values (a PushPull's).
  void Answered(const WorkerSession::PullResult& pulled) { parked_time_ += pulled.parked; }
  void Pushed(const std::vector<PushResponse>& responses) {
    for (const PushResponse& response : responses) {
      staleness_sum_ += response.staleness();
      ++staleness_count_;
    }
  }

  int64_t global_step() const { return global_step_; }
  absl::Duration parked_time() const { return parked_time_; }
  double mean_staleness() const {
    return staleness_count_ > 0 ? staleness_sum_ / staleness_count_ : 0;
  }

 private:
  const bool counts_steps_;
  int64_t global_step_ = 0;
  double staleness_sum_ = 0;
  int64_t staleness_count_ = 0;
  absl::Duration parked_time_;
};

}  // namespace ps

#endif  // PS_WORKER_EXCHANGE_PS_PROGRESS_H_
