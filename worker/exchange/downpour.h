// Downpour SGD's worker side (Dean et al. 2012), as the ps exchanges follow it: pull every
// n_fetch steps; push every n_push steps the mean of the gradients accumulated since the last
// push; with local_learning_rate, also apply each gradient to the local copy of the weights.
// Outside ASYNC a worker pulls and pushes every step and accumulates nothing.
#ifndef PS_WORKER_EXCHANGE_DOWNPOUR_H_
#define PS_WORKER_EXCHANGE_DOWNPOUR_H_

#include <cstdint>

#include "proto/job.pb.h"
#include "worker/host_variables.h"

namespace ps {

struct DownpourSchedule {
  int n_fetch = 1;
  int n_push = 1;
  float local_learning_rate = 0;  // 0: the local weights change only by pulls.
  bool accumulate = false;        // Gradients add up between pushes (ASYNC).

  // ASYNC: spec.downpour() (0 read as 1); every other mode: the defaults above.
  static DownpourSchedule FromJobSpec(const JobSpec& spec);

  bool PullsBefore(int64_t step) const { return step % n_fetch == 0; }
  bool PushesAfter(int64_t step) const { return (step + 1) % n_push == 0; }
};

// accumulated += gradients / n_push and, with a local learning rate,
// weights -= local_learning_rate * gradients. REQUIRES: all three hold the same variables.
void Accrue(const DownpourSchedule& schedule, const HostVariables& gradients,
            HostVariables* accumulated, HostVariables* weights);

}  // namespace ps

#endif  // PS_WORKER_EXCHANGE_DOWNPOUR_H_
