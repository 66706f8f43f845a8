// ps-lite's side of bench/pslite_compare.sh: push and pull throughput of one dense float32
// tensor (one key) between one ps-lite worker and one ps-lite server on loopback, measured the
// way bench/ps_bench.cc measures ours: one call in flight at a time, for --seconds after a
// warm-up, GB/s = 1e9 bytes of the tensor per second. The server applies each push as SGD
// (w -= lr * g), as our ps does; pulls answer the server's values without a copy (ps-lite's
// zero-copy SArray), pushes send the worker's gradient without one (ZPush).
//
// Built by bench/pslite_compare.sh against a ps-lite checkout (not a Debian package, so not in
// the Bazel build); ps-lite's own launcher variables (DMLC_ROLE, DMLC_PS_ROOT_URI, ...) start it.
// Usage (the worker's role): pslite_bench SIZE_MB[,SIZE_MB...] SECONDS
// Prints one line per size: "pslite size_mb=16 push_gbps=3.81 pull_gbps=4.02".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "ps/ps.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr float kLearningRate = 1e-9f;

// The server's values, per key (one key per size), created at a key's first push.
std::mutex values_mu;
std::unordered_map<ps::Key, ps::SArray<float>> values;

void Handle(const ps::KVMeta& meta, const ps::KVPairs<float>& data, ps::KVServer<float>* server) {
  ps::KVPairs<float> answer;
  if (meta.push) {
    std::lock_guard<std::mutex> lock(values_mu);
    ps::SArray<float>& w = values[data.keys[0]];
    if (w.size() != data.vals.size()) w = ps::SArray<float>(data.vals.size(), 0.f);
    const float* g = data.vals.data();
    float* v = w.data();
    for (size_t i = 0; i < w.size(); ++i) v[i] -= kLearningRate * g[i];
  } else {
    std::lock_guard<std::mutex> lock(values_mu);
    answer.keys = data.keys;
    answer.vals = values[data.keys[0]];  // Shares the memory: no copy.
    answer.lens = ps::SArray<int>(1, static_cast<int>(answer.vals.size()));
  }
  server->Response(meta, answer);
}

double Seconds(Clock::time_point from) {
  return std::chrono::duration<double>(Clock::now() - from).count();
}

void RunWorker(const std::vector<int>& sizes_mb, double seconds) {
  ps::KVWorker<float> kv(0, 0);
  for (size_t s = 0; s < sizes_mb.size(); ++s) {
    const size_t floats = static_cast<size_t>(sizes_mb[s]) << 18;  // MiB / 4 bytes.
    const double bytes = static_cast<double>(floats) * sizeof(float);
    ps::SArray<ps::Key> keys(1, static_cast<ps::Key>(s));
    ps::SArray<int> lens(1, static_cast<int>(floats));
    ps::SArray<float> gradient(floats, 0.5f);
    for (int i = 0; i < 3; ++i) kv.Wait(kv.ZPush(keys, gradient, lens));  // Warm-up.
    int pushes = 0;
    const Clock::time_point push_start = Clock::now();
    while (Seconds(push_start) < seconds) {
      kv.Wait(kv.ZPush(keys, gradient, lens));
      ++pushes;
    }
    const double push_gbps = pushes * bytes / Seconds(push_start) / 1e9;
    ps::SArray<float> out;
    ps::SArray<int> out_lens;
    for (int i = 0; i < 3; ++i) kv.Wait(kv.ZPull(keys, &out, &out_lens));
    int pulls = 0;
    const Clock::time_point pull_start = Clock::now();
    while (Seconds(pull_start) < seconds) {
      kv.Wait(kv.ZPull(keys, &out, &out_lens));
      ++pulls;
    }
    const double pull_gbps = pulls * bytes / Seconds(pull_start) / 1e9;
    if (out.size() != floats) {
      std::fprintf(stderr, "pslite_bench: a pull gave %zu floats, not %zu\n", out.size(), floats);
      std::exit(1);
    }
    std::printf("pslite size_mb=%d push_gbps=%.2f pull_gbps=%.2f\n", sizes_mb[s], push_gbps,
                pull_gbps);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char* argv[]) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SIZE_MB[,SIZE_MB...] SECONDS\n", argv[0]);
    return 2;
  }
  std::vector<int> sizes_mb;
  std::stringstream list(argv[1]);
  for (std::string size; std::getline(list, size, ',');) sizes_mb.push_back(std::atoi(size.c_str()));
  const double seconds = std::atof(argv[2]);
  ps::Start(0);
  if (ps::IsServer()) {
    auto* server = new ps::KVServer<float>(0);
    server->set_request_handle(Handle);
    ps::RegisterExitCallback([server]() { delete server; });
  }
  if (ps::IsWorker()) RunWorker(sizes_mb, seconds);
  ps::Finalize(0, true);
  return 0;
}
