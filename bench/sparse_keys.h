// What the sparse benchmarks share: the keys of a batch and the time of a call.
#ifndef PS_BENCH_SPARSE_KEYS_H_
#define PS_BENCH_SPARSE_KEYS_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "common/random.h"

namespace ps {

// The key of row id `id`: the id scattered over 64 bits, as hashed feature ids are.
inline uint64_t RowKey(uint64_t id) { return Mix64(id); }

// `count` distinct keys of a table's rows (ids 0..rows-1) from a random start with a stride
// prime to `rows`: distinct, as a push's keys are. REQUIRES: count <= rows.
inline std::vector<uint64_t> DistinctRandomKeys(SplitMix64& random, int64_t rows, int64_t count) {
  constexpr uint64_t kStride = 2654435761;  // Prime, and no factor of 10^k.
  std::vector<uint64_t> keys(count);
  uint64_t id = random.Below(static_cast<uint64_t>(rows));
  for (uint64_t& key : keys) {
    key = RowKey(id);
    id = (id + kStride) % static_cast<uint64_t>(rows);
  }
  return keys;
}

inline double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace ps

#endif  // PS_BENCH_SPARSE_KEYS_H_
