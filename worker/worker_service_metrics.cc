// WorkerService::WriteMetrics: every job's latest progress (what `psctl status` shows) as
// Prometheus families, read at scrape time so that the training loop pays nothing for them.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/metrics/metrics.h"
#include "worker/worker_service.h"

namespace ps {

void WorkerService::WriteMetrics(MetricsWriter* writer) {
  const std::vector<JobProgress> jobs = LatestProgress();
  const std::string worker = absl::StrCat(options_.worker_index);
  auto labels = [&worker](const JobProgress& job) {
    return MetricLabels{{"job_id", job.job_id()}, {"worker", worker}};
  };
  struct Family {
    const char* name;
    const char* help;
    MetricType type;
    double (*value)(const JobProgress& job);
  };
  static const Family kFamilies[] = {
      {"ps_worker_job_running", "1 while the job runs on this worker, 0 once it has ended.",
       MetricType::kGauge,
       [](const JobProgress& job) { return job.state() == JobProgress::RUNNING ? 1.0 : 0.0; }},
      {"ps_worker_steps_total", "Steps this worker has run.", MetricType::kCounter,
       [](const JobProgress& job) { return static_cast<double>(job.step()); }},
      {"ps_worker_global_step", "SYNC: the shards' step; else the smallest shard version.",
       MetricType::kGauge,
       [](const JobProgress& job) { return static_cast<double>(job.global_step()); }},
      {"ps_worker_epoch", "The epoch of the worker's data.", MetricType::kGauge,
       [](const JobProgress& job) { return static_cast<double>(job.epoch()); }},
      {"ps_worker_loss", "Training loss of the last batch.", MetricType::kGauge,
       [](const JobProgress& job) { return job.loss(); }},
      {"ps_worker_examples_per_second", "Training examples per second.", MetricType::kGauge,
       [](const JobProgress& job) { return job.examples_per_second(); }},
      {"ps_worker_staleness_mean", "Mean staleness of this worker's applied gradients so far.",
       MetricType::kGauge, [](const JobProgress& job) { return job.staleness(); }},
      {"ps_worker_compute_seconds_total", "Time spent computing.", MetricType::kCounter,
       [](const JobProgress& job) { return job.compute_seconds(); }},
      {"ps_worker_pull_seconds_total",
       "Time spent getting weights, less the waits at the shards.", MetricType::kCounter,
       [](const JobProgress& job) { return job.pull_seconds(); }},
      {"ps_worker_push_seconds_total",
       "Time spent sending gradients, less the waits at the shards.", MetricType::kCounter,
       [](const JobProgress& job) { return job.push_seconds(); }},
      {"ps_worker_wait_seconds_total",
       "Time pulls waited at the shards (SYNC barriers, SSP bounds), as they reported it.",
       MetricType::kCounter, [](const JobProgress& job) { return job.wait_seconds(); }},
      {"ps_worker_communication_seconds_total", "Pull, push and wait time together.",
       MetricType::kCounter, [](const JobProgress& job) { return job.communication_seconds(); }},
      {"ps_worker_sent_bytes_total",
       "Bytes of the messages the job's exchange sent (serialized; every attempt).",
       MetricType::kCounter,
       [](const JobProgress& job) { return static_cast<double>(job.bytes_sent()); }},
      {"ps_worker_received_bytes_total", "Bytes of the messages the job's exchange received.",
       MetricType::kCounter,
       [](const JobProgress& job) { return static_cast<double>(job.bytes_received()); }},
      {"ps_worker_device_memory_bytes",
       "GPU memory in use on the worker's device (every process's); 0 on the CPU.",
       MetricType::kGauge,
       [](const JobProgress& job) { return static_cast<double>(job.device_memory_bytes()); }},
  };
  for (const Family& family : kFamilies) {
    writer->Family(family.name, family.help, family.type);
    for (const JobProgress& job : jobs) writer->Sample(family.name, labels(job), family.value(job));
  }
}

}  // namespace ps
