// The calls that named one job on one shard: how many by method and status code, and their
// bytes. ParameterService counts each Pull, Push and PushPull as it answers it (once the job is
// found); /metrics and JobStats read the counts. Lock-free: a few relaxed atomic adds a call.
#ifndef PS_SERVER_JOB_TRAFFIC_H_
#define PS_SERVER_JOB_TRAFFIC_H_

#include <array>
#include <cstdint>

#include <grpcpp/support/status.h>

#include "common/metrics/metrics.h"  // Counter

namespace ps {

enum class JobMethod { kPull = 0, kPush = 1, kPushPull = 2 };
inline constexpr JobMethod kJobMethods[] = {JobMethod::kPull, JobMethod::kPush,
                                            JobMethod::kPushPull};
const char* JobMethodName(JobMethod method);  // "Pull", "Push", "PushPull".

// Thread-safe.
class JobTraffic {
 public:
  // One call of `method` answered with `code`, `received` bytes in and `sent` bytes out.
  void Count(JobMethod method, grpc::StatusCode code, int64_t received, int64_t sent);

  int64_t bytes_received() const { return received_.value(); }
  int64_t bytes_sent() const { return sent_.value(); }
  // REQUIRES: 0 <= code < kNumCodes.
  int64_t calls(JobMethod method, int code) const {
    return calls_[static_cast<int>(method)][code].value();
  }

  static constexpr int kNumCodes = 17;  // grpc::StatusCode OK .. UNAUTHENTICATED.

 private:
  static constexpr int kNumMethods = 3;
  std::array<std::array<Counter, kNumCodes>, kNumMethods> calls_;
  Counter received_, sent_;
};

}  // namespace ps

#endif  // PS_SERVER_JOB_TRAFFIC_H_
