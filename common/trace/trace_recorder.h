// A job's timeline on one task (JobSpec.trace, proto/trace.proto): spans of a worker's training
// loop or a shard's updates, kept in memory until psctl or the dashboard asks for them
// (GetTrace on the Worker and ParameterServer services).
//
// Cost: a job without a trace has no recorder (callers hold a null pointer and skip, so it costs
// nothing); one with a trace takes a lock and stores 48 bytes per event. A recorder keeps its
// job's newest `max_events` events (a ring: each event past that replaces the oldest, counted as
// dropped), so a long job's trace stays bounded (200000 events: 9.2 MiB) and its last seconds are
// always there for the dashboard.
//
// Thread-safe.
#ifndef PS_COMMON_TRACE_TRACE_RECORDER_H_
#define PS_COMMON_TRACE_TRACE_RECORDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/trace.pb.h"

namespace ps {

class TraceRecorder {
 public:
  static constexpr int64_t kMaxEvents = 200000;

  // `clock` (not owned, outlives the recorder) is whose time the events are on.
  explicit TraceRecorder(Clock* clock, int64_t max_events = kMaxEvents)
      : clock_(clock), max_events_(max_events) {}

  absl::Time Now() const { return clock_->Now(); }

  // One span, from `start` to `end`, of `worker`'s `step`; `staleness` and `version` as
  // TraceEvent's (0 where they do not apply).
  void Record(TraceEvent::Kind kind, absl::Time start, absl::Time end, int64_t step, int worker,
              int64_t staleness = 0, int64_t version = 0) ABSL_LOCKS_EXCLUDED(mu_);

  // The events kept, oldest first, and the count dropped. With `last` > 0, only those that end
  // within `last` of the newest event's end; with `max_events` > 0, at most that many of the
  // newest. The events are copied under the lock and made into the proto outside it.
  Trace Snapshot(absl::Duration last = absl::ZeroDuration(), int64_t max_events = 0) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Snapshot as a GetTrace request asks for it (its last_us and max_events; below 0: as 0).
  Trace Snapshot(const TraceRequest& request) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Event {
    int64_t start_us;
    int64_t duration_us;
    int64_t step;
    int64_t staleness;
    int64_t version;
    int32_t worker;
    TraceEvent::Kind kind;
  };

  Clock* const clock_;
  const int64_t max_events_;
  mutable absl::Mutex mu_;
  // A ring once full: the oldest event at next_ (0 until then).
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// "pull", "apply", ...: how traces name a kind of event (its enum name in lower case).
std::string TraceKindName(TraceEvent::Kind kind);

}  // namespace ps

#endif  // PS_COMMON_TRACE_TRACE_RECORDER_H_
