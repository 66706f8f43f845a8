// A shard's sparse row table on its own (server/sparse_table.h), without the network: rows per
// second read (a pull's work) and updated (a push's: plain SGD) for a table of --rows rows of
// --width floats, batches of 1,000 and 100,000 random keys, from 1 and 2 threads at once; and
// the memory a row costs beyond its values. Build with -c opt:
//   bazel run -c opt //bench:sparse_table_bench -- --rows=10000000 --width=64
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include <gflags/gflags.h>

#include "bench/sparse_keys.h"
#include "common/random.h"
#include "server/sparse_table.h"

DEFINE_int64(rows, 10000000, "rows the table holds (made first, then read and updated)");
DEFINE_int64(width, 64, "floats a row");
DEFINE_int32(rounds, 5, "timed batches per thread and case (the median is printed)");

namespace ps {
namespace {

// Rows a second over `threads` threads each doing `rounds` batches of `batch` keys of `op`
// (read or update), the median of the threads' batch rates times the threads.
double RowsPerSecond(SparseTable& table, int threads, int64_t batch, bool update) {
  std::vector<double> rates(threads);
  std::vector<std::thread> runners;
  for (int t = 0; t < threads; ++t) {
    runners.emplace_back([&, t] {
      SplitMix64 random(1000 + t + (update ? 100 : 0) + batch);
      std::vector<float> buffer(batch * FLAGS_width, 0.001f);
      std::vector<double> per_batch;
      for (int r = 0; r < FLAGS_rounds; ++r) {
        const std::vector<uint64_t> keys = DistinctRandomKeys(random, FLAGS_rows, batch);
        const auto start = std::chrono::steady_clock::now();
        absl::Status status = update ? table.Update(0.01f, keys, buffer)
                                     : table.Read(keys, absl::MakeSpan(buffer));
        const double took = Seconds(std::chrono::steady_clock::now() - start);
        if (!status.ok()) {
          std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
          std::exit(1);
        }
        per_batch.push_back(batch / took);
      }
      std::sort(per_batch.begin(), per_batch.end());
      rates[t] = per_batch[per_batch.size() / 2];
    });
  }
  for (std::thread& runner : runners) runner.join();
  double total = 0;
  for (double rate : rates) total += rate;
  return total;
}

int Run() {
  SparseTable::Options options;
  options.name = "embedding";
  options.width = FLAGS_width;
  options.initializer.set_kind(InitializerConfig::NORMAL);
  options.initializer.set_scale(0.01f);
  options.optimizer.set_kind(OptimizerConfig::SGD);
  absl::StatusOr<std::unique_ptr<SparseTable>> table = SparseTable::Create(options);
  if (!table.ok()) return 1;
  const auto start = std::chrono::steady_clock::now();
  constexpr int64_t kFill = 100000;
  std::vector<float> out(kFill * FLAGS_width);
  for (int64_t begin = 0; begin < FLAGS_rows; begin += kFill) {
    std::vector<uint64_t> keys;
    for (int64_t k = begin; k < std::min(FLAGS_rows, begin + kFill); ++k) {
      keys.push_back(RowKey(k));
    }
    if (!(*table)->Read(keys, absl::MakeSpan(out.data(), keys.size() * FLAGS_width)).ok()) {
      return 1;
    }
  }
  const double fill = Seconds(std::chrono::steady_clock::now() - start);
  std::printf("table: %lld rows of %lld floats made in %.1f s (%.0f rows/s, initializer "
              "included)\n",
              static_cast<long long>((*table)->rows()), static_cast<long long>(FLAGS_width), fill,
              (*table)->rows() / fill);
  std::printf("memory: values %.0f MiB; beyond them %.1f bytes a row (map slots and control "
              "bytes at capacity, update counts, blocks' unused tails)\n",
              (*table)->RowBytes() / 1048576.0,
              static_cast<double>((*table)->OverheadBytes()) / (*table)->rows());
  std::printf("%-8s %-8s %-8s %14s\n", "op", "threads", "batch", "rows/s");
  for (bool update : {false, true}) {
    for (int threads : {1, 2}) {
      for (int64_t batch : {int64_t{1000}, int64_t{100000}}) {
        std::printf("%-8s %-8d %-8lld %14.0f\n", update ? "update" : "read", threads,
                    static_cast<long long>(batch), RowsPerSecond(**table, threads, batch, update));
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return ps::Run();
}
