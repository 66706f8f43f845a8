#include "worker/exchange/downpour.h"
#include "common/job/consistency_modes.h"

#include <algorithm>
#include <vector>

namespace ps {

DownpourSchedule DownpourSchedule::FromJobSpec(const JobSpec& spec) {
  DownpourSchedule schedule;
  const ModeTraits* mode = FindModeTraits(spec.consistency().mode());
  if (mode == nullptr || !mode->downpour) return schedule;
  schedule.n_fetch = std::max(1, spec.downpour().n_fetch());
  schedule.n_push = std::max(1, spec.downpour().n_push());
  schedule.local_learning_rate = spec.downpour().local_learning_rate();
  schedule.accumulate = true;
  return schedule;
}

void Accrue(const DownpourSchedule& schedule, const HostVariables& gradients,
            HostVariables* accumulated, HostVariables* weights) {
  const int n_push = schedule.n_push;
  const float local_rate = schedule.local_learning_rate;
  for (size_t v = 0; v < gradients.arrays().size(); ++v) {
    const std::vector<float>& g = gradients.arrays()[v];
    std::vector<float>& a = accumulated->arrays()[v];
    std::vector<float>& w = weights->arrays()[v];
    for (size_t i = 0; i < g.size(); ++i) {
      a[i] += g[i] / n_push;
      if (local_rate > 0) w[i] -= local_rate * g[i];
    }
  }
}

}  // namespace ps
