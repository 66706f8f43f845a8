// Tests' shorthand for a trace's events (proto/trace.proto).
#ifndef PS_COMMON_TRACE_TRACE_TESTING_H_
#define PS_COMMON_TRACE_TRACE_TESTING_H_

#include <cstdint>

#include "proto/trace.pb.h"

namespace ps {

// An event of `kind` from `start_us` for `duration_us`, of `worker`'s `step`.
inline TraceEvent MakeTraceEvent(TraceEvent::Kind kind, int64_t start_us, int64_t duration_us,
                                 int64_t step, int worker = 0, int64_t staleness = 0,
                                 int64_t version = 0) {
  TraceEvent event;
  event.set_kind(kind);
  event.set_start_us(start_us);
  event.set_duration_us(duration_us);
  event.set_step(step);
  event.set_worker(worker);
  event.set_staleness(staleness);
  event.set_version(version);
  return event;
}

}  // namespace ps

#endif  // PS_COMMON_TRACE_TRACE_TESTING_H_
