#include "ctl/export/trace_file.h"

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "common/trace/trace_testing.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

// Shorter in the tests below.
TraceEvent Event(TraceEvent::Kind kind, int64_t start_us, int64_t duration_us, int64_t step,
                 int worker = 0, int64_t staleness = 0, int64_t version = 0) {
  return MakeTraceEvent(kind, start_us, duration_us, step, worker, staleness, version);
}

JobTrace TwoWorkersOneShard() {
  JobTrace trace;
  trace.job_id = "j\"1";  // Quoted in the JSON.
  trace.workers.resize(2);
  *trace.workers[0].add_events() = Event(TraceEvent::PULL, 5000, 300, 0, 0);
  *trace.workers[0].add_events() = Event(TraceEvent::WAIT, 5000, 200, 0, 0);
  *trace.workers[0].add_events() = Event(TraceEvent::COMPUTE, 5300, 1000, 0, 0);
  *trace.workers[1].add_events() = Event(TraceEvent::PUSH, 4000, 50, 3, 1);
  trace.workers[1].set_dropped(7);
  trace.shards.resize(1);
  *trace.shards[0].add_events() = Event(TraceEvent::APPLY, 4100, 20, 3, 1, 2, 11);
  *trace.shards[0].add_events() = Event(TraceEvent::DROP, 4200, 0, 4, 0, 9, 11);
  *trace.shards[0].add_events() = Event(TraceEvent::APPLY, 4300, 40, 5, -1, 1, 12);
  return trace;
}

TEST(TraceFileTest, IsAChromeTraceOfEveryTaskFromTheEarliestEvent) {
  const nlohmann::json json = nlohmann::json::parse(ChromeTraceJson(TwoWorkersOneShard()));
  EXPECT_EQ(json["displayTimeUnit"], "ms");
  EXPECT_EQ(json["otherData"]["job_id"], "j\"1");
  EXPECT_EQ(json["otherData"]["origin_unix_us"], 4000);
  EXPECT_EQ(json["otherData"]["dropped_events"]["worker:1"], 7);
  EXPECT_EQ(json["otherData"]["dropped_events"]["ps shard 0"], 0);
  std::map<int, std::string> processes;
  std::map<std::string, std::string> threads;  // "pid/tid" -> name.
  std::vector<nlohmann::json> spans;
  for (const nlohmann::json& event : json["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "process_name") {
      processes[event["pid"]] = event["args"]["name"];
    } else if (event["ph"] == "M") {
      threads[std::to_string(event["pid"].get<int>()) + "/" +
              std::to_string(event["tid"].get<int>())] = event["args"]["name"];
    } else {
      spans.push_back(event);
    }
  }
  EXPECT_EQ(processes, (std::map<int, std::string>{
                           {1, "worker:0"}, {2, "worker:1"}, {3, "ps shard 0"}}));
  EXPECT_EQ(threads["1/1"], "training loop");
  EXPECT_EQ(threads["3/0"], "aggregates");
  EXPECT_EQ(threads["3/2"], "gradients of worker:1");
  ASSERT_EQ(spans.size(), 7u);
  EXPECT_EQ(spans[0]["name"], "pull");
  EXPECT_EQ(spans[0]["ph"], "X");
  EXPECT_EQ(spans[0]["ts"], 1000);
  EXPECT_EQ(spans[0]["dur"], 300);
  EXPECT_EQ(spans[0]["pid"], 1);
  EXPECT_EQ(spans[1]["name"], "wait");
  EXPECT_EQ(spans[3]["name"], "push");
  EXPECT_EQ(spans[3]["ts"], 0);
  EXPECT_EQ(spans[3]["args"]["step"], 3);
  // A worker's gradient applied: on its own thread of the shard, with its staleness.
  EXPECT_EQ(spans[4]["name"], "apply");
  EXPECT_EQ(spans[4]["cat"], "shard");
  EXPECT_EQ(spans[4]["pid"], 3);
  EXPECT_EQ(spans[4]["tid"], 2);
  EXPECT_EQ(spans[4]["args"]["staleness"], 2);
  EXPECT_EQ(spans[4]["args"]["version"], 11);
  // A drop is an instant.
  EXPECT_EQ(spans[5]["name"], "drop");
  EXPECT_EQ(spans[5]["ph"], "i");
  EXPECT_FALSE(spans[5].contains("dur"));
  EXPECT_EQ(spans[5]["tid"], 1);
  // An aggregate: on the aggregates thread.
  EXPECT_EQ(spans[6]["tid"], 0);
  EXPECT_EQ(spans[6]["args"]["worker"], -1);
}

TEST(TraceFileTest, AnEmptyTraceIsValidJson) {
  JobTrace trace;
  trace.job_id = "empty";
  trace.workers.resize(1);
  const nlohmann::json json = nlohmann::json::parse(ChromeTraceJson(trace));
  EXPECT_EQ(json["otherData"]["origin_unix_us"], 0);
  EXPECT_EQ(json["traceEvents"].size(), 2u);  // worker:0's names.
}

}  // namespace
}  // namespace ps
