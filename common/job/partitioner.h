// Placement of a job's variables on ps tasks, after TensorFlow's min-size partitioner: each
// variable is cut along dimension 0 into slices of at least `min_slice_bytes` (as many as
// there are ps tasks at most, and no more than it has rows), and slices go largest first to
// the ps task holding the fewest bytes so far (ties: the lower index).
//
// Placement is a pure function of (variables, num_ps, min_slice_bytes): workers, psctl and
// every ps compute the same one, and a ps checks requests against it.
#ifndef PS_COMMON_JOB_PARTITIONER_H_
#define PS_COMMON_JOB_PARTITIONER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/parameter.pb.h"

namespace ps {

inline constexpr int64_t kDefaultMinSliceBytes = 256 * 1024;

// The ps task that holds key `key` of a sparse table (ParameterSpec.sparse_tables) on a cluster of
// `num_ps`: a 64-bit mix of the key, modulo num_ps, so that hashed ids spread evenly. Every party
// (worker, ps, psctl) places keys with this one function. REQUIRES: num_ps >= 1.
int SparseShardOf(uint64_t key, int num_ps);

struct SlicePlacement {
  int variable_index = 0;  // Into the spec's variables.
  std::string variable;
  int64_t row_begin = 0;
  int64_t row_count = 0;
  int64_t row_size = 0;    // Elements per row: the product of the dimensions after the first.
  int ps_task = 0;

  int64_t num_elements() const { return row_count * row_size; }
  int64_t num_bytes() const { return num_elements() * static_cast<int64_t>(sizeof(float)); }
};

struct Placement {
  int num_ps = 0;
  // Every slice of every variable, ordered by (variable_index, row_begin). Each row of each
  // variable lies in exactly one slice.
  std::vector<SlicePlacement> slices;

  // Indices into `slices` of those on `ps_task`, in `slices` order.
  std::vector<int> SlicesOn(int ps_task) const;
  // Bytes placed on `ps_task`.
  int64_t BytesOn(int ps_task) const;
};

// Places `spec.variables()` on `num_ps` tasks with spec.min_slice_bytes() (0: the default).
// INVALID_ARGUMENT, naming the variable, for an empty or repeated name, a missing or
// non-positive dimension, or num_ps < 1.
absl::StatusOr<Placement> PlaceVariables(const ParameterSpec& spec, int num_ps);

}  // namespace ps

#endif  // PS_COMMON_JOB_PARTITIONER_H_
