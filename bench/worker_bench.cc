// Worker throughput: examples per second per worker for an MLP 784-256-256-10 (--hidden) at
// batch 128 on the CPU, and the share of step time spent computing against pulling and pushing.
//
//   bazel run -c opt //bench:worker_bench -- --ps=2 --workers=1 --steps=200 --mode=SYNC
//
// The ps tasks run in this process on 127.0.0.1 (so they share the machine's cores with the
// workers, as on a one-machine cluster); each worker is a training thread with its own ps
// client, running the real trainer (worker/trainer.h) on synthetic MNIST-shaped data.
#include <iostream>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/daemon.h"
#include "common/ps_client.h"
#include "server/ps_server.h"
#include "worker/compute/compute_backend.h"
#include "worker/compute/cpu_threads.h"
#include "worker/trainer.h"

DEFINE_int32(ps, 2, "ps tasks");
DEFINE_int32(workers, 1, "training threads (workers)");
DEFINE_int32(steps, 200, "steps per worker");
DEFINE_int32(batch_size, 128, "examples per step per worker");
DEFINE_int32(compute_threads, 0, "BLAS threads (one pool per process); 0: cores / workers");
DEFINE_string(mode, "SYNC", "consistency mode: SYNC, ASYNC, SSP or SOFTSYNC");
DEFINE_string(hidden, "256,256", "the MLP's hidden layer sizes, comma-separated");

namespace ps {
namespace {

JobSpec BenchJob(ConsistencyConfig::Mode mode) {
  JobSpec spec;
  spec.set_job_id("worker-bench");
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
  spec.mutable_consistency()->set_mode(mode);
  spec.mutable_consistency()->set_ssp_bound(2);
  spec.mutable_consistency()->set_softsync_n(1);
  spec.set_batch_size(FLAGS_batch_size);
  spec.set_steps(FLAGS_steps);
  spec.set_seed(1);
  return spec;
}

int Run() {
  ConsistencyConfig::Mode mode;
  if (!ConsistencyConfig::Mode_Parse(FLAGS_mode, &mode) ||
      mode == ConsistencyConfig::MODE_UNSPECIFIED) {
    std::cerr << "--mode must be SYNC, ASYNC, SSP or SOFTSYNC\n";
    return 2;
  }
  int blas_threads = FLAGS_compute_threads > 0
                    ? FLAGS_compute_threads
                    : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                      FLAGS_workers);
  SetCpuComputeThreads(blas_threads);
  std::vector<std::unique_ptr<PsServer>> servers;
  PsClientOptions client_options;
  for (int i = 0; i < FLAGS_ps; ++i) {
    PsServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.service.ps_index = i;
    options.service.num_ps = FLAGS_ps;
    absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(options);
    if (!server.ok()) {
      std::cerr << server.status() << "\n";
      return 1;
    }
    client_options.ps_addresses.push_back(absl::StrCat("127.0.0.1:", (*server)->bound_port()));
    servers.push_back(*std::move(server));
  }
  JobSpec spec = BenchJob(mode);
  std::vector<JobProgress> last(FLAGS_workers);
  std::vector<absl::Status> results(FLAGS_workers);
  std::vector<std::thread> threads;
  std::atomic<bool> stop{false};
  for (int w = 0; w < FLAGS_workers; ++w) {
    threads.emplace_back([&, w] {
      std::unique_ptr<PsClient> client = *PsClient::Create(client_options);
      std::unique_ptr<ComputeBackend> backend = CreateCpuBackend();
      TrainerContext context;
      context.spec = spec;
      context.worker = w;
      context.num_workers = FLAGS_workers;
      context.ps = client.get();
      context.backend = backend.get();
      context.stop = &stop;
      context.report = [&last, w](const JobProgress& progress) { last[w] = progress; };
      results[w] = RunTrainer(context);
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::cout << absl::StrFormat(
      "MLP 784-%s-10, batch %d, %s, %d ps + %d worker(s), %d steps, CPU backend with %d "
      "BLAS thread(s)\n",
      absl::StrReplaceAll(FLAGS_hidden, {{",", "-"}}), FLAGS_batch_size, FLAGS_mode, FLAGS_ps, FLAGS_workers, FLAGS_steps, blas_threads);
  std::cout << "worker  examples/s  compute%  pull+push%  other%\n";
  for (int w = 0; w < FLAGS_workers; ++w) {
    if (!results[w].ok()) {
      std::cerr << "worker " << w << ": " << results[w] << "\n";
      return 1;
    }
    const JobProgress& p = last[w];
    double total = p.elapsed_seconds();
    double compute = 100 * p.compute_seconds() / total;
    double communication = 100 * p.communication_seconds() / total;
    std::cout << absl::StrFormat("%6d  %10.0f  %8.1f  %10.1f  %6.1f\n", w,
                                 p.examples_per_second(), compute, communication,
                                 100 - compute - communication);
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
