// Hugging Face's safetensors format, float32 only, for results a user loads with one call:
// safetensors.numpy.load_file("params.safetensors") (or torch's, or by hand with numpy).
//
// Layout: 8 bytes, a little-endian uint64 N; N bytes of UTF-8 JSON, an object mapping each
// tensor's name to {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, plus an
// optional "__metadata__" object of strings to strings, padded with trailing spaces so that
// 8 + N is a multiple of 8; then the data section: each tensor's values, little-endian, in C
// order. Offsets are bytes from the start of the data section; the tensors cover it exactly,
// without gaps or overlaps. WriteSafetensors lays them out in the order given, and writes the
// header's keys in that order too ("__metadata__" first).
#ifndef PS_CTL_EXPORT_SAFETENSORS_H_
#define PS_CTL_EXPORT_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/file_system.h"

namespace ps {

struct SafetensorsTensor {
  std::string name;
  std::vector<int64_t> shape;  // C order; product == values.size()
  absl::Span<const float> values;
};

// Writes `tensors` (float32, "F32") as one safetensors file at `path`, atomically, through `fs`.
// `metadata` goes into the header's "__metadata__" object (omitted when empty). Invalid input
// (an empty, duplicate, non-UTF-8 or "__metadata__" name, a negative dimension, a shape whose
// product is not values.size(), non-UTF-8 metadata) is INVALID_ARGUMENT naming the tensor, and
// nothing is written; the file system's errors name the path.
absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<SafetensorsTensor>& tensors,
                              const std::map<std::string, std::string>& metadata = {},
                              FileSystem* fs = FileSystem::Default());

struct SafetensorsEntry {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// Reads a safetensors file of F32 tensors (as WriteSafetensors writes them) back: name ->
// (shape, values), and the "__metadata__" object into `*metadata` when not null (emptied when
// the file has none; left alone on error). A file that breaks the layout above, or holds a
// dtype other than F32, is DATA_LOSS naming the path and what is wrong; the file system's
// errors (NOT_FOUND for a missing file) pass through.
absl::StatusOr<std::map<std::string, SafetensorsEntry>> ReadSafetensors(
    const std::string& path, std::map<std::string, std::string>* metadata = nullptr,
    FileSystem* fs = FileSystem::Default());

}  // namespace ps

#endif  // PS_CTL_EXPORT_SAFETENSORS_H_
