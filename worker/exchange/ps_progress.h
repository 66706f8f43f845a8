// What a ps exchange reports of the job's progress: the global step its pulls saw and the
// staleness of its pushes, as the shards answered them.
#ifndef PS_WORKER_EXCHANGE_PS_PROGRESS_H_
#define PS_WORKER_EXCHANGE_PS_PROGRESS_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/worker_session.h"
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
  void Pushed(const std::vector<PushResponse>& responses) {
    for (const PushResponse& response : responses) {
      staleness_sum_ += response.staleness();
      ++staleness_count_;
    }
  }

  int64_t global_step() const { return global_step_; }
  double mean_staleness() const {
    return staleness_count_ > 0 ? staleness_sum_ / staleness_count_ : 0;
  }

 private:
  const bool counts_steps_;
  int64_t global_step_ = 0;
  double staleness_sum_ = 0;
  int64_t staleness_count_ = 0;
};

}  // namespace ps

#endif  // PS_WORKER_EXCHANGE_PS_PROGRESS_H_
