// ParameterService::WriteMetrics: every job's JobStats as Prometheus families, read at scrape
// time so that pushes and pulls pay nothing for them.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/job/consistency_modes.h"
#include "common/metrics/metrics.h"
#include "server/job_traffic.h"
#include "server/ps_service.h"
#include "server/staleness_histogram.h"

namespace ps {
namespace {

// Whether the job's shards report a barrier's step and the workers it waits for.
bool HasBarrier(const JobStats& job) {
  const ModeTraits* mode = FindModeTraits(job.mode());
  return mode != nullptr && mode->barrier;
}

// The staleness histograms' upper bounds: every staleness up to 8, then coarser. 62 is the
// last staleness StalenessHistogram counts on its own (its last bucket holds 63 and beyond).
const std::vector<double>& StalenessBounds() {
  static const std::vector<double>* const bounds =
      new std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 62};
  return *bounds;
}

void WriteStaleness(const std::string& name, const MetricLabels& labels,
                    const StalenessHistogramData& data, MetricsWriter* writer) {
  const std::vector<double>& bounds = StalenessBounds();
  std::vector<int64_t> cumulative(bounds.size());
  int64_t running = 0;
  int staleness = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    for (; staleness <= bounds[i]; ++staleness) {
      if (staleness < data.counts_size()) running += data.counts(staleness);
    }
    cumulative[i] = running;
  }
  static_assert(StalenessHistogram::kNumBuckets == 64, "the last bound is kNumBuckets - 2");
  writer->Histogram(name, labels, bounds, cumulative, static_cast<double>(data.sum()),
                    data.total());
}

}  // namespace

void ParameterService::WriteMetrics(MetricsWriter* writer) {
  std::vector<std::shared_ptr<ShardJob>> jobs;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, job] : jobs_) jobs.push_back(job);
  }
  std::vector<JobStats> stats;
  for (const std::shared_ptr<ShardJob>& job : jobs) stats.push_back(job->Stats());
  const std::string shard = absl::StrCat(options_.ps_index);
  auto labels = [&shard](const JobStats& job) {
    return MetricLabels{{"job_id", job.job_id()}, {"shard", shard}};
  };
  auto with = [&labels](const JobStats& job, const std::string& name, const std::string& value) {
    MetricLabels result = labels(job);
    result.emplace_back(name, value);
    return result;
  };

  writer->Family("ps_jobs", "Jobs this ps holds (finished ones until forgotten).",
                 MetricType::kGauge);
  writer->Sample("ps_jobs", {{"shard", shard}}, static_cast<double>(stats.size()));
  if (stats.empty()) return;

  writer->Family("ps_job_version", "The shard's version: updates applied, restored ones included.",
                 MetricType::kGauge);
  for (const JobStats& job : stats) writer->Sample("ps_job_version", labels(job), job.version());
  writer->Family("ps_job_sync_step", "SYNC jobs: the step the shard is in.", MetricType::kGauge);
  for (const JobStats& job : stats) {
    if (HasBarrier(job)) {
      writer->Sample("ps_job_sync_step", labels(job), job.step());
    }
  }
  writer->Family("ps_job_updates_applied_total", "Updates applied (each bumps the version).",
                 MetricType::kCounter);
  for (const JobStats& job : stats) {
    writer->Sample("ps_job_updates_applied_total", labels(job), job.applied_updates());
  }
  writer->Family("ps_job_gradients_applied_total", "Gradients that went into updates.",
                 MetricType::kCounter);
  for (const JobStats& job : stats) {
    writer->Sample("ps_job_gradients_applied_total", labels(job), job.applied_gradients());
  }
  writer->Family("ps_job_gradients_dropped_total",
                 "Gradients the consistency mode dropped, by reason (stale_step, max_staleness).",
                 MetricType::kCounter);
  for (const JobStats& job : stats) {
    for (const auto& [reason, count] :
         std::map<std::string, int64_t>(job.dropped().begin(), job.dropped().end())) {
      writer->Sample("ps_job_gradients_dropped_total", with(job, "reason", reason), count);
    }
  }
  writer->Family("ps_job_pushes_rejected_total",
                 "Pushes refused before they reached the consistency mode, by reason "
                 "(non_finite, shape, malformed, chunk, run, worker, push_id, push_id_jump).",
                 MetricType::kCounter);
  for (const JobStats& job : stats) {
    for (const auto& [reason, count] :
         std::map<std::string, int64_t>(job.rejected().begin(), job.rejected().end())) {
      writer->Sample("ps_job_pushes_rejected_total", with(job, "reason", reason), count);
    }
  }
  writer->Family("ps_job_duplicate_pushes_total",
                 "Pushes answered DUPLICATE (a push_id already seen), which changed nothing.",
                 MetricType::kCounter);
  for (const JobStats& job : stats) {
    writer->Sample("ps_job_duplicate_pushes_total", labels(job), job.duplicate_pushes());
  }
  writer->Family("ps_job_parked_pulls", "Pulls waiting right now (SYNC barrier, SSP bound).",
                 MetricType::kGauge);
  for (const JobStats& job : stats) {
    writer->Sample("ps_job_parked_pulls", labels(job), job.parked_pulls());
  }
  writer->Family("ps_job_workers_waited_for", "SYNC: workers the current step still lacks.",
                 MetricType::kGauge);
  for (const JobStats& job : stats) {
    if (HasBarrier(job)) {
      writer->Sample("ps_job_workers_waited_for", labels(job), job.waiting_for_size());
    }
  }
  writer->Family("ps_job_waiting_for_worker",
                 "SYNC: 1 for each worker the current step still lacks (absent once it pushed).",
                 MetricType::kGauge);
  for (const JobStats& job : stats) {
    for (int worker : job.waiting_for()) {
      writer->Sample("ps_job_waiting_for_worker", with(job, "worker", absl::StrCat(worker)), 1);
    }
  }
  writer->Family("ps_job_failed_checkpoints_total", "Checkpoints whose shard file failed.",
                 MetricType::kCounter);
  for (const JobStats& job : stats) {
    writer->Sample("ps_job_failed_checkpoints_total", labels(job), job.failed_checkpoints());
  }
  // The latest checkpoint whose shard file was written, of each job that has one.
  std::vector<std::pair<const JobStats*, const ShardCheckpoint*>> checkpointed;
  for (const JobStats& job : stats) {
    const ShardCheckpoint* latest = nullptr;
    for (const ShardCheckpoint& entry : job.checkpoints()) {
      if (entry.error().empty() && (latest == nullptr || entry.seq() > latest->seq())) {
        latest = &entry;
      }
    }
    if (latest != nullptr) checkpointed.emplace_back(&job, latest);
  }
  writer->Family("ps_job_last_checkpoint_seq",
                 "The number of the shard's latest checkpoint written (in its run).",
                 MetricType::kGauge);
  for (const auto& [job, entry] : checkpointed) {
    writer->Sample("ps_job_last_checkpoint_seq", labels(*job), entry->seq());
  }
  writer->Family("ps_job_last_checkpoint_timestamp_seconds",
                 "When the shard's latest checkpoint was written (Unix time).", MetricType::kGauge);
  for (const auto& [job, entry] : checkpointed) {
    writer->Sample("ps_job_last_checkpoint_timestamp_seconds", labels(*job),
                   entry->written_at_ms() / 1000.0);
  }
  writer->Family("ps_job_last_checkpoint_bytes", "The size of the shard's latest checkpoint file.",
                 MetricType::kGauge);
  for (const auto& [job, entry] : checkpointed) {
    writer->Sample("ps_job_last_checkpoint_bytes", labels(*job), entry->bytes());
  }
  writer->Family("ps_job_last_checkpoint_write_seconds",
                 "How long writing the shard's latest checkpoint file took.", MetricType::kGauge);
  for (const auto& [job, entry] : checkpointed) {
    writer->Sample("ps_job_last_checkpoint_write_seconds", labels(*job), entry->write_ms() / 1000.0);
  }
  writer->Family("ps_job_checkpoint_write_seconds",
                 "How long writing each checkpoint file of the shard took.",
                 MetricType::kHistogram);
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i]->checkpoint_write_seconds().Write("ps_job_checkpoint_write_seconds", labels(stats[i]),
                                              writer);
  }
  writer->Family("ps_job_park_seconds",
                 "How long pulls waited at the shard (SYNC barrier, SSP bound), of those that "
                 "waited.",
                 MetricType::kHistogram);
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i]->park_seconds().Write("ps_job_park_seconds", labels(stats[i]), writer);
  }
  writer->Family("ps_job_oldest_parked_pull_seconds",
                 "How long the oldest pull waiting right now has waited (0: none waits).",
                 MetricType::kGauge);
  for (const JobStats& job : stats) {
    writer->Sample("ps_job_oldest_parked_pull_seconds", labels(job),
                   job.oldest_parked_pull_ms() / 1000.0);
  }
  writer->Family("ps_job_requests_total",
                 "Pull, Push and PushPull calls that named the job, by method and status code.",
                 MetricType::kCounter);
  for (size_t i = 0; i < jobs.size(); ++i) {
    for (JobMethod method : kJobMethods) {
      for (int code = 0; code < JobTraffic::kNumCodes; ++code) {
        const int64_t calls = jobs[i]->traffic().calls(method, code);
        if (calls == 0) continue;
        MetricLabels series = with(stats[i], "method", JobMethodName(method));
        series.emplace_back("code",
                            absl::StatusCodeToString(static_cast<absl::StatusCode>(code)));
        writer->Sample("ps_job_requests_total", series, static_cast<double>(calls));
      }
    }
  }
  writer->Family("ps_job_received_bytes_total", "Bytes of the calls that named the job.",
                 MetricType::kCounter);
  for (const JobStats& job : stats) {
    writer->Sample("ps_job_received_bytes_total", labels(job), job.bytes_received());
  }
  writer->Family("ps_job_sent_bytes_total", "Bytes of the answers to calls that named the job.",
                 MetricType::kCounter);
  for (const JobStats& job : stats) {
    writer->Sample("ps_job_sent_bytes_total", labels(job), job.bytes_sent());
  }
  writer->Family("ps_job_staleness",
                 "Staleness of applied gradients (version at apply time minus version read).",
                 MetricType::kHistogram);
  for (const JobStats& job : stats) {
    WriteStaleness("ps_job_staleness", labels(job), job.staleness(), writer);
  }
  writer->Family("ps_job_worker_staleness", "ps_job_staleness of one worker's gradients.",
                 MetricType::kHistogram);
  for (const JobStats& job : stats) {
    for (const WorkerStats& worker : job.workers()) {
      WriteStaleness("ps_job_worker_staleness", with(job, "worker", absl::StrCat(worker.worker())),
                     worker.staleness(), writer);
    }
  }
  writer->Family("ps_job_worker_gradients_applied_total",
                 "ps_job_gradients_applied_total of one worker.", MetricType::kCounter);
  for (const JobStats& job : stats) {
    for (const WorkerStats& worker : job.workers()) {
      writer->Sample("ps_job_worker_gradients_applied_total",
                     with(job, "worker", absl::StrCat(worker.worker())), worker.applied());
    }
  }
}

}  // namespace ps
