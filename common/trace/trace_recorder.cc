#include "common/trace/trace_recorder.h"

#include <algorithm>
#include <limits>

namespace ps {

void TraceRecorder::Record(TraceEvent::Kind kind, absl::Time start, absl::Time end, int64_t step,
                           int worker, int64_t staleness, int64_t version) {
  const int64_t start_us = absl::ToUnixMicros(start);
  const int64_t duration_us = std::max<int64_t>(0, absl::ToUnixMicros(end) - start_us);
  absl::MutexLock lock(&mu_);
  if (static_cast<int64_t>(events_.size()) >= max_events_) {
    ++dropped_;
    return;
  }
  if (events_.empty()) events_.reserve(std::min<int64_t>(max_events_, 4096));
  events_.push_back({start_us, duration_us, step, staleness, version, worker, kind});
}

Trace TraceRecorder::Snapshot(absl::Duration last) const {
  Trace trace;
  absl::MutexLock lock(&mu_);
  int64_t from_us = std::numeric_limits<int64_t>::min();
  if (last > absl::ZeroDuration()) {
    int64_t newest_us = std::numeric_limits<int64_t>::min();
    for (const Event& event : events_) {
      newest_us = std::max(newest_us, event.start_us + event.duration_us);
    }
    if (!events_.empty()) from_us = newest_us - absl::ToInt64Microseconds(last);
  }
  for (const Event& event : events_) {
    if (event.start_us + event.duration_us < from_us) continue;
    TraceEvent* out = trace.add_events();
    out->set_kind(event.kind);
    out->set_start_us(event.start_us);
    out->set_duration_us(event.duration_us);
    out->set_step(event.step);
    out->set_worker(event.worker);
    out->set_staleness(event.staleness);
    out->set_version(event.version);
  }
  trace.set_dropped(dropped_);
  return trace;
}

}  // namespace ps
