// A job's variables as named, contiguous, row-major float arrays in host memory.
#ifndef PS_COMMON_JOB_VARIABLES_H_
#define PS_COMMON_JOB_VARIABLES_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace ps {

using MutableVariables = absl::flat_hash_map<std::string, absl::Span<float>>;
using ConstVariables = absl::flat_hash_map<std::string, absl::Span<const float>>;

}  // namespace ps

#endif  // PS_COMMON_JOB_VARIABLES_H_
