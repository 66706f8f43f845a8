// Worker throughput: examples per second per worker for an MLP 784-256-256-10 (--hidden) at
// batch 128 on the CPU, and the share of step time spent computing against pulling and pushing.
//
//   bazel run -c opt //bench:worker_bench -- --ps=2 --workers=1 --steps=200 --mode=SYNC
//
// The ps tasks run in this process on 127.0.0.1 (so they share the machine's cores with the
// workers, as on a one-machine cluster); each worker is a training thread with its own ps
// client, running the real trainer (worker/trainer.h) on synthetic MNIST-shaped data.
//
// The cost of a trace (JobSpec.trace): --trace_compare=N runs the job 2N times, without and with
// a trace in turn (each run a job of its own on the same ps), and prints each run's steps per
// second and the median of the traced runs' over the untraced ones':
//
//   bazel run -c opt //bench:worker_bench -- --trace_compare=5 --hidden=32 --batch_size=16
//       --steps=2000 --mode=ASYNC   (one command line)
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/process/daemon.h"
#include "common/client/ps_client.h"
#include "proto/ps_service.grpc.pb.h"
#include "server/testing/in_process_ps_cluster.h"
#include "worker/compute/compute_backend.h"
#include "worker/compute/device.h"
#include "worker/compute/cpu_threads.h"
#include "worker/compute/forwarding_backend.h"
#include "common/trace/trace_recorder.h"
#include "worker/trainer.h"

DEFINE_int32(ps, 2, "ps tasks");
DEFINE_int32(workers, 1, "training threads (workers)");
DEFINE_int32(steps, 200, "steps per worker");
DEFINE_int32(batch_size, 128, "examples per step per worker");
DEFINE_int32(compute_threads, 0, "BLAS threads (one pool per process); 0: cores / workers");
DEFINE_string(mode, "SYNC", "consistency mode: SYNC, ASYNC, SSP or SOFTSYNC");
DEFINE_string(optimizer, "SGD", "the job's optimizer: SGD, MOMENTUM, ADAGRAD or ADAM");
DEFINE_string(hidden, "256,256", "the MLP's hidden layer sizes, comma-separated");
DEFINE_string(device, "cpu", "auto, cpu or cuda:N (as ps_worker's --device), for every worker");
DEFINE_double(checkpoint_every_s, 0,
              "take a checkpoint of the job on every ps this often while it trains, as psctl "
              "arms them (the snapshot and the background write are the ps's); 0: none");
DEFINE_string(checkpoint_dir, "/var/tmp/worker_bench_checkpoints",
              "the ps's --checkpoint_dir for --checkpoint_every_s (removed at the end)");
DEFINE_int32(trace_compare, 0,
             "runs of the job with and of it without a trace (JobSpec.trace), alternating; "
             "prints their steps per second and the ratio (0: one run, as the flags say)");
DEFINE_bool(overlap, false,
            "ASYNC: DownpourSpec.overlap_communication (push and pull while the next step "
            "computes)");

namespace ps {
namespace {

// Forwards to `inner` and times its host <-> device copies and its matrix products apart from
// the rest: each waits for the work queued before it, then for itself (so on a GPU they no
// longer overlap other work while timed, and the split shows what each costs alone). On the
// CPU copies are memcpy.
class CopyTimingBackend : public ForwardingBackend {
 public:
  explicit CopyTimingBackend(std::unique_ptr<ComputeBackend> inner)
      : ForwardingBackend(std::move(inner)) {}

  absl::Duration copy_time() const { return copy_time_; }
  absl::Duration gemm_time() const { return gemm_time_; }
  double gemm_flops() const { return gemm_flops_; }

  void CopyToDevice(const float* host, size_t count, float* device) override {
    Timed(&copy_time_, [&] { inner().CopyToDevice(host, count, device); });
  }
  void CopyToHost(const float* device, size_t count, float* host) override {
    Timed(&copy_time_, [&] { inner().CopyToHost(device, count, host); });
  }
  void Gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a,
            const float* b, float beta, float* c) override {
    Timed(&gemm_time_,
          [&] { inner().Gemm(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c); });
    gemm_flops_ += 2.0 * m * n * k;
  }

 private:
  // Adds to `*total` how long `work` takes alone: it waits for the work queued before it, then
  // for itself.
  template <typename Work>
  void Timed(absl::Duration* total, Work work) {
    inner().Synchronize();
    const absl::Time start = absl::Now();
    work();
    inner().Synchronize();
    *total += absl::Now() - start;
  }

  absl::Duration copy_time_;
  absl::Duration gemm_time_;
  double gemm_flops_ = 0;
};

JobSpec BenchJob(ConsistencyConfig::Mode mode) {
  JobSpec spec;
  spec.set_job_id("worker-bench");
  spec.set_run_id("bench");
  spec.mutable_model()->set_kind(ModelSpec::MLP);
  for (absl::string_view size : absl::StrSplit(FLAGS_hidden, ',', absl::SkipEmpty())) {
    int hidden = 0;
    if (!absl::SimpleAtoi(size, &hidden) || hidden < 1) {
      LOG(FATAL) << "--hidden: \"" << size << "\" is not a positive layer size";
    }
    spec.mutable_model()->add_hidden_sizes(hidden);
  }
  SyntheticData* data = spec.mutable_data()->mutable_synthetic();
  data->set_kind(SyntheticData::GAUSSIAN_MIXTURE);
  data->set_num_examples(20000);
  data->set_feature_dim(784);
  data->set_num_classes(10);
  spec.mutable_learning_rate()->set_base(0.01f);
  OptimizerConfig::Kind optimizer;
  if (!OptimizerConfig::Kind_Parse(FLAGS_optimizer, &optimizer)) {
    LOG(FATAL) << "--optimizer: \"" << FLAGS_optimizer
               << "\" is not SGD, MOMENTUM, ADAGRAD or ADAM";
  }
  spec.mutable_optimizer()->set_kind(optimizer);
  spec.mutable_consistency()->set_mode(mode);
  spec.mutable_consistency()->set_ssp_bound(2);
  spec.mutable_consistency()->set_softsync_n(1);
  spec.set_batch_size(FLAGS_batch_size);
  spec.set_steps(FLAGS_steps);
  spec.set_seed(1);
  spec.mutable_downpour()->set_overlap_communication(FLAGS_overlap);
  return spec;
}

// Arms a checkpoint of `spec` on every ps every --checkpoint_every_s, taken at once, as psctl
// arms them, until `trained`.
void TakeCheckpoints(const JobSpec& spec, const std::vector<std::string>& addresses,
                     const std::atomic<bool>& trained) {
  if (FLAGS_checkpoint_every_s <= 0) return;
  std::vector<std::unique_ptr<ParameterServer::Stub>> stubs;
  for (const std::string& address : addresses) {
    stubs.push_back(ParameterServer::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials())));
  }
  int64_t seq = 0;
  absl::Time next = absl::Now() + absl::Seconds(FLAGS_checkpoint_every_s);
  while (!trained.load()) {
    if (absl::Now() < next) {
      absl::SleepFor(absl::Milliseconds(20));
      continue;
    }
    next += absl::Seconds(FLAGS_checkpoint_every_s);
    ++seq;
    for (auto& stub : stubs) {
      grpc::ClientContext context;
      ArmCheckpointRequest request;
      request.set_job_id(spec.job_id());
      request.set_run_id(spec.run_id());
      request.set_seq(seq);
      request.set_at_clock(-1);
      ArmCheckpointResponse response;
      grpc::Status status = stub->ArmCheckpoint(&context, request, &response);
      if (!status.ok()) LOG(WARNING) << "checkpoint " << seq << ": " << status.error_message();
    }
  }
}

// Prints the checkpoints the shards wrote, and removes them.
void ReportCheckpoints(const JobSpec& spec, const PsClientOptions& client_options) {
  std::unique_ptr<PsClient> client = *PsClient::Create(client_options);
  absl::StatusOr<std::vector<JobStats>> stats = client->GetJobStats(spec.job_id());
  int64_t written = 0, failed = 0, bytes = 0;
  for (const JobStats& shard : stats.ok() ? *stats : std::vector<JobStats>()) {
    failed += shard.failed_checkpoints();
    for (const ShardCheckpoint& checkpoint : shard.checkpoints()) {
      written += checkpoint.error().empty() ? 1 : 0;
      bytes += checkpoint.bytes();
    }
  }
  std::cout << absl::StrFormat("checkpoints: %d shard files written (%.0f MB in all), %d failed, "
                               "every %.1f s\n",
                               written, bytes / 1e6, failed, FLAGS_checkpoint_every_s);
  std::filesystem::remove_all(FLAGS_checkpoint_dir);
}

// --trace_compare: the job's runs without and with a trace in turn, each worker on a thread of
// its own as in Run (traced runs record into a TraceRecorder per worker, as ps_worker does, and
// the shards record theirs).
int CompareTrace(JobSpec spec, const Device& device, const PsClientOptions& client_options) {
  std::vector<double> ratios;
  int64_t total_events = 0;
  double traced_steps = 0, traced_seconds = 0;  // Over the traced runs' workers.
  std::cout << "round  untraced steps/s  traced steps/s  traced/untraced  events\n";
  for (int round = 0; round < FLAGS_trace_compare; ++round) {
    double steps_per_second[2] = {0, 0};
    int64_t events = 0;
    // Each side first in every other round (a drift in the machine's speed favours neither), and
    // each run's job deleted after it (the ps holds no more jobs for the later runs).
    for (const bool traced : {round % 2 == 1, round % 2 == 0}) {
      spec.set_job_id(absl::StrCat("worker-bench-", round, traced ? "-traced" : ""));
      spec.set_trace(traced);
      std::vector<std::unique_ptr<TraceRecorder>> recorders;
      for (int w = 0; w < FLAGS_workers; ++w) {
        recorders.push_back(traced ? std::make_unique<TraceRecorder>(Clock::Real()) : nullptr);
      }
      std::vector<absl::Status> results(FLAGS_workers);
      std::vector<JobProgress> last(FLAGS_workers);
      std::vector<std::thread> threads;
      std::atomic<bool> stop{false};
      for (int w = 0; w < FLAGS_workers; ++w) {
        threads.emplace_back([&, w] {
          std::unique_ptr<PsClient> client = *PsClient::Create(client_options);
          absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = CreateBackend(device);
          if (!backend.ok()) {
            results[w] = backend.status();
            return;
          }
          TrainerContext context;
          context.spec = spec;
          context.worker = w;
          context.num_workers = FLAGS_workers;
          context.ps = client.get();
          context.backend = backend->get();
          context.stop = &stop;
          context.trace = recorders[w].get();
          context.report = [&last, w](const JobProgress& progress) { last[w] = progress; };
          results[w] = RunTrainer(context);
        });
      }
      for (std::thread& thread : threads) thread.join();
      for (int w = 0; w < FLAGS_workers; ++w) {
        if (!results[w].ok()) {
          std::cerr << "worker " << w << ": " << results[w] << "\n";
          return 1;
        }
        steps_per_second[traced] += static_cast<double>(last[w].step()) /
                                    std::max(last[w].elapsed_seconds(), 1e-9);
        if (traced) {
          events += recorders[w]->Snapshot().events_size();
          traced_steps += static_cast<double>(last[w].step());
          traced_seconds += last[w].elapsed_seconds();
        }
      }
      if (traced) {  // The shards' events too.
        absl::StatusOr<std::vector<Trace>> shards =
            (*PsClient::Create(client_options))->GetTraces(spec.job_id());
        for (const Trace& shard : shards.ok() ? *shards : std::vector<Trace>()) {
          events += shard.events_size();
        }
      }
      if (traced) total_events += events;
      absl::Status deleted = (*PsClient::Create(client_options))->DeleteJob(spec.job_id());
      if (!deleted.ok()) std::cerr << "deleting " << spec.job_id() << ": " << deleted << "\n";
    }
    ratios.push_back(steps_per_second[1] / steps_per_second[0]);
    std::cout << absl::StrFormat("%5d  %16.0f  %14.0f  %15.3f  %6d\n", round, steps_per_second[0],
                                 steps_per_second[1], ratios.back(), events);
  }
  // What recording costs alone: a recorder's Record, on one thread, as many times as the traced
  // runs recorded events (workers' and shards'), against the traced runs' worker time.
  TraceRecorder recorder(Clock::Real(), total_events);
  const absl::Time start = absl::Now();
  for (int64_t i = 0; i < total_events; ++i) {
    recorder.Record(TraceEvent::COMPUTE, start, start, i, 0);
  }
  const double record_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::cout << absl::StrFormat(
      "recording alone: %.0f ns an event; the traced runs' %d events (%.1f a step) took %.4f s "
      "to record, %.3f%% of their %.1f worker-seconds\n",
      1e9 * record_seconds / std::max<int64_t>(1, total_events), total_events,
      total_events / std::max(traced_steps, 1.0), record_seconds,
      100 * record_seconds / std::max(traced_seconds, 1e-9), traced_seconds);
  std::sort(ratios.begin(), ratios.end());
  std::cout << absl::StrFormat(
      "median traced/untraced steps per second: %.3f (range %.3f to %.3f, %d rounds; the "
      "workers' own events, %d workers, and the shards')\n",
      ratios[ratios.size() / 2], ratios.front(), ratios.back(), FLAGS_trace_compare,
      FLAGS_workers);
  return 0;
}

int Run() {
  ConsistencyConfig::Mode mode;
  if (!ConsistencyConfig::Mode_Parse(FLAGS_mode, &mode) ||
      mode == ConsistencyConfig::MODE_UNSPECIFIED) {
    std::cerr << "--mode must be SYNC, ASYNC, SSP or SOFTSYNC\n";
    return 2;
  }
  if (FLAGS_overlap && mode != ConsistencyConfig::ASYNC) {
    std::cerr << "--overlap needs --mode=ASYNC (only ASYNC lets a step run before the previous "
                 "one's update is in)\n";
    return 2;
  }
  int blas_threads = FLAGS_compute_threads > 0
                    ? FLAGS_compute_threads
                    : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                      FLAGS_workers);
  SetCpuComputeThreads(blas_threads);
  InProcessPsClusterOptions cluster_options;
  cluster_options.num_ps = FLAGS_ps;
  cluster_options.server.service.checkpoint_dir = FLAGS_checkpoint_dir;
  absl::StatusOr<std::unique_ptr<InProcessPsCluster>> servers =
      InProcessPsCluster::Start(cluster_options);
  if (!servers.ok()) {
    std::cerr << servers.status() << "\n";
    return 1;
  }
  PsClientOptions client_options;
  client_options.ps_addresses = (*servers)->addresses();
  absl::StatusOr<Device> device = SelectDevice(FLAGS_device, QueryUsableGpus());
  if (!device.ok()) {
    std::cerr << "--device: " << device.status() << "\n";
    return 2;
  }
  JobSpec spec = BenchJob(mode);
  if (FLAGS_trace_compare > 0) return CompareTrace(spec, *device, client_options);
  std::vector<absl::Duration> copy_times(FLAGS_workers), gemm_times(FLAGS_workers);
  std::vector<double> gemm_flops(FLAGS_workers);
  std::vector<JobProgress> last(FLAGS_workers);
  std::vector<absl::Status> results(FLAGS_workers);
  std::vector<std::thread> threads;
  std::atomic<bool> stop{false};
  for (int w = 0; w < FLAGS_workers; ++w) {
    threads.emplace_back([&, w] {
      std::unique_ptr<PsClient> client = *PsClient::Create(client_options);
      absl::StatusOr<std::unique_ptr<ComputeBackend>> created = CreateBackend(*device);
      if (!created.ok()) {
        results[w] = created.status();
        return;
      }
      auto backend = std::make_unique<CopyTimingBackend>(*std::move(created));
      TrainerContext context;
      context.spec = spec;
      context.worker = w;
      context.num_workers = FLAGS_workers;
      context.ps = client.get();
      context.backend = backend.get();
      context.stop = &stop;
      context.report = [&last, w](const JobProgress& progress) { last[w] = progress; };
      results[w] = RunTrainer(context);
      copy_times[w] = backend->copy_time();
      gemm_times[w] = backend->gemm_time();
      gemm_flops[w] = backend->gemm_flops();
    });
  }
  std::atomic<bool> trained{false};
  std::thread checkpointer([&] { TakeCheckpoints(spec, (*servers)->addresses(), trained); });
  for (std::thread& thread : threads) thread.join();
  trained = true;
  checkpointer.join();
  if (FLAGS_checkpoint_every_s > 0) ReportCheckpoints(spec, client_options);
  std::cout << absl::StrFormat(
      "MLP 784-%s-10, batch %d, %s, %s%s, %d ps + %d worker(s), %d steps, on %s%s\n",
      absl::StrReplaceAll(FLAGS_hidden, {{",", "-"}}), FLAGS_batch_size, FLAGS_optimizer,
      FLAGS_mode,
      FLAGS_overlap ? " with overlapped communication" : "", FLAGS_ps,
      FLAGS_workers, FLAGS_steps, device->description,
      device->kind == Device::Kind::kCpu ? absl::StrCat(" with ", blas_threads, " BLAS thread(s)")
                                         : "");
  // compute: the model's forward and backward passes without the host <-> device copies
  // (copies: weights in, gradients out, timed alone); pull+push: talking to the ps, waiting
  // at barriers included (with --overlap: only the waiting for an exchange not yet done).
  // gemm%: the share of the step in matrix products, each timed alone (part of compute);
  // gemm GFLOP/s: their rate (2 m n k a product), to compare with gemm_bench's for the shapes.
  std::cout << "worker  examples/s  step ms  compute%  (gemm%)  copies%  pull+push%  other%"
               "  staleness  gemm GFLOP/s\n";
  for (int w = 0; w < FLAGS_workers; ++w) {
    if (!results[w].ok()) {
      std::cerr << "worker " << w << ": " << results[w] << "\n";
      return 1;
    }
    const JobProgress& p = last[w];
    const double total = p.elapsed_seconds();
    const double copy_seconds =
        std::min(absl::ToDoubleSeconds(copy_times[w]), p.compute_seconds());
    const double compute = 100 * (p.compute_seconds() - copy_seconds) / total;
    const double copies = 100 * copy_seconds / total;
    const double communication = 100 * p.communication_seconds() / total;
    const double step_ms = 1000 * total / static_cast<double>(std::max<int64_t>(1, p.step()));
    const double gemm_seconds = absl::ToDoubleSeconds(gemm_times[w]);
    std::cout << absl::StrFormat(
        "%6d  %10.0f  %7.2f  %8.1f  %7.1f  %7.1f  %10.1f  %6.1f  %9.2f  %12.1f\n", w,
        p.examples_per_second(), step_ms, compute, 100 * gemm_seconds / total, copies,
        communication, 100 - compute - copies - communication, p.staleness(),
        gemm_flops[w] / 1e9 / std::max(gemm_seconds, 1e-12));
  }
  return 0;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ps::TuneForTensorTraffic();  // As ps_server and ps_worker do.
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;
  google::InitGoogleLogging(argv[0]);
  return ps::Run();
}
