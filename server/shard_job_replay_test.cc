// The apply log and its replay on one shard: an ASYNC run of 4 workers recorded in one
// interleaving, replayed with the workers as threads racing each other, ends with the recorded
// values bit for bit and the same log; a replay of a log with two updates swapped does not.
#include <algorithm>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "common/random.h"
#include "server/shard_job.h"
#include "server/shard_job_testing.h"

namespace ps {
namespace {

constexpr int kWorkers = kCheckpointTestWorkers;
constexpr int kSteps = 6;

// The checkpoint tests' job (two variables on several slices, a step-decay schedule and
// INVERSE staleness learning rates, so that the order of updates decides the values), ASYNC,
// recording.
ParameterSpec RecordedSpec() {
  ParameterSpec spec = CheckpointTestSpec(ConsistencyConfig::ASYNC, OptimizerConfig::SGD);
  spec.set_record_apply_log(true);
  return spec;
}

// A worker's pull of every slice: values and version, through a callback that may run later.
struct Pulled {
  std::vector<float> values;
  int64_t version = -1;
  absl::Status status;
};
Pulled PullAs(ShardJob& job, int worker, int incarnation = FIRST_INCARNATION) {
  PullRequest pull;
  pull.set_job_id(job.spec().job_id());
  pull.set_run_id(job.spec().run_id());
  pull.set_worker(worker);
  pull.set_incarnation(incarnation);
  Pulled pulled;
  absl::Notification done;
  job.Pull(pull, [&](absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
    pulled.status = snapshot.status();
    if (snapshot.ok()) {
      pulled.version = snapshot->header.version();
      for (absl::Span<const float> piece : snapshot->pieces) {
        pulled.values.insert(pulled.values.end(), piece.begin(), piece.end());
      }
    }
    done.Notify();
  });
  done.WaitForNotificationWithTimeout(absl::Seconds(10));
  return pulled;
}

// Worker `worker`'s gradient at `step` from what it pulled: depends on the values, so that
// computing it from other values gives another gradient.
std::vector<float> Gradient(const std::vector<float>& values, int worker, int step) {
  std::vector<float> gradient(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    gradient[i] = 0.3f * values[i] - 0.1f * static_cast<float>(worker + 1) +
                  0.01f * static_cast<float>(step * (i % 5));
  }
  return gradient;
}

absl::StatusOr<PushResponse> PushAs(ShardJob& job, int worker, int step, int64_t read_version,
                                    const std::vector<float>& gradient) {
  PushRequestHeader header = StepPushHeader(job, worker, step);
  header.set_read_version(read_version);
  return job.Push(header, gradient);
}

// The recorded run: every worker pulls, computes and pushes kSteps times, in an order drawn at
// random (seeded) among the workers that have steps left, each pull and push one call.
struct Recorded {
  std::vector<float> values;
  ApplyLog log;
};
Recorded Record() {
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(RecordedSpec(), 1, 0);
  EXPECT_TRUE(job.ok()) << job.status();
  std::vector<int> step(kWorkers, 0);
  std::vector<Pulled> pulled(kWorkers);
  std::vector<bool> holds_pull(kWorkers, false);
  SplitMix64 random(99);
  for (int actions = 0; actions < 2 * kWorkers * kSteps; ++actions) {
    std::vector<int> ready;
    for (int w = 0; w < kWorkers; ++w) {
      if (step[w] < kSteps) ready.push_back(w);
    }
    const int w = ready[random.Below(ready.size())];
    if (!holds_pull[w]) {
      pulled[w] = PullAs(**job, w);
      EXPECT_TRUE(pulled[w].status.ok()) << pulled[w].status;
      holds_pull[w] = true;
    } else {
      absl::StatusOr<PushResponse> pushed =
          PushAs(**job, w, step[w], pulled[w].version, Gradient(pulled[w].values, w, step[w]));
      EXPECT_TRUE(pushed.ok()) << pushed.status();
      EXPECT_EQ(pushed->outcome(), PushResponse::APPLIED);
      holds_pull[w] = false;
      ++step[w];
    }
  }
  return {PullAs(**job, 0, OBSERVER_INCARNATION).values, (*job)->GetApplyLog()};
}

// Replays `log` with the workers as threads, each pulling, computing and pushing as fast as it
// can; returns the final values (empty when a worker's pull failed) and the replay's own log.
Recorded Replay(const ApplyLog& log, absl::Status* failure) {
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(RecordedSpec(), 1, 0);
  EXPECT_TRUE(job.ok()) << job.status();
  (*job)->StartReplay(log);
  std::vector<absl::Status> statuses(kWorkers);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (int s = 0; s < kSteps; ++s) {
        Pulled pulled = PullAs(**job, w);
        if (!pulled.status.ok()) {
          statuses[w] = pulled.status;
          return;
        }
        absl::StatusOr<PushResponse> pushed =
            PushAs(**job, w, s, pulled.version, Gradient(pulled.values, w, s));
        if (!pushed.ok()) {
          statuses[w] = pushed.status();
          return;
        }
        EXPECT_EQ(pushed->outcome(), PushResponse::QUEUED);
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  *failure = absl::OkStatus();
  for (const absl::Status& status : statuses) {
    if (!status.ok() && failure->ok()) *failure = status;
  }
  // Nothing may be left waiting: the parked pulls end when the job goes.
  (*job)->CancelAllWaiters(absl::CancelledError("test over"));
  return {PullAs(**job, 0, OBSERVER_INCARNATION).values, (*job)->GetApplyLog()};
}

TEST(ShardJobReplayTest, ARecordedAsyncRunReplaysToTheSameValuesBitForBit) {
  const Recorded recorded = Record();
  // Every pull and every push of every worker, in the order the shard did them.
  ASSERT_EQ(recorded.log.entries_size(), 2 * kWorkers * kSteps);
  int applies = 0;
  for (const ApplyLogEntry& entry : recorded.log.entries()) {
    if (entry.kind() == ApplyLogEntry::APPLY) {
      ++applies;
      EXPECT_GT(entry.learning_rate(), 0);
    }
  }
  EXPECT_EQ(applies, kWorkers * kSteps);
  for (int run = 0; run < 3; ++run) {  // The threads race differently each time.
    absl::Status failure;
    const Recorded replayed = Replay(recorded.log, &failure);
    ASSERT_TRUE(failure.ok()) << failure;
    EXPECT_EQ(replayed.values, recorded.values) << "run " << run;
    EXPECT_EQ(replayed.log.SerializeAsString(), recorded.log.SerializeAsString()) << "run " << run;
  }
}

TEST(ShardJobReplayTest, AReplayOfAChangedLogDoesNotEndThere) {
  const Recorded recorded = Record();
  // Two neighbouring updates of different workers, swapped.
  ApplyLog changed = recorded.log;
  int swapped = -1;
  for (int i = 0; i + 1 < changed.entries_size() && swapped < 0; ++i) {
    const ApplyLogEntry& a = changed.entries(i);
    const ApplyLogEntry& b = changed.entries(i + 1);
    if (a.kind() == ApplyLogEntry::APPLY && b.kind() == ApplyLogEntry::APPLY &&
        a.worker() != b.worker()) {
      changed.mutable_entries()->SwapElements(i, i + 1);
      swapped = i;
    }
  }
  ASSERT_GE(swapped, 0) << "no two neighbouring updates of different workers to swap";
  absl::Status failure;
  const Recorded replayed = Replay(changed, &failure);
  // Either the values differ, or a worker read a version the log did not expect.
  EXPECT_TRUE(!failure.ok() || replayed.values != recorded.values);
}

}  // namespace
}  // namespace ps
