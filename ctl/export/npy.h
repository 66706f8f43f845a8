// NumPy's .npy format (version 1.0), for results a user loads with one call:
// numpy.load("layer0_weights.npy").
#ifndef PS_CTL_EXPORT_NPY_H_
#define PS_CTL_EXPORT_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/file_system.h"

namespace ps {

// Writes little-endian float32 `values` of `shape` (C order) to `path`, atomically, through
// `fs`. Errors name the path.
// REQUIRES: the product of `shape` equals values.size().
absl::Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape,
                      absl::Span<const float> values, FileSystem* fs = FileSystem::Default());

}  // namespace ps

#endif  // PS_CTL_EXPORT_NPY_H_
