#include "common/trace/trace_recorder.h"

#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/testing/simulated_clock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(TraceRecorderTest, KeepsEventsInOrderWithTheirFields) {
  SimulatedClock clock(absl::FromUnixSeconds(1000));
  TraceRecorder recorder(&clock);
  const absl::Time start = recorder.Now();
  clock.Advance(absl::Microseconds(250));
  recorder.Record(TraceEvent::COMPUTE, start, recorder.Now(), 7, 2);
  recorder.Record(TraceEvent::APPLY, start, start + absl::Milliseconds(1), 8, 3, 4, 99);
  const Trace trace = recorder.Snapshot();
  ASSERT_EQ(trace.events_size(), 2);
  EXPECT_EQ(trace.dropped(), 0);
  const TraceEvent& compute = trace.events(0);
  EXPECT_EQ(compute.kind(), TraceEvent::COMPUTE);
  EXPECT_EQ(compute.start_us(), int64_t{1000} * 1000000);
  EXPECT_EQ(compute.duration_us(), 250);
  EXPECT_EQ(compute.step(), 7);
  EXPECT_EQ(compute.worker(), 2);
  const TraceEvent& apply = trace.events(1);
  EXPECT_EQ(apply.kind(), TraceEvent::APPLY);
  EXPECT_EQ(apply.duration_us(), 1000);
  EXPECT_EQ(apply.staleness(), 4);
  EXPECT_EQ(apply.version(), 99);
}

TEST(TraceRecorderTest, AnEndBeforeItsStartIsAnInstant) {
  SimulatedClock clock(absl::FromUnixSeconds(1));
  TraceRecorder recorder(&clock);
  recorder.Record(TraceEvent::DROP, recorder.Now(), recorder.Now() - absl::Seconds(1), 0, 0);
  EXPECT_EQ(recorder.Snapshot().events(0).duration_us(), 0);
}

TEST(TraceRecorderTest, KeepsTheNewestEventsOldestFirstAndCountsTheRest) {
  SimulatedClock clock(absl::FromUnixSeconds(1));
  TraceRecorder recorder(&clock, /*max_events=*/3);
  for (int step = 0; step < 10; ++step) {
    recorder.Record(TraceEvent::PUSH, recorder.Now(), recorder.Now(), step, 0);
  }
  const Trace trace = recorder.Snapshot();
  ASSERT_EQ(trace.events_size(), 3);
  EXPECT_EQ(trace.events(0).step(), 7);
  EXPECT_EQ(trace.events(1).step(), 8);
  EXPECT_EQ(trace.events(2).step(), 9);
  EXPECT_EQ(trace.dropped(), 7);
  // At most the 2 newest.
  const Trace newest = recorder.Snapshot(absl::ZeroDuration(), 2);
  ASSERT_EQ(newest.events_size(), 2);
  EXPECT_EQ(newest.events(0).step(), 8);
}

TEST(TraceRecorderTest, TheLastStretchIsTheEventsEndingWithinItOfTheNewest) {
  SimulatedClock clock(absl::FromUnixSeconds(1));
  TraceRecorder recorder(&clock);
  const absl::Time start = recorder.Now();
  recorder.Record(TraceEvent::COMPUTE, start, start + absl::Seconds(1), 0, 0);
  recorder.Record(TraceEvent::PUSH, start + absl::Seconds(5), start + absl::Seconds(6), 0, 0);
  recorder.Record(TraceEvent::PULL, start + absl::Seconds(9), start + absl::Seconds(10), 1, 0);
  EXPECT_EQ(recorder.Snapshot(absl::Seconds(5)).events_size(), 2);  // Ends at 6 and 10.
  EXPECT_EQ(recorder.Snapshot(absl::Seconds(3)).events_size(), 1);
  EXPECT_EQ(recorder.Snapshot().events_size(), 3);
}

TEST(TraceRecorderTest, ARequestsLimitsBelowZeroAskForEverything) {
  SimulatedClock clock(absl::FromUnixSeconds(1));
  TraceRecorder recorder(&clock);
  const absl::Time start = recorder.Now();
  recorder.Record(TraceEvent::COMPUTE, start, start + absl::Seconds(1), 0, 0);
  recorder.Record(TraceEvent::PUSH, start + absl::Seconds(5), start + absl::Seconds(6), 0, 0);
  TraceRequest request;
  request.set_last_us(-5);
  request.set_max_events(-1);
  EXPECT_EQ(recorder.Snapshot(request).events_size(), 2);
  request.set_last_us(2000000);  // The last 2 s: the push alone.
  request.set_max_events(0);
  EXPECT_EQ(recorder.Snapshot(request).events_size(), 1);
  EXPECT_EQ(TraceKindName(TraceEvent::ACCUMULATE), "accumulate");
}

TEST(TraceRecorderTest, ThreadsRecordingAtOnceLoseNothing) {
  TraceRecorder recorder(Clock::Real());
  std::vector<std::thread> threads;
  for (int worker = 0; worker < 4; ++worker) {
    threads.emplace_back([&recorder, worker] {
      for (int step = 0; step < 1000; ++step) {
        recorder.Record(TraceEvent::PULL, recorder.Now(), recorder.Now(), step, worker);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const Trace trace = recorder.Snapshot();
  EXPECT_EQ(trace.events_size(), 4000);
  std::vector<int> per_worker(4);
  for (const TraceEvent& event : trace.events()) ++per_worker[event.worker()];
  EXPECT_EQ(per_worker, std::vector<int>(4, 1000));
}

}  // namespace
}  // namespace ps
