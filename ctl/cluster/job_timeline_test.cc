#include "ctl/cluster/job_timeline.h"

#include "common/trace/trace_testing.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

// Shorter in the tests below.
TraceEvent Event(TraceEvent::Kind kind, int64_t start_us, int64_t duration_us, int64_t step,
                 int worker = 0, int64_t staleness = 0, int64_t version = 0) {
  return MakeTraceEvent(kind, start_us, duration_us, step, worker, staleness, version);
}

TEST(JobTimelineTest, ShowsTheWindowBeforeTheNewestEventOfAnyTask) {
  std::vector<TaskTrace> traces(2);
  traces[0].task = "worker:0";
  *traces[0].trace.add_events() = Event(TraceEvent::COMPUTE, 1000, 1000, 1);    // Before it.
  *traces[0].trace.add_events() = Event(TraceEvent::PULL, 9000, 3000, 2);       // Cut at it.
  *traces[0].trace.add_events() = Event(TraceEvent::PUSH, 15000, 2000, 2);
  traces[1].task = "ps:1";
  *traces[1].trace.add_events() = Event(TraceEvent::APPLY, 16000, 2000, 2, 0, 3);
  // After the workers' newest event (asked for later than they were): cut off.
  *traces[1].trace.add_events() = Event(TraceEvent::APPLY, 20000, 2000, 3, 0, 3);
  const nlohmann::json json = TimelineJson(traces, absl::Microseconds(10000));
  EXPECT_EQ(json["window_ms"], 10.0);
  EXPECT_EQ(json["kinds"][TraceEvent::COMPUTE], "compute");
  EXPECT_EQ(json["kinds"][TraceEvent::ACCUMULATE], "accumulate");
  ASSERT_EQ(json["rows"].size(), 2u);
  EXPECT_EQ(json["rows"][0]["task"], "worker:0");
  const nlohmann::json& worker = json["rows"][0]["spans"];
  ASSERT_EQ(worker.size(), 2u);
  // [kind, start_ms, duration_ms, step, staleness, worker], from 17000 - 10000 us.
  EXPECT_EQ(worker[0], nlohmann::json({TraceEvent::PULL, 2.0, 3.0, 2, 0, 0}));
  EXPECT_EQ(worker[1], nlohmann::json({TraceEvent::PUSH, 8.0, 2.0, 2, 0, 0}));
  ASSERT_EQ(json["rows"][1]["spans"].size(), 1u);
  EXPECT_EQ(json["rows"][1]["spans"][0], nlohmann::json({TraceEvent::APPLY, 9.0, 1.0, 2, 3, 0}));
}

TEST(JobTimelineTest, ShowsOnlyTheLastStepsOfFastWorkers) {
  std::vector<TaskTrace> traces(2);
  for (int w = 0; w < 2; ++w) {
    traces[w].task = "worker:" + std::to_string(w);
    // 1 ms steps; worker 1 began 20 ms later.
    for (int step = 0; step < 100; ++step) {
      *traces[w].trace.add_events() =
          Event(TraceEvent::PULL, 1000000 + (step + 20 * w) * 1000, 500, step, w);
    }
  }
  const nlohmann::json json = TimelineJson(traces, absl::Seconds(10));
  // Both workers' last 50 pulls: from worker 0's 50th-last, at 1050 ms, to the end at 1119.5.
  EXPECT_EQ(json["window_ms"], 69.5);
  EXPECT_EQ(json["rows"][0]["spans"].size(), 50u);
  EXPECT_EQ(json["rows"][1]["spans"].size(), 70u);
}

TEST(JobTimelineTest, WithoutAWorkersPullsTheWindowIsWhole) {
  std::vector<TaskTrace> traces(2);
  traces[0].task = "worker:0";  // A program job's worker: nothing recorded.
  traces[1].task = "ps:0";
  *traces[1].trace.add_events() = Event(TraceEvent::APPLY, 1000, 1000, 0);
  *traces[1].trace.add_events() = Event(TraceEvent::APPLY, 9000, 1000, 1);
  const nlohmann::json json = TimelineJson(traces, absl::Microseconds(10000));
  EXPECT_EQ(json["window_ms"], 10.0);
  EXPECT_EQ(json["rows"][1]["spans"].size(), 2u);
}

TEST(JobTimelineTest, NoEventsIsRowsWithNoSpans) {
  std::vector<TaskTrace> traces(1);
  traces[0].task = "worker:0";
  const nlohmann::json json = TimelineJson(traces);
  ASSERT_EQ(json["rows"].size(), 1u);
  EXPECT_TRUE(json["rows"][0]["spans"].empty());
}

}  // namespace
}  // namespace ps
