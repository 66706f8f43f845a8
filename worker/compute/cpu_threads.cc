#include "worker/compute/cpu_threads.h"

#include <cblas.h>

namespace ps {

void SetCpuComputeThreads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

}  // namespace ps
