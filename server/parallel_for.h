// Splitting an elementwise loop over the machine's cores (the optimizer's update of a large
// slice, which would otherwise run on one core while the others wait for the push's answer).
#ifndef PS_SERVER_PARALLEL_FOR_H_
#define PS_SERVER_PARALLEL_FOR_H_

#include <cstdint>
#include <functional>

namespace ps {

// Calls fn(begin, end) on disjoint ranges that cover [0, n), at most one per core and none
// shorter than `min_grain` (so that small loops stay on the calling thread): one on the calling
// thread, the others on a process-wide pool of helper threads. Returns when every call has
// returned. `fn` must be safe to run concurrently on disjoint ranges and must not call
// ParallelFor itself.
void ParallelFor(int64_t n, int64_t min_grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace ps

#endif  // PS_SERVER_PARALLEL_FOR_H_
