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

// One job as its families see it: its statistics, the job itself and its labels.
struct JobView {
  const JobStats& stats;
  ShardJob& job;
  MetricLabels labels;

  // The labels with one more.
  MetricLabels With(const std::string& name, const std::string& value) const {
    MetricLabels result = labels;
    result.emplace_back(name, value);
    return result;
  }
};

// The latest checkpoint whose shard file was written, or null.
const ShardCheckpoint* LatestCheckpoint(const JobStats& stats) {
  const ShardCheckpoint* latest = nullptr;
  for (const ShardCheckpoint& entry : stats.checkpoints()) {
    if (entry.error().empty() && (latest == nullptr || entry.seq() > latest->seq())) {
      latest = &entry;
    }
  }
  return latest;
}

// Samples of `family` by reason (gradients dropped, pushes rejected).
void WriteByReason(const char* family, const JobView& job,
                   const google::protobuf::Map<std::string, int64_t>& counts,
                   MetricsWriter* writer) {
  for (const auto& [reason, count] : std::map<std::string, int64_t>(counts.begin(), counts.end())) {
    writer->Sample(family, job.With("reason", reason), count);
  }
}

// A family of the per-job metrics: how one job writes its samples of it (none where the family
// does not apply to the job).
struct JobFamily {
  const char* name;
  const char* help;
  MetricType type;
  void (*write)(const char* family, const JobView& job, MetricsWriter* writer);
};

// Every per-job family, in the order of the page.
const JobFamily kJobFamilies[] = {
    {"ps_job_version", "The shard's version: updates applied, restored ones included.",
     MetricType::kGauge,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       w->Sample(f, j.labels, j.stats.version());
     }},
    {"ps_job_sync_step", "SYNC jobs: the step the shard is in.", MetricType::kGauge,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       if (HasBarrier(j.stats)) w->Sample(f, j.labels, j.stats.step());
     }},
    {"ps_job_updates_applied_total", "Updates applied (each bumps the version).",
     MetricType::kCounter,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       w->Sample(f, j.labels, j.stats.applied_updates());
     }},
    {"ps_job_gradients_applied_total", "Gradients that went into updates.", MetricType::kCounter,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       w->Sample(f, j.labels, j.stats.applied_gradients());
     }},
    {"ps_job_gradients_dropped_total",
     "Gradients the consistency mode dropped, by reason (stale_step, max_staleness).",
     MetricType::kCounter,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       WriteByReason(f, j, j.stats.dropped(), w);
     }},
    {"ps_job_pushes_rejected_total",
     "Pushes refused before they reached the consistency mode, by reason "
     "(non_finite, shape, malformed, chunk, run, worker, push_id, push_id_jump).",
     MetricType::kCounter,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       WriteByReason(f, j, j.stats.rejected(), w);
     }},
    {"ps_job_duplicate_pushes_total",
     "Pushes answered DUPLICATE (a push_id already seen), which changed nothing.",
     MetricType::kCounter,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       w->Sample(f, j.labels, j.stats.duplicate_pushes());
     }},
    {"ps_job_parked_pulls", "Pulls waiting right now (SYNC barrier, SSP bound).",
     MetricType::kGauge,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       w->Sample(f, j.labels, j.stats.parked_pulls());
     }},
    {"ps_job_workers_waited_for", "SYNC: workers the current step still lacks.",
     MetricType::kGauge,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       if (HasBarrier(j.stats)) w->Sample(f, j.labels, j.stats.waiting_for_size());
     }},
    {"ps_job_waiting_for_worker",
     "SYNC: 1 for each worker the current step still lacks (absent once it pushed).",
     MetricType::kGauge,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       for (int worker : j.stats.waiting_for()) {
         w->Sample(f, j.With("worker", absl::StrCat(worker)), 1);
       }
     }},
    {"ps_job_failed_checkpoints_total", "Checkpoints whose shard file failed.",
     MetricType::kCounter,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       w->Sample(f, j.labels, j.stats.failed_checkpoints());
     }},
    {"ps_job_last_checkpoint_seq",
     "The number of the shard's latest checkpoint written (in its run).", MetricType::kGauge,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       if (const ShardCheckpoint* c = LatestCheckpoint(j.stats)) w->Sample(f, j.labels, c->seq());
     }},
    {"ps_job_last_checkpoint_timestamp_seconds",
     "When the shard's latest checkpoint was written (Unix time).", MetricType::kGauge,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       if (const ShardCheckpoint* c = LatestCheckpoint(j.stats)) {
         w->Sample(f, j.labels, c->written_at_ms() / 1000.0);
       }
     }},
    {"ps_job_last_checkpoint_bytes", "The size of the shard's latest checkpoint file.",
     MetricType::kGauge,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       if (const ShardCheckpoint* c = LatestCheckpoint(j.stats)) w->Sample(f, j.labels, c->bytes());
     }},
    {"ps_job_last_checkpoint_write_seconds",
     "How long writing the shard's latest checkpoint file took.", MetricType::kGauge,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       if (const ShardCheckpoint* c = LatestCheckpoint(j.stats)) {
         w->Sample(f, j.labels, c->write_ms() / 1000.0);
       }
     }},
    {"ps_job_checkpoint_write_seconds", "How long writing each checkpoint file of the shard took.",
     MetricType::kHistogram,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       j.job.checkpoint_write_seconds().Write(f, j.labels, w);
     }},
    {"ps_job_park_seconds",
     "How long pulls waited at the shard (SYNC barrier, SSP bound), of those that waited.",
     MetricType::kHistogram,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       j.job.park_seconds().Write(f, j.labels, w);
     }},
    {"ps_job_oldest_parked_pull_seconds",
     "How long the oldest pull waiting right now has waited (0: none waits).", MetricType::kGauge,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       w->Sample(f, j.labels, j.stats.oldest_parked_pull_ms() / 1000.0);
     }},
    {"ps_job_requests_total",
     "Pull, Push and PushPull calls that named the job, by method and status code.",
     MetricType::kCounter,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       for (JobMethod method : kJobMethods) {
         for (int code = 0; code < JobTraffic::kNumCodes; ++code) {
           const int64_t calls = j.job.traffic().calls(method, code);
           if (calls == 0) continue;
           MetricLabels series = j.With("method", JobMethodName(method));
           series.emplace_back("code",
                               absl::StatusCodeToString(static_cast<absl::StatusCode>(code)));
           w->Sample(f, series, static_cast<double>(calls));
         }
       }
     }},
    {"ps_job_received_bytes_total", "Bytes of the calls that named the job.",
     MetricType::kCounter,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       w->Sample(f, j.labels, j.stats.bytes_received());
     }},
    {"ps_job_sent_bytes_total", "Bytes of the answers to calls that named the job.",
     MetricType::kCounter,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       w->Sample(f, j.labels, j.stats.bytes_sent());
     }},
    {"ps_job_staleness",
     "Staleness of applied gradients (version at apply time minus version read).",
     MetricType::kHistogram,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       WriteStaleness(f, j.labels, j.stats.staleness(), w);
     }},
    {"ps_job_worker_staleness", "ps_job_staleness of one worker's gradients.",
     MetricType::kHistogram,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       for (const WorkerStats& worker : j.stats.workers()) {
         WriteStaleness(f, j.With("worker", absl::StrCat(worker.worker())), worker.staleness(),
                        w);
       }
     }},
    {"ps_job_worker_gradients_applied_total", "ps_job_gradients_applied_total of one worker.",
     MetricType::kCounter,
     [](const char* f, const JobView& j, MetricsWriter* w) {
       for (const WorkerStats& worker : j.stats.workers()) {
         w->Sample(f, j.With("worker", absl::StrCat(worker.worker())), worker.applied());
       }
     }},
};

}  // namespace

void ParameterService::WriteMetrics(MetricsWriter* writer) {
  std::vector<std::shared_ptr<ShardJob>> jobs;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, job] : jobs_) jobs.push_back(job);
  }
  const std::string shard = absl::StrCat(options_.ps_index);
  writer->Family("ps_jobs", "Jobs this ps holds (finished ones until forgotten).",
                 MetricType::kGauge);
  writer->Sample("ps_jobs", {{"shard", shard}}, static_cast<double>(jobs.size()));
  byte_budget_->WriteMetrics(writer, {{"shard", shard}});
  if (shared_memory_ != nullptr) {
    writer->Family("ps_shared_memory_bytes",
                   "Bytes of the shared memory segments open for workers on this host (at most "
                   "--shared_memory_mb).",
                   MetricType::kGauge);
    writer->Sample("ps_shared_memory_bytes", {{"shard", shard}},
                   static_cast<double>(shared_memory_->bytes()));
    writer->Family("ps_shared_memory_segments",
                   "Shared memory segments open for workers on this host.", MetricType::kGauge);
    writer->Sample("ps_shared_memory_segments", {{"shard", shard}},
                   static_cast<double>(shared_memory_->segments()));
  }
  if (bulk_streams_ != nullptr) {
    const BulkTraffic traffic = bulk_streams_->traffic();
    writer->Family("ps_bulk_streams", "Bulk streams open to workers (docs/bulk_streams.md).",
                   MetricType::kGauge);
    writer->Sample("ps_bulk_streams", {{"shard", shard}},
                   static_cast<double>(bulk_streams_->streams()));
    writer->Family("ps_bulk_frames_total",
                   "Pulls whose values went on a bulk stream instead of in the answer.",
                   MetricType::kCounter);
    writer->Sample("ps_bulk_frames_total", {{"shard", shard}},
                   static_cast<double>(traffic.frames_sent));
    writer->Family("ps_bulk_bytes_total", "Bytes of values sent on bulk streams.",
                   MetricType::kCounter);
    writer->Sample("ps_bulk_bytes_total", {{"shard", shard}},
                   static_cast<double>(traffic.bytes_sent));
    writer->Family("ps_bulk_push_frames_total",
                   "Pushes whose gradient came on a bulk stream instead of in the request.",
                   MetricType::kCounter);
    writer->Sample("ps_bulk_push_frames_total", {{"shard", shard}},
                   static_cast<double>(traffic.frames_received));
    writer->Family("ps_bulk_push_bytes_total", "Bytes of gradients read from bulk streams.",
                   MetricType::kCounter);
    writer->Sample("ps_bulk_push_bytes_total", {{"shard", shard}},
                   static_cast<double>(traffic.bytes_received));
  }
  if (jobs.empty()) return;
  std::vector<JobStats> stats;
  std::vector<JobView> views;
  stats.reserve(jobs.size());
  for (const std::shared_ptr<ShardJob>& job : jobs) stats.push_back(job->Stats());
  for (size_t i = 0; i < jobs.size(); ++i) {
    views.push_back({stats[i], *jobs[i], {{"job_id", stats[i].job_id()}, {"shard", shard}}});
  }
  for (const JobFamily& family : kJobFamilies) {
    writer->Family(family.name, family.help, family.type);
    for (const JobView& job : views) family.write(family.name, job, writer);
  }
}

}  // namespace ps
