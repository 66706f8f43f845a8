// gemm_bench: the compute backend's GEMM throughput, on the CPU or a GPU, against the BLAS
// library called directly on the CPU.
//
//   bazel run -c opt //bench:gemm_bench -- --device=cpu --sizes=1024x4096x784,1024x4096x4096
//
// For each size m x n x k it fills A (m x k), B (k x n) and C (m x n) in the backend's memory,
// then times C = A * B through ComputeBackend::Gemm for --seconds (after a warm-up, ending with
// Synchronize), and prints GFLOP/s (2 m n k per GEMM). On the CPU it also times cblas_sgemm on
// the same shapes directly, the ceiling of the backend's wrapper. On a GPU the backend's Gemm is
// one cublasSgemm call (row-major by swapping the operands), so the figure is cuBLAS's at that
// size; compare it with the device's FP32 peak.
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "worker/compute/compute_backend.h"
#include "worker/compute/cpu_threads.h"
#include "worker/compute/device.h"

DEFINE_string(device, "cpu", "auto, cpu or cuda:N");
DEFINE_string(sizes, "1024x4096x784,1024x4096x4096,1024x10x4096,4096x4096x4096",
              "GEMM shapes m x n x k, comma-separated (the first three: an MLP "
              "784-4096-4096-10 layer's forward pass at batch 1024)");
DEFINE_double(seconds, 2, "timed seconds per measurement, after a warm-up");
DEFINE_int32(threads, 0, "CPU BLAS threads (0: the machine's cores)");

namespace ps {
namespace {

struct Shape {
  int m = 0, n = 0, k = 0;
};

// GEMMs per second of `gemm` over about --seconds; `sync` waits for queued work.
template <typename Gemm, typename Sync>
double GemmsPerSecond(Gemm gemm, Sync sync) {
  gemm();  // Warm-up: first-call setup, page faults, GPU clocks.
  sync();
  int64_t count = 0;
  const absl::Time start = absl::Now();
  absl::Duration elapsed;
  do {
    gemm();
    ++count;
    if (count % 4 == 0) sync();
    elapsed = absl::Now() - start;
  } while (elapsed < absl::Seconds(FLAGS_seconds) || count % 4 != 0);
  sync();
  return static_cast<double>(count) / absl::ToDoubleSeconds(absl::Now() - start);
}

std::vector<float> RandomValues(size_t count) {
  static std::mt19937 random(20261127);
  std::uniform_real_distribution<float> distribution(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = distribution(random);
  return values;
}

int Run() {
  std::vector<Shape> shapes;
  for (absl::string_view field : absl::StrSplit(FLAGS_sizes, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> dims = absl::StrSplit(field, 'x');
    Shape shape;
    if (dims.size() != 3 || !absl::SimpleAtoi(dims[0], &shape.m) ||
        !absl::SimpleAtoi(dims[1], &shape.n) || !absl::SimpleAtoi(dims[2], &shape.k) ||
        shape.m < 1 || shape.n < 1 || shape.k < 1) {
      std::fprintf(stderr, "gemm_bench: --sizes: \"%s\" is not m x n x k (e.g. 1024x4096x784)\n",
                   std::string(field).c_str());
      return 2;
    }
    shapes.push_back(shape);
  }
  SetCpuComputeThreads(FLAGS_threads);
  absl::StatusOr<Device> device = SelectDevice(FLAGS_device, QueryUsableGpus());
  if (!device.ok()) {
    std::fprintf(stderr, "gemm_bench: --device: %s\n", device.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = CreateBackend(*device);
  if (!backend.ok()) {
    std::fprintf(stderr, "gemm_bench: %s\n", backend.status().ToString().c_str());
    return 1;
  }
  ComputeBackend& b = **backend;
  const bool cpu = device->kind == Device::Kind::kCpu;
  std::printf("gemm_bench on %s, %.1f s per measurement; GFLOP/s = 2 m n k per GEMM / 1e9\n",
              device->description.c_str(), FLAGS_seconds);
  std::printf("%-20s %16s %18s\n", "m x n x k", "backend GFLOP/s", cpu ? "cblas GFLOP/s" : "");
  for (const Shape& s : shapes) {
    const size_t a_size = static_cast<size_t>(s.m) * s.k;
    const size_t b_size = static_cast<size_t>(s.k) * s.n;
    const size_t c_size = static_cast<size_t>(s.m) * s.n;
    // Random operands: constants or zeros can run faster than real data does on a GPU.
    std::vector<float> ha = RandomValues(a_size), hb = RandomValues(b_size);
    DeviceArray a(&b, a_size), bm(&b, b_size), c(&b, c_size);
    b.CopyToDevice(ha.data(), a_size, a.data());
    b.CopyToDevice(hb.data(), b_size, bm.data());
    b.Fill(c_size, 0.0f, c.data());
    const double flops = 2.0 * s.m * s.n * s.k;
    const double backend_rate = GemmsPerSecond(
        [&] { b.Gemm(false, false, s.m, s.n, s.k, 1.0f, a.data(), bm.data(), 0.0f, c.data()); },
        [&] { b.Synchronize(); });
    std::printf("%-20s %16.1f", (std::to_string(s.m) + " x " + std::to_string(s.n) + " x " +
                                 std::to_string(s.k)).c_str(),
                backend_rate * flops / 1e9);
    if (cpu) {
      std::vector<float> hc(c_size, 0.0f);
      const double direct_rate = GemmsPerSecond(
          [&] {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, ha.data(),
                        s.k, hb.data(), s.n, 0.0f, hc.data(), s.n);
          },
          [] {});
      std::printf(" %18.1f", direct_rate * flops / 1e9);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  gflags::SetUsageMessage("gemm_bench --device=cpu --sizes=1024x4096x784");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return ps::Run();
}
