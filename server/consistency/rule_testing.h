// Requests for driving a ConsistencyRule call by call in its tests.
#ifndef PS_SERVER_CONSISTENCY_RULE_TESTING_H_
#define PS_SERVER_CONSISTENCY_RULE_TESTING_H_

#include <cstdint>

#include "proto/ps_service.pb.h"

namespace ps {
namespace rule_testing {

// A push from `worker` computed on `read_version`, for SYNC's `step` and SSP's `clock`.
inline PushRequestHeader PushFrom(int worker, int64_t read_version = 0, int64_t step = 0,
                                  int64_t clock = 0) {
  PushRequestHeader header;
  header.set_worker(worker);
  header.set_read_version(read_version);
  header.set_step(step);
  header.set_clock(clock);
  return header;
}

inline PullRequest PullFor(int worker, int64_t step = 0, int64_t clock = 0) {
  PullRequest request;
  request.set_worker(worker);
  request.set_step(step);
  request.set_clock(clock);
  return request;
}

}  // namespace rule_testing
}  // namespace ps

#endif  // PS_SERVER_CONSISTENCY_RULE_TESTING_H_
