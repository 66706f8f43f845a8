#include "ctl/dashboard/top.h"

#include <gtest/gtest.h>

#include <string>

namespace ps {
namespace {

constexpr int64_t kNowMs = 1795000000000;  // 2026-11-18 11:06:40 UTC.

TaskSnapshot Up(const std::string& task, const std::string& address, int64_t pid,
                double cpu_seconds, int64_t resident_bytes, int64_t uptime_seconds) {
  TaskSnapshot snapshot;
  snapshot.task = task;
  snapshot.address = address;
  snapshot.up = true;
  snapshot.info.set_pid(pid);
  snapshot.info.set_cpu_seconds(cpu_seconds);
  snapshot.info.set_resident_bytes(resident_bytes);
  snapshot.info.set_start_time_ms(kNowMs - uptime_seconds * 1000);
  return snapshot;
}

TaskSnapshot Down(const std::string& task, const std::string& address, const std::string& error) {
  TaskSnapshot snapshot;
  snapshot.task = task;
  snapshot.address = address;
  snapshot.error = error;
  return snapshot;
}

// Staleness of `total` gradients summing to `sum`, at most `max`.
void SetStaleness(StalenessHistogramData* data, int64_t total, int64_t sum, int64_t max) {
  data->set_total(total);
  data->set_sum(sum);
  data->set_max(max);
  data->set_mean(total > 0 ? static_cast<double>(sum) / static_cast<double>(total) : 0);
}

JobStats Shard(int ps, ConsistencyConfig::Mode mode, int64_t step, int64_t version) {
  JobStats shard;
  shard.set_job_id("j");
  shard.set_ps_index(ps);
  shard.set_mode(mode);
  shard.set_step(step);
  shard.set_version(version);
  return shard;
}

WorkerStats* AddWorker(JobStats* shard, int worker, int64_t clock, int64_t total, int64_t sum,
                       int64_t max) {
  WorkerStats* stats = shard->add_workers();
  stats->set_worker(worker);
  stats->set_clock(clock);
  SetStaleness(stats->mutable_staleness(), total, sum, max);
  return stats;
}

JobProgress Progress(int worker, int64_t step, int64_t global_step, double examples_per_second,
                     double loss) {
  JobProgress progress;
  progress.set_job_id("j");
  progress.set_worker(worker);
  progress.set_step(step);
  progress.set_global_step(global_step);
  progress.set_examples_per_second(examples_per_second);
  progress.set_loss(loss);
  progress.set_elapsed_seconds(10);  // The job's figures: every example over 10 s.
  return progress;
}

// 2 ps, 2 workers (worker:1 down), and a SYNC job whose barrier at step 12 waits for worker:1.
ClusterSnapshot SyncCluster() {
  ClusterSnapshot snapshot;
  snapshot.time_ms = kNowMs;
  snapshot.tasks = {
      Up("ps:0", "127.0.0.1:40001", 101, 10.0, 50 << 20, 65),
      Up("ps:1", "127.0.0.1:40002", 102, 4.0, 3 * 1024 + 512, 3700),
      Up("worker:0", "127.0.0.1:40003", 103, 30.0, int64_t{3} << 30, 90000),
      Down("worker:1", "127.0.0.1:40004", "failed to connect\nto all addresses"),
  };
  JobSnapshot job;
  job.job_id = "j";
  job.state = "RUNNING";
  job.state_line = "job j: RUNNING (run r1)";
  for (int ps = 0; ps < 2; ++ps) {
    JobStats shard = Shard(ps, ConsistencyConfig::SYNC, 12, 12);
    // Shard 0 saw 10 gradients of staleness 0 and 1 of 2 from worker:0; shard 1 one of 1.
    SetStaleness(shard.mutable_staleness(), ps == 0 ? 11 : 1, ps == 0 ? 2 : 1, ps == 0 ? 2 : 1);
    AddWorker(&shard, 0, 12, ps == 0 ? 11 : 1, ps == 0 ? 2 : 1, ps == 0 ? 2 : 1);
    AddWorker(&shard, 1, 11, 0, 0, 0);
    shard.add_waiting_for(1);
    shard.set_parked_pulls(1);
    shard.set_oldest_parked_pull_ms(ps == 0 ? 3200 : 3150);
    job.shards.push_back(shard);
  }
  job.workers = {Progress(0, 12, 12, 2100.4, 0.51234), Progress(1, 11, 11, 1999.7, 0.6)};
  snapshot.jobs.push_back(job);
  return snapshot;
}

TEST(RenderTopTest, DrawsTasksAndASyncJobWaitingAtItsBarrier) {
  ClusterSnapshot previous = SyncCluster();
  previous.time_ms = kNowMs - 2000;
  previous.tasks[0].info.set_cpu_seconds(9.5);  // 0.5 s of CPU in 2 s: 25%.
  previous.tasks[1].info.set_cpu_seconds(4.0);
  previous.tasks[2].info.set_pid(99);  // worker:0 was another process then.
  EXPECT_EQ(RenderTop(SyncCluster(), &previous, 0),
            "psctl top  2026-11-18 11:06:40 UTC  tasks: 3 of 4 up  1 job\n"
            "\n"
            "TASK      ADDRESS          STATE       PID    CPU%         RSS   UPTIME\n"
            "ps:0      127.0.0.1:40001  up          101    25.0    50.0 MiB    1m05s\n"
            "ps:1      127.0.0.1:40002  up          102     0.0     3.5 KiB    1h01m\n"
            "worker:0  127.0.0.1:40003  up          103       -     3.0 GiB    1d01h\n"
            "worker:1  127.0.0.1:40004  DOWN   failed to connect to all addresses\n"
            "\n"
            "job j: RUNNING (run r1)\n"
            "  SYNC, global step 12, 4100 examples/s, loss 0.5562, staleness mean 0.25 max 2\n"
            "  barrier at step 12 waits for worker:1 for 3.2 s\n"
            "  WORKER     STATE        STEP   GLOBAL  EXAMPLES/S       LOSS  STALENESS   MAX\n"
            "  worker:0   RUNNING        12       12        2100     0.5123       0.25     2\n"
            "  worker:1   RUNNING        11       11        2000        0.6          -     -\n");
}

TEST(RenderTopTest, WithoutAPreviousSnapshotCpuIsUnknown) {
  ClusterSnapshot now = SyncCluster();
  now.jobs.clear();
  now.tasks.resize(1);
  EXPECT_EQ(RenderTop(now, nullptr, 0),
            "psctl top  2026-11-18 11:06:40 UTC  tasks: 1 of 1 up  0 jobs\n"
            "\n"
            "TASK  ADDRESS          STATE       PID    CPU%         RSS   UPTIME\n"
            "ps:0  127.0.0.1:40001  up          101       -    50.0 MiB    1m05s\n");
}

TEST(RenderTopTest, CutsEveryLineToTheWidth) {
  const std::string screen = RenderTop(SyncCluster(), nullptr, 30);
  EXPECT_EQ(screen.substr(0, 63),
            "psctl top  2026-11-18 11:06:40\n"
            "\n"
            "TASK      ADDRESS          STA\n");
  size_t start = 0;
  for (size_t end = screen.find('\n'); end != std::string::npos;
       start = end + 1, end = screen.find('\n', start)) {
    EXPECT_LE(end - start, 30u) << screen.substr(start, end - start);
  }
}

TEST(RenderTopTest, SspPullsWaitingAtTheBoundNameTheSlowestWorker) {
  ClusterSnapshot now;
  now.time_ms = kNowMs;
  JobSnapshot job;
  job.state_line = "job j: RUNNING (run r2)";
  for (int ps = 0; ps < 2; ++ps) {
    JobStats shard = Shard(ps, ConsistencyConfig::SSP, 0, ps == 0 ? 40 : 38);
    AddWorker(&shard, 0, 9, 0, 0, 0);
    AddWorker(&shard, 1, 5, 0, 0, 0);
    AddWorker(&shard, 2, 3, 0, 0, 0)->set_left(true);  // The bound no longer waits for it.
    shard.set_parked_pulls(ps == 0 ? 2 : 1);
    shard.set_oldest_parked_pull_ms(ps == 0 ? 1240 : 900);
    job.shards.push_back(shard);
  }
  job.shards[1].mutable_workers(2)->set_lost(true);  // It left without saying.
  now.jobs.push_back(job);
  EXPECT_EQ(RenderTop(now, nullptr, 0),
            "psctl top  2026-11-18 11:06:40 UTC  tasks: 0 of 0 up  1 job\n"
            "\n"
            "TASK  ADDRESS  STATE       PID    CPU%         RSS   UPTIME\n"
            "\n"
            "job j: RUNNING (run r2)\n"
            "  SSP, global step 38\n"
            "  3 pulls wait at the SSP bound for 1.2 s; slowest: worker:1 at clock 5\n"
            "  WORKER     STATE        STEP   GLOBAL  EXAMPLES/S       LOSS  STALENESS   MAX\n"
            "  worker:0   -               -        -           -          -          -     -\n"
            "  worker:1   -               -        -           -          -          -     -\n"
            "  worker:2   LOST            -        -           -          -          -     -\n");
}

TEST(RenderTopTest, ABarrierWithEveryGradientInHoldsItsPulls) {
  ClusterSnapshot now;
  now.time_ms = kNowMs;
  JobSnapshot job;
  job.state_line = "job j: RUNNING (run r3)";
  JobStats shard = Shard(0, ConsistencyConfig::SYNC, 7, 7);
  shard.set_parked_pulls(1);
  shard.set_oldest_parked_pull_ms(60);
  job.shards.push_back(shard);
  now.jobs.push_back(job);
  const std::string screen = RenderTop(now, nullptr, 0);
  EXPECT_NE(screen.find("\n  SYNC, global step 7\n  barrier at step 7 holds 1 pull for 0.1 s\n"),
            std::string::npos)
      << screen;
}

}  // namespace
}  // namespace ps
