// cnn_step_bench: the native worker's compute step for a CNN job on the CPU, for
// bench/cnn_step_bench.sh, which times PyTorch's step for the same network beside it. A step is
// what a worker computes between its pull and its push: the forward pass over a batch, the loss
// and every variable's gradient (Model::ComputeGradients). The update is the ps's, so neither
// side times an optimizer. Prints one JSON line: {"examples_per_second": median over --rounds
// of --steps steps each, "gemm_share": the share of the step inside Gemm}.
//
//   cnn_step_bench --job=config/jobs/fashion_mnist_cnn.json --batch_size=64 --threads=1
#include <algorithm>
#include <map>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/job/job_spec.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "worker/compute/compute_backend.h"
#include "worker/compute/cpu_threads.h"
#include "worker/compute/forwarding_backend.h"
#include "worker/model/model.h"

DEFINE_string(job, "config/jobs/fashion_mnist_cnn.json", "a job file whose model is a CNN");
DEFINE_int32(batch_size, 64, "examples a step");
DEFINE_int32(steps, 40, "steps a round");
DEFINE_int32(rounds, 5, "rounds; the figure is their median");
DEFINE_int32(warmup, 5, "untimed steps first");
DEFINE_int32(threads, 1, "BLAS threads (SetCpuComputeThreads)");
DEFINE_int32(classes, 10, "classes of the output layer");
DEFINE_int64(working_set_floats, -1,
             "the backend's WorkingSetFloats (convolutions work in chunks of about this many "
             "floats; 0: the whole batch at once); -1: the CPU backend's own");
DEFINE_bool(gemm_breakdown, false,
            "also print, to stderr, each Gemm shape's share of the step and its GFLOP/s");

namespace ps {
namespace {

// The CPU backend, adding up the time its Gemms take (in all and per shape), and with
// --working_set_floats in place of its own WorkingSetFloats when given.
class GemmTimingBackend : public ForwardingBackend {
 public:
  explicit GemmTimingBackend(std::unique_ptr<ComputeBackend> inner)
      : ForwardingBackend(std::move(inner)) {}
  absl::Duration gemm_time() const { return gemm_time_; }
  void ResetGemmTime() { gemm_time_ = absl::ZeroDuration(); }
  void ResetShapes() { shapes_.clear(); }

  void Gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a,
            const float* b, float beta, float* c) override {
    const absl::Time start = absl::Now();
    inner().Gemm(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c);
    const absl::Duration took = absl::Now() - start;
    gemm_time_ += took;
    ShapeTime& shape = shapes_[absl::StrFormat("%s%s %dx%dx%d", transpose_a ? "T" : "N",
                                               transpose_b ? "T" : "N", m, n, k)];
    shape.time += took;
    shape.flops += 2.0 * m * n * k;
  }
  size_t WorkingSetFloats() const override {
    return FLAGS_working_set_floats >= 0 ? FLAGS_working_set_floats
                                         : ForwardingBackend::WorkingSetFloats();
  }

  // Each Gemm shape (transposes, m x n x k) with its total time and floating-point operations.
  struct ShapeTime {
    absl::Duration time;
    double flops = 0;
  };
  const std::map<std::string, ShapeTime>& shapes() const { return shapes_; }

 private:
  absl::Duration gemm_time_;
  std::map<std::string, ShapeTime> shapes_;
};

int Run() {
  CHECK(FLAGS_rounds >= 1 && FLAGS_steps >= 1 && FLAGS_batch_size >= 1)
      << "--rounds, --steps and --batch_size must be at least 1";
  absl::StatusOr<JobSpec> job = ReadJobSpecFile(FLAGS_job);
  CHECK(job.ok()) << job.status();
  CHECK(job->model().kind() == ModelSpec::CNN) << FLAGS_job << ": not a CNN job";
  const ImageShape& image = job->model().image();
  const int feature_dim = image.height() * image.width() * image.channels();
  SetCpuComputeThreads(FLAGS_threads);
  GemmTimingBackend backend(CreateCpuBackend());
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(job->model(), feature_dim, FLAGS_classes, FLAGS_batch_size, &backend);
  CHECK(model.ok()) << model.status();

  std::mt19937 random(1);
  std::uniform_real_distribution<float> uniform(-0.05f, 0.05f);
  std::vector<std::vector<float>> weights, gradients;
  ConstVariables weight_view;
  MutableVariables gradient_view;
  weights.reserve((*model)->variables().size());
  gradients.reserve((*model)->variables().size());
  for (const VariableDef& def : (*model)->variables()) {
    int64_t size = 1;
    for (int64_t dim : def.shape()) size *= dim;
    std::vector<float>& w = weights.emplace_back(size);
    for (float& x : w) x = uniform(random);
    gradients.emplace_back(size);
    weight_view[def.name()] = w;
    gradient_view[def.name()] = absl::MakeSpan(gradients.back());
  }
  std::vector<float> features(static_cast<size_t>(FLAGS_batch_size) * feature_dim);
  std::vector<float> labels(FLAGS_batch_size);
  for (float& x : features) x = uniform(random) * 20;
  for (int i = 0; i < FLAGS_batch_size; ++i) labels[i] = static_cast<float>(i % FLAGS_classes);
  const Batch batch{FLAGS_batch_size, feature_dim, features.data(), labels.data()};
  auto step = [&] {
    const absl::StatusOr<BatchMetrics> metrics =
        (*model)->ComputeGradients(batch, weight_view, gradient_view);
    CHECK(metrics.ok()) << metrics.status();
  };

  for (int i = 0; i < FLAGS_warmup; ++i) step();
  backend.ResetShapes();  // The breakdown is of the timed rounds.
  const absl::Time all_start = absl::Now();
  std::vector<double> rates, gemm_shares;
  for (int round = 0; round < FLAGS_rounds; ++round) {
    backend.ResetGemmTime();
    const absl::Time start = absl::Now();
    for (int i = 0; i < FLAGS_steps; ++i) step();
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    rates.push_back(FLAGS_steps * FLAGS_batch_size / seconds);
    gemm_shares.push_back(absl::ToDoubleSeconds(backend.gemm_time()) / seconds);
  }
  if (FLAGS_gemm_breakdown) {
    const absl::Duration all = absl::Now() - all_start;
    for (const auto& [shape, total] : backend.shapes()) {
      std::fprintf(stderr, "%-22s %5.1f%% of the time, %6.1f GFLOP/s\n", shape.c_str(),
                   100 * absl::FDivDuration(total.time, all),
                   total.flops / absl::ToDoubleSeconds(total.time) / 1e9);
    }
  }
  std::sort(rates.begin(), rates.end());
  std::sort(gemm_shares.begin(), gemm_shares.end());
  std::printf("{\"examples_per_second\": %.1f, \"gemm_share\": %.3f}\n", rates[rates.size() / 2],
              gemm_shares[gemm_shares.size() / 2]);
  return 0;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return ps::Run();
}
