// Deterministic initialization of variables on the ps, so that no worker pushes initial
// values. Each row's values are a pure function of (seed, variable name, global row index,
// initializer), so a variable starts the same whatever the number of ps tasks and slices.
#ifndef PS_SERVER_INITIALIZER_H_
#define PS_SERVER_INITIALIZER_H_

#include <cstdint>

#include "absl/types/span.h"
#include "common/job/partitioner.h"
#include "proto/parameter.pb.h"

namespace ps {

// Fills `values` (the slice's row_count * row_size elements) for `slice` of `variable`.
// GLOROT_UNIFORM uses fan_in = shape[0] and fan_out = the product of the other dimensions
// (shape[0] for a vector). REQUIRES: values.size() == slice.num_elements(), and
// ValidateInitializer(variable).ok() (common/job/job_schema.h).
void InitializeSlice(const VariableDef& variable, const SlicePlacement& slice, uint64_t seed,
                     absl::Span<float> values);

}  // namespace ps

#endif  // PS_SERVER_INITIALIZER_H_
