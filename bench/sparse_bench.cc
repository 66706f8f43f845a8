// Sparse rows over gRPC (issue 20's benchmark): rows per second pulled and pushed through
// WorkerSession (keys split by SparseShardOf, rows after the dense values) for a table of
// --rows rows of --width floats held by in-process ps on loopback, 1 ps + 1 client and 2 ps + 2
// clients (each client a thread with its own connections), batches of 1,000 and 100,000 distinct
// random keys, ASYNC with plain SGD. The table is filled first (every row made by a pull).
// Build with -c opt:
//   bazel run -c opt //bench:sparse_bench -- --rows=10000000 --width=64
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gflags/gflags.h>

#include "common/client/ps_client.h"
#include "bench/sparse_keys.h"
#include "common/random.h"
#include "common/client/worker_session.h"
#include "server/testing/in_process_ps_cluster.h"
#include "server/testing/sparse_job.h"

DEFINE_int64(rows, 10000000, "rows of the table (made first)");
DEFINE_int64(width, 64, "floats a row");
DEFINE_int32(rounds, 5, "timed batches per client and case (the median is used)");

namespace ps {
namespace {

ParameterSpec Spec(int clients) {
  SparseJob job;
  job.job_id = "sparse-bench";
  job.num_workers = clients;
  job.width = FLAGS_width;
  job.initializer_scale = 0.01f;
  job.learning_rate = 0.01f;
  return SparseJobSpec(job);
}

struct Client {
  std::unique_ptr<PsClient> client;
  std::unique_ptr<WorkerSession> session;
};

int Run() {
  std::printf("%-18s %-6s %-8s %14s %14s\n", "cluster", "batch", "op", "rows/s", "MB/s rows");
  for (int n : {1, 2}) {
    InProcessPsClusterOptions options;
    options.num_ps = n;
    absl::StatusOr<std::unique_ptr<InProcessPsCluster>> cluster =
        InProcessPsCluster::Start(options);
    if (!cluster.ok()) return 1;
    std::vector<Client> clients(n);
    const ParameterSpec spec = Spec(n);
    for (int c = 0; c < n; ++c) {
      PsClientOptions client_options;
      client_options.ps_addresses = (*cluster)->addresses();
      clients[c].client = *PsClient::Create(client_options);
      if (c == 0 && !clients[c].client->CreateJob(spec).ok()) return 1;
      clients[c].session = *WorkerSession::Create(clients[c].client.get(), spec, c);
    }
    // Fill: every row made by a pull of 100,000 keys at a time.
    const auto fill_start = std::chrono::steady_clock::now();
    std::vector<float> bias(1);
    constexpr int64_t kFill = 100000;
    std::vector<float> rows(kFill * FLAGS_width);
    for (int64_t begin = 0; begin < FLAGS_rows; begin += kFill) {
      std::vector<uint64_t> keys;
      for (int64_t id = begin; id < std::min(FLAGS_rows, begin + kFill); ++id) {
        keys.push_back(RowKey(id));
      }
      if (!clients[0]
               .session
               ->Pull({}, {{"b", absl::MakeSpan(bias)}},
                      {{"emb", keys, absl::MakeSpan(rows.data(), keys.size() * FLAGS_width)}})
               .ok()) {
        return 1;
      }
    }
    std::fprintf(stderr, "%d ps: %lld rows made in %.1f s\n", n,
                 static_cast<long long>(FLAGS_rows),
                 Seconds(std::chrono::steady_clock::now() - fill_start));
    for (int64_t batch : {int64_t{1000}, int64_t{100000}}) {
      for (bool push : {false, true}) {
        std::vector<double> rates(n);
        std::vector<std::thread> threads;
        for (int c = 0; c < n; ++c) {
          threads.emplace_back([&, c] {
            SplitMix64 random(7 + c + batch + push);
            std::vector<float> buffer(batch * FLAGS_width, 0.001f), bias_values(1, 0.0f);
            std::vector<double> per_batch;
            for (int r = 0; r < FLAGS_rounds; ++r) {
              const std::vector<uint64_t> keys = DistinctRandomKeys(random, FLAGS_rows, batch);
              const auto start = std::chrono::steady_clock::now();
              const bool ok =
                  push ? clients[c]
                             .session
                             ->Push({}, {{"b", absl::MakeConstSpan(bias_values)}},
                                    {{"emb", keys, absl::MakeConstSpan(buffer)}})
                             .ok()
                       : clients[c]
                             .session
                             ->Pull({}, {{"b", absl::MakeSpan(bias_values)}},
                                    {{"emb", keys, absl::MakeSpan(buffer)}})
                             .ok();
              if (!ok) std::exit(1);
              per_batch.push_back(batch / Seconds(std::chrono::steady_clock::now() - start));
            }
            std::sort(per_batch.begin(), per_batch.end());
            rates[c] = per_batch[per_batch.size() / 2];
          });
        }
        for (std::thread& thread : threads) thread.join();
        double total = 0;
        for (double rate : rates) total += rate;
        std::printf("%-18s %-6lld %-8s %14.0f %14.1f\n",
                    (std::to_string(n) + " ps + " + std::to_string(n) + " client").c_str(),
                    static_cast<long long>(batch), push ? "push" : "pull", total,
                    total * FLAGS_width * 4 / 1e6);
        std::fflush(stdout);
      }
    }
    clients.clear();
    (*cluster)->Shutdown();
  }
  return 0;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return ps::Run();
}
