#include "common/trace/trace_recorder.h"

#include <algorithm>
#include <limits>

#include "absl/strings/ascii.h"

namespace ps {

void TraceRecorder::Record(TraceEvent::Kind kind, absl::Time start, absl::Time end, int64_t step,
                           int worker, int64_t staleness, int64_t version) {
  const int64_t start_us = absl::ToUnixMicros(start);
  const int64_t duration_us = std::max<int64_t>(0, absl::ToUnixMicros(end) - start_us);
  const Event event{start_us, duration_us, step, staleness, version, worker, kind};
  absl::MutexLock lock(&mu_);
  if (max_events_ <= 0) {
    ++dropped_;
  } else if (static_cast<int64_t>(events_.size()) < max_events_) {
    if (events_.empty()) events_.reserve(std::min<int64_t>(max_events_, 4096));
    events_.push_back(event);
  } else {
    events_[next_] = event;  // Replaces the oldest.
    next_ = (next_ + 1) % events_.size();
    ++dropped_;
  }
}

Trace TraceRecorder::Snapshot(absl::Duration last, int64_t max_events) const {
  std::vector<Event> events;
  Trace trace;
  {
    absl::MutexLock lock(&mu_);
    // Oldest first.
    events.reserve(events_.size());
    events.insert(events.end(), events_.begin() + next_, events_.end());
    events.insert(events.end(), events_.begin(), events_.begin() + next_);
    trace.set_dropped(dropped_);
  }
  size_t first = 0;
  if (max_events > 0 && static_cast<int64_t>(events.size()) > max_events) {
    first = events.size() - max_events;
  }
  int64_t from_us = std::numeric_limits<int64_t>::min();
  if (last > absl::ZeroDuration() && !events.empty()) {
    int64_t newest_us = std::numeric_limits<int64_t>::min();
    for (const Event& event : events) {
      newest_us = std::max(newest_us, event.start_us + event.duration_us);
    }
    from_us = newest_us - absl::ToInt64Microseconds(last);
  }
  trace.mutable_events()->Reserve(static_cast<int>(events.size() - first));
  for (size_t i = first; i < events.size(); ++i) {
    const Event& event = events[i];
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
  return trace;
}

Trace TraceRecorder::Snapshot(const TraceRequest& request) const {
  return Snapshot(absl::Microseconds(std::max<int64_t>(0, request.last_us())),
                  std::max<int64_t>(0, request.max_events()));
}

std::string TraceKindName(TraceEvent::Kind kind) {
  return absl::AsciiStrToLower(TraceEvent::Kind_Name(kind));
}

}  // namespace ps
